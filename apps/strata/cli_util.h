// Small helpers shared by the `strata` subcommands: input reading and uniform error reporting.
#pragma once

#include <string>
#include <vector>

#include "strata/message/token_estimator.h"
#include "strata/util/status.h"

namespace strata::cli {

// Returns the contents of `arg`: stdin when it is "-" (or empty), else the text itself when `literal`,
// else the file it names.
Result<std::string> ReadStdin();

// Prints "strata: error: <message>" to stderr and returns the exit code for the status.
int Fail(const Status& status);

// Prints "strata: warning: <message>" to stderr.
void Warn(const std::string& message);

// Returns a token counter that lives as long as the process: a real tokenizer for "o200k_base" or
// "cl100k_base" (falling back to characters / 4 with a warning when the vocabulary cannot be loaded),
// kimi-cli's characters / 4 for "chars".
const MessageTokenCounter* LoadCounter(const std::string& name);
// The counter names --encoding accepts (tokenizer/registry.h), for CLI11's IsMember.
std::vector<std::string> CounterChoices();

}  // namespace strata::cli
