#include "cli_util.h"

#include <charconv>
#include <cstdlib>

#include "commands.h"

#include <iostream>
#include <iterator>
#include <set>
#include <memory>
#include <mutex>

#include "strata/engine/engine.h"
#include "strata/tokenizer/registry.h"

namespace strata::cli {

Result<std::string> ReadStdin() {
  std::string data((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) return Status::Internal("reading standard input failed");
  return data;
}

namespace {

// An error is one line of bounded length whatever it quotes: control characters are escaped and a message
// over kMaxBytes is cut at a UTF-8 boundary, saying how long it was.
std::string OneLine(std::string_view message) {
  constexpr size_t kMaxBytes = 2048;
  std::string out;
  size_t i = 0;
  for (; i < message.size() && out.size() < kMaxBytes; ++i) {
    unsigned char c = static_cast<unsigned char>(message[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < message.size()) {
    while (i < message.size() && (static_cast<unsigned char>(message[i]) & 0xC0) == 0x80) out += message[i++];
    out += "... (" + std::to_string(message.size()) + " bytes)";
  }
  return out;
}

}  // namespace

int Fail(const Status& status) {
  std::cerr << "strata: error: " << OneLine(status.message()) << " [" << StatusCodeName(status.code()) << "]\n";
  return ExitCodeFor(status.code());
}

void Warn(const std::string& message) { std::cerr << "strata: warning: " << OneLine(message) << "\n"; }

const MessageTokenCounter* LoadCounter(const std::string& name) {
  static std::mutex mu;
  static auto* warned = new std::set<std::string>;
  std::string warning;
  const MessageTokenCounter& counter = Engine::Counter(name, &warning);
  std::lock_guard lock(mu);
  if (!warning.empty() && warned->insert(name).second) Warn(warning);
  return &counter;
}

std::vector<std::string> CounterChoices() {
  std::vector<std::string> out;
  for (std::string_view name : tokenizer::CounterNames()) out.emplace_back(name);
  return out;
}

CLI::Validator NotEmpty() {
  return CLI::Validator([](std::string& value) { return value.empty() ? std::string("must not be empty") : std::string(); },
                        "", "not empty");
}

namespace {
CLI::Validator NumberFrom(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& value) -> std::string {
        char* end = nullptr;
        double d = std::strtod(value.c_str(), &end);
        if (value.empty() || end != value.c_str() + value.size()) return "must be a number, not \"" + value + "\"";
        if (zero_allowed ? d < 0 : d <= 0) return std::string(zero_allowed ? "must be 0 or more" : "must be more than 0") + ", not " + value;
        // A whole number past 64 bits would be read as the largest one (a different number, without a word).
        if (value.find_first_not_of("+0123456789") == std::string::npos && d > 9.2e18) {
          int64_t exact = 0;
          const char* digits = value.c_str() + (value[0] == '+' ? 1 : 0);
          if (std::from_chars(digits, value.c_str() + value.size(), exact).ec != std::errc()) {
            return "must be at most 9223372036854775807, not " + value;
          }
        }
        return std::string();
      },
      zero_allowed ? "NUMBER >= 0" : "NUMBER > 0", zero_allowed ? "non-negative" : "positive");
}
}  // namespace

CLI::Validator NonNegative() { return NumberFrom(true); }
CLI::Validator Positive() { return NumberFrom(false); }

}  // namespace strata::cli
