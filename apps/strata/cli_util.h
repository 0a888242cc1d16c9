// Small helpers shared by the `strata` subcommands: input reading and uniform error reporting.
#pragma once

#include <string>

#include "strata/util/status.h"

namespace strata::cli {

// Returns the contents of `arg`: stdin when it is "-" (or empty), else the text itself when `literal`,
// else the file it names.
Result<std::string> ReadStdin();

// Prints "strata: error: <message>" to stderr and returns the exit code for the status.
int Fail(const Status& status);

// Prints "strata: warning: <message>" to stderr.
void Warn(const std::string& message);

}  // namespace strata::cli
