// SseParser: an incremental parser for Server-Sent Events (the WHATWG "text/event-stream" format), the
// framing every streaming chat API uses.
//
// Bytes may arrive split anywhere (inside a line, between CR and LF, inside a UTF-8 sequence); the parser
// keeps what it needs across Feed() calls. Rules (WHATWG HTML, "Interpreting an event stream"): lines end
// with CRLF, LF or CR; a leading UTF-8 BOM is dropped; a line starting with ':' is a comment; "field:value"
// drops one space after the colon, a line without a colon is a field with an empty value; `data` lines are
// joined with "\n"; `event` sets the type, `id` the last event id (ignored if it contains NUL), `retry` the
// reconnection time (digits only); an empty line dispatches the event if it has data, and an event still
// being assembled when the stream ends is discarded. Provider conventions such as OpenAI's `[DONE]` are
// left to the caller (they arrive as ordinary data).
//
// Thread safety: not thread-safe; one parser per stream.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace strata::llm {

struct SseEvent {
  std::string type = "message";  // The `event` field, "message" when absent.
  std::string data;              // `data` lines joined with "\n".
  std::string last_event_id;     // The last `id` seen on the stream (persists across events).
  std::optional<int64_t> retry_ms;  // The last valid `retry` seen on the stream.
  bool operator==(const SseEvent&) const = default;
};

class SseParser {
 public:
  using Callback = std::function<void(const SseEvent&)>;

  // Parses `bytes`, calling `on_event` for each event completed by them (in order).
  void Feed(std::string_view bytes, const Callback& on_event);
  // Ends the stream. A partial last line is processed. An event without its terminating empty line is
  // discarded, as the specification requires, unless `dispatch_incomplete` (for servers known to omit
  // the final blank line). Returns whether an incomplete event was left at the end.
  bool Finish(const Callback& on_event, bool dispatch_incomplete = false);

  // Returns the number of bytes buffered for an incomplete line.
  size_t buffered() const { return line_.size(); }

 private:
  void ProcessLine(std::string_view line, const Callback& on_event);

  std::string line_;             // The current, unterminated line.
  bool started_ = false;         // A BOM is only dropped at the very start.
  bool last_was_cr_ = false;     // The previous chunk ended with CR: a leading LF is part of that line end.
  std::string data_;             // Data of the event being assembled.
  bool has_data_ = false;
  std::string type_;
  std::string last_event_id_;
  std::optional<int64_t> retry_ms_;
};

}  // namespace strata::llm
