#include "strata/tokenizer/registry.h"

#include <map>
#include <memory>
#include <mutex>

#include "strata/tokenizer/encoding.h"
#include "strata/tokenizer/message_counter.h"

namespace strata::tokenizer {
namespace {

constexpr std::string_view kNames[] = {"o200k_base", "cl100k_base", "chars"};

struct Entry {
  std::unique_ptr<MessageTokenCounter> counter;
  std::shared_ptr<const Encoding> encoding;  // Null for characters / 4.
  std::string warning;
};

// Loaded on first use, kept for the process (never destroyed: counters are used by threads that may
// outlive static destruction).
const Entry& Get(std::string_view name) {
  static std::mutex mu;
  static auto* entries = new std::map<std::string, Entry, std::less<>>;
  std::lock_guard lock(mu);
  auto it = entries->find(name);
  if (it != entries->end()) return it->second;
  Entry entry;
  bool known = ValidateCounterName(name).ok();
  if (known && name != "chars") {
    Result<std::shared_ptr<const Encoding>> loaded = Encoding::Load(name);
    if (loaded.ok()) {
      entry.encoding = *loaded;
      entry.counter = std::make_unique<EncodingMessageCounter>(*loaded);
    } else {
      entry.warning = "the " + std::string(name) +
                      " vocabulary is not installed here (scripts/run fetches it; or set STRATA_VOCAB_DIR); "
                      "tokens are counted as characters / 4";
    }
  } else if (!known) {
    entry.warning = "no token counter \"" + std::string(name.substr(0, 40)) + "\"; tokens are counted as characters / 4";
  }
  if (!entry.counter) entry.counter = std::make_unique<CharRatioEstimator>(4);
  return entries->emplace(std::string(name), std::move(entry)).first->second;
}

}  // namespace

std::span<const std::string_view> CounterNames() { return kNames; }

Status ValidateCounterName(std::string_view name) {
  for (std::string_view n : kNames) {
    if (n == name) return Status::Ok();
  }
  std::string list;
  for (size_t i = 0; i < std::size(kNames); ++i) {
    list += (i == 0 ? "" : i + 1 == std::size(kNames) ? " or " : ", ") + std::string(kNames[i]);
  }
  std::string shown(name.substr(0, 40));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return Status::InvalidArgument("encoding must be " + list + ", not \"" + shown + "\"");
}

Result<const MessageTokenCounter*> FindCounter(std::string_view name, std::string* warning) {
  STRATA_RETURN_IF_ERROR(ValidateCounterName(name));
  return &CounterFor(name, warning);
}

const MessageTokenCounter& CounterFor(std::string_view name, std::string* warning) {
  const Entry& entry = Get(name);
  if (warning != nullptr) *warning = entry.warning;
  return *entry.counter;
}

Result<std::shared_ptr<const Encoding>> EncodingFor(std::string_view name) {
  STRATA_RETURN_IF_ERROR(ValidateCounterName(name));
  if (name == "chars") return Status::InvalidArgument("\"chars\" counts characters / 4; it has no tokens to encode or decode");
  const Entry& entry = Get(name);
  if (!entry.encoding) return Status::Unavailable(entry.warning);
  return entry.encoding;
}

int64_t CountText(std::string_view name, std::string_view text, std::string* warning) {
  const Entry& entry = Get(name);
  if (warning != nullptr) *warning = entry.warning;
  if (entry.encoding) return static_cast<int64_t>(entry.encoding->Count(text));
  return static_cast<int64_t>((text.size() + 3) / 4);
}

}  // namespace strata::tokenizer
