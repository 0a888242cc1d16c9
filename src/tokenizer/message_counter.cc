#include "strata/tokenizer/message_counter.h"

namespace strata::tokenizer {

int64_t EncodingMessageCounter::CountMessage(const Message& m) const {
  const Encoding& e = *encoding_;
  int64_t n = kTokensPerMessage + static_cast<int64_t>(e.Count(RoleName(m.role)));
  if (m.name) n += static_cast<int64_t>(e.Count(*m.name)) + 1;
  for (const ContentPart& part : m.content) {
    if (const auto* text = std::get_if<TextPart>(&part)) n += static_cast<int64_t>(e.Count(text->text));
    if (const auto* think = std::get_if<ThinkPart>(&part)) n += static_cast<int64_t>(e.Count(think->think));
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

}  // namespace strata::tokenizer
