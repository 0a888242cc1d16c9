#include "cli_util.h"

#include <iostream>
#include <iterator>

namespace strata::cli {

Result<std::string> ReadStdin() {
  std::string data((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) return Status::Internal("reading standard input failed");
  return data;
}

int Fail(const Status& status) {
  std::cerr << "strata: error: " << status.message() << " [" << StatusCodeName(status.code()) << "]\n";
  return ExitCodeFor(status.code());
}

void Warn(const std::string& message) { std::cerr << "strata: warning: " << message << "\n"; }

}  // namespace strata::cli
