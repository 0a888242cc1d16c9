#include "strata/message/stream_merge.h"

#include <algorithm>

namespace strata {

StreamMerger::StreamMerger(ToolCallCallback on_tool_call) : on_tool_call_(std::move(on_tool_call)) {
  message_.role = Role::kAssistant;
}

void StreamMerger::Fire(size_t call) {
  if (on_tool_call_) on_tool_call_((*message_.tool_calls)[call]);
}

// Calls are only added at the back of open_calls_, each after the unindexed ones before it were closed, so
// an open unindexed call can only be the newest: closing it is O(1) (the scan of every open call made a
// reply of N indexed calls O(N^2): 200,000 took a minute).
void StreamMerger::CloseUnindexedCalls() {
  if (!open_calls_.empty() && !(*message_.tool_calls)[open_calls_.back()].index.has_value()) {
    Fire(open_calls_.back());
    open_calls_.pop_back();
  }
}

void StreamMerger::CloseAllCalls() {
  for (size_t call : open_calls_) Fire(call);
  open_calls_.clear();
  current_.reset();
}

void StreamMerger::Push(StreamedPart part) {
  if (auto* content = std::get_if<ContentPart>(&part)) {
    CloseAllCalls();
    if (content_open_ && !message_.content.empty()) {
      ContentPart& last = message_.content.back();
      auto* last_text = std::get_if<TextPart>(&last);
      auto* new_text = std::get_if<TextPart>(content);
      if (last_text && new_text) {
        last_text->text += new_text->text;
        return;
      }
      auto* last_think = std::get_if<ThinkPart>(&last);
      auto* new_think = std::get_if<ThinkPart>(content);
      if (last_think && new_think && !last_think->encrypted) {
        last_think->think += new_think->think;
        if (new_think->encrypted) last_think->encrypted = std::move(new_think->encrypted);
        return;
      }
    }
    bool mergeable = std::holds_alternative<TextPart>(*content) || std::holds_alternative<ThinkPart>(*content);
    message_.content.push_back(std::move(*content));
    content_open_ = mergeable;
    return;
  }
  content_open_ = false;
  if (auto* call = std::get_if<ToolCall>(&part)) {
    // A new call completes the unindexed call before it; indexed calls may still receive fragments.
    CloseUnindexedCalls();
    if (!message_.tool_calls) message_.tool_calls.emplace();
    message_.tool_calls->push_back(std::move(*call));
    current_ = message_.tool_calls->size() - 1;
    open_calls_.push_back(*current_);
    return;
  }
  auto& fragment = std::get<ToolCallPart>(part);
  std::optional<size_t> target;
  // The newest call is open when it is the back of open_calls_ (calls close newest first, or all at once).
  const bool current_open = current_ && !open_calls_.empty() && open_calls_.back() == *current_;
  if (fragment.index) {
    // Newest first: fragments almost always join the call being streamed.
    for (auto it = open_calls_.rbegin(); it != open_calls_.rend(); ++it) {
      if ((*message_.tool_calls)[*it].index == fragment.index) {
        target = *it;
        break;
      }
    }
    // A fragment naming an index no call has: it may still belong to an index-less call being streamed.
    if (!target && current_open && !(*message_.tool_calls)[*current_].index) target = current_;
  } else if (current_open) {
    target = current_;
  }
  if (!target) return;  // Orphan: no open call to join.
  if (!fragment.arguments_part) return;
  std::optional<std::string>& args = (*message_.tool_calls)[*target].function.arguments;
  if (args) {
    *args += *fragment.arguments_part;
  } else {
    args = std::move(fragment.arguments_part);
  }
}

Result<Message> StreamMerger::Finish() {
  CloseAllCalls();
  content_open_ = false;
  bool has_output = message_.tool_calls && !message_.tool_calls->empty();
  for (const ContentPart& part : message_.content) {
    if (std::holds_alternative<ThinkPart>(part)) continue;
    if (const auto* text = std::get_if<TextPart>(&part); text && text->text.empty()) continue;
    has_output = true;
  }
  if (!has_output) {
    return Status::Unavailable(message_.content.empty()
                                   ? "empty response: the stream produced no parts"
                                   : "empty response: the stream produced only thinking, no text or tool call");
  }
  Message out = std::move(message_);
  if (out.tool_calls) {
    for (ToolCall& call : *out.tool_calls) call.index.reset();
  }
  message_ = Message();
  message_.role = Role::kAssistant;
  return out;
}

Result<Message> MergeStream(const std::vector<StreamedPart>& parts, StreamMerger::ToolCallCallback on_tool_call) {
  StreamMerger merger(std::move(on_tool_call));
  for (const StreamedPart& part : parts) merger.Push(part);
  return merger.Finish();
}

}  // namespace strata
