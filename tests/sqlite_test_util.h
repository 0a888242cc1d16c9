// Reading and staging a SQLite file behind a component's back (what an older build or a damaged disk left).
#pragma once

#include <string>
#include <vector>

#include "strata/util/status.h"

namespace strata::testing {

// Runs `sql` (one or more statements) on the SQLite database at `path`; returns the first column of every
// row the statements produced (NULL as ""). kInternal with SQLite's message when it fails.
Result<std::vector<std::string>> SqliteRows(const std::string& path, const std::string& sql);

}  // namespace strata::testing
