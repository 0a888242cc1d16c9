// StreamMerger: folds the parts a streaming provider yields into one assistant Message (kosong's
// `merge_in_place` semantics, with provider indices honoured for parallel tool calls).
//
// Rules, in order of arrival:
//   - text joins the text part just before it; think joins the think part just before it while that part is
//     unsigned; a think part carrying `encrypted` signs (and closes) the part it joins;
//   - media and custom parts never join anything; any part that does not join closes the run before it;
//   - a ToolCall starts a new call; a ToolCallPart's arguments join the call being streamed, or with an
//     `index`, the open call with that index, so interleaved parallel calls are never cross-wired;
//     a null fragment changes nothing; fragments with no call to join (orphans) are dropped;
//   - a call is complete, and `on_tool_call` fires for it, when the stream moves past it: for calls without
//     an index, when anything else arrives; for calls with an index, when a content part arrives or the
//     stream finishes (a later fragment may still name them).
// Finish() fails with kUnavailable ("empty response", retryable) when the stream produced no text, no media
// and no tool call (nothing at all, or thinking only).
//
// Thread safety: not thread-safe; one merger per stream.
#pragma once

#include <functional>

#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata {

class StreamMerger {
 public:
  // Called once per completed tool call, in completion order. Must not call back into the merger.
  using ToolCallCallback = std::function<void(const ToolCall&)>;

  explicit StreamMerger(ToolCallCallback on_tool_call = nullptr);

  // Folds `part` into the message.
  void Push(StreamedPart part);

  // Completes pending tool calls and returns the merged assistant message. Call once.
  Result<Message> Finish();

  // Returns the message merged so far (tool calls may still be incomplete).
  const Message& message() const { return message_; }

 private:
  void CloseUnindexedCalls();
  void CloseAllCalls();
  void Fire(size_t call);

  ToolCallCallback on_tool_call_;
  Message message_;
  bool content_open_ = false;       // The last content part may absorb the next part.
  std::optional<size_t> current_;   // The call that index-less fragments join.
  std::vector<size_t> open_calls_;  // Calls not yet reported complete, in arrival order.
};

// Merges a whole stream at once. `on_tool_call` as in StreamMerger.
Result<Message> MergeStream(const std::vector<StreamedPart>& parts,
                            StreamMerger::ToolCallCallback on_tool_call = nullptr);

}  // namespace strata
