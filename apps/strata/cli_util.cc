#include "cli_util.h"

#include <iostream>
#include <iterator>
#include <set>
#include <memory>
#include <mutex>

#include "strata/engine/engine.h"

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

const MessageTokenCounter* LoadCounter(const std::string& name) {
  static std::mutex mu;
  static auto* warned = new std::set<std::string>;
  std::string warning;
  const MessageTokenCounter& counter = Engine::Counter(name, &warning);
  std::lock_guard lock(mu);
  if (!warning.empty() && warned->insert(name).second) Warn(warning);
  return &counter;
}

}  // namespace strata::cli
