#include "cli_util.h"

#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>

#include "strata/tokenizer/message_counter.h"

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
  static auto* counters = new std::map<std::string, std::unique_ptr<MessageTokenCounter>>;
  std::lock_guard lock(mu);
  auto& slot = (*counters)[name];
  if (slot) return slot.get();
  if (name != "chars") {
    auto encoding = tokenizer::Encoding::Load(name);
    if (encoding.ok()) {
      slot = std::make_unique<tokenizer::EncodingMessageCounter>(*encoding);
      return slot.get();
    }
    Warn(encoding.status().message() + "; counting tokens as characters / 4");
  }
  slot = std::make_unique<CharRatioEstimator>(4);
  return slot.get();
}

}  // namespace strata::cli
