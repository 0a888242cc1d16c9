#include "strata/tokenizer/message_counter.h"

#include <simdjson.h>

#include <functional>

#include "strata/message/message_json.h"

namespace strata::tokenizer {

int64_t EncodingMessageCounter::CountMessage(const Message& m) const {
  const Encoding& e = *encoding_;
  int64_t n = kTokensPerMessage + static_cast<int64_t>(e.Count(RoleName(m.role)));
  if (m.name) n += static_cast<int64_t>(e.Count(*m.name)) + 1;
  for (const ContentPart& part : m.content) {
    if (const auto* text = std::get_if<TextPart>(&part)) n += static_cast<int64_t>(e.Count(text->text));
    if (const auto* think = std::get_if<ThinkPart>(&part)) n += static_cast<int64_t>(e.Count(think->think));
    if (const auto* media = std::get_if<MediaPart>(&part)) n += EstimateMediaTokens(*media);
  }
  if (m.tool_calls) {
    for (const ToolCall& call : *m.tool_calls) {
      n += static_cast<int64_t>(e.Count(call.function.name));
      if (call.function.arguments) n += static_cast<int64_t>(e.Count(*call.function.arguments));
    }
  }
  if (m.tool_call_id) n += static_cast<int64_t>(e.Count(*m.tool_call_id));
  return n;
}

int64_t EncodingMessageCounter::CountMessages(std::span<const Message> messages) const {
  int64_t n = 0;
  for (const Message& m : messages) n += CountMessage(m);
  return n;
}

int64_t EncodingMessageCounter::CountPrompt(std::span<const Message> messages) const {
  return CountMessages(messages) + kReplyPriming;
}

namespace {

void AppendCompact(simdjson::dom::element e, std::string* out) {
  // simdjson's minifier keeps escapes as written; the count is an estimate either way.
  *out += simdjson::minify(e);
}

}  // namespace

Result<int64_t> EncodingMessageCounter::CountToolSchemas(std::string_view tools_json) const {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(tools_json);
  simdjson::dom::array tools;
  if (parser.parse(padded).get(tools) != simdjson::SUCCESS) {
    return Status::InvalidArgument("tools must be a JSON array of tool definitions");
  }
  int64_t n = 0;
  size_t index = 0;
  for (simdjson::dom::element tool : tools) {
    simdjson::dom::object fn;
    simdjson::dom::object wrapper;
    if (tool.get(wrapper) != simdjson::SUCCESS) {
      return Status::InvalidArgument("tools[" + std::to_string(index) + "]: expected an object");
    }
    simdjson::dom::element inner;
    if (wrapper["function"].get(inner) == simdjson::SUCCESS && inner.get(fn) == simdjson::SUCCESS) {
      // {"type":"function","function":{...}}
    } else {
      fn = wrapper;
    }
    std::string_view name, description;
    if (fn["name"].get(name) != simdjson::SUCCESS) {
      return Status::InvalidArgument("tools[" + std::to_string(index) + "].name: required string missing");
    }
    n += kTokensPerTool + static_cast<int64_t>(encoding_->Count(name));
    if (fn["description"].get(description) == simdjson::SUCCESS) n += static_cast<int64_t>(encoding_->Count(description));
    simdjson::dom::element params;
    if (fn["parameters"].get(params) == simdjson::SUCCESS) {
      std::string compact;
      AppendCompact(params, &compact);
      n += static_cast<int64_t>(encoding_->Count(compact));
    }
    ++index;
  }
  return index == 0 ? 0 : n + kToolsPreamble;
}

int64_t CachingMessageCounter::CountMessages(std::span<const Message> messages) const {
  int64_t total = 0;
  std::string json;
  for (const Message& m : messages) {
    json.clear();
    AppendMessageJson(m, &json);
    uint64_t key = std::hash<std::string_view>()(json) ^ (static_cast<uint64_t>(json.size()) * 0x9E3779B97F4A7C15ull);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = counts_.find(key);
      if (it != counts_.end()) {
        ++hits_;
        total += it->second;
        continue;
      }
    }
    // Count outside the lock: tokenising is the slow part and other threads may count meanwhile.
    int64_t count = inner_->CountMessages(std::span<const Message>(&m, 1));
    std::lock_guard<std::mutex> lock(mu_);
    ++misses_;
    if (counts_.size() >= max_entries_) counts_.clear();
    counts_.emplace(key, count);
    total += count;
  }
  return total;
}

uint64_t CachingMessageCounter::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t CachingMessageCounter::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace strata::tokenizer
