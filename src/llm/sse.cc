#include "strata/llm/sse.h"

namespace strata::llm {

void SseParser::Feed(std::string_view bytes, const Callback& on_event) {
  if (!started_) {
    // Drop a UTF-8 BOM, which may itself arrive split across chunks.
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    std::string probe = line_ + std::string(bytes.substr(0, kBom.size()));
    if (probe.size() < kBom.size() && kBom.substr(0, probe.size()) == probe) {
      line_ = probe;  // Could still be a BOM: wait for more bytes.
      return;
    }
    started_ = true;
    std::string head = std::move(line_);
    line_.clear();
    head += bytes;
    std::string_view all(head);
    if (all.substr(0, kBom.size()) == kBom) all.remove_prefix(kBom.size());
    Feed(all, on_event);
    return;
  }
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    char c = bytes[i];
    if (c != '\n' && c != '\r') {
      last_was_cr_ = false;
      continue;
    }
    if (c == '\n' && last_was_cr_ && i == start && line_.empty()) {
      // The LF of a CRLF whose CR ended the previous chunk (or the previous line here).
      last_was_cr_ = false;
      start = i + 1;
      continue;
    }
    line_.append(bytes.data() + start, i - start);
    ProcessLine(line_, on_event);
    line_.clear();
    last_was_cr_ = c == '\r';
    start = i + 1;
  }
  line_.append(bytes.data() + start, bytes.size() - start);
}

bool SseParser::Finish(const Callback& on_event, bool dispatch_incomplete) {
  if (!started_ && !line_.empty()) {
    started_ = true;
    std::string_view kBom = "\xEF\xBB\xBF";
    if (std::string_view(line_).substr(0, kBom.size()) == kBom) line_.erase(0, kBom.size());
  }
  if (!line_.empty()) {
    ProcessLine(line_, on_event);
    line_.clear();
  }
  bool incomplete = has_data_;
  if (incomplete && dispatch_incomplete) {
    ProcessLine("", on_event);
    return true;
  }
  data_.clear();
  has_data_ = false;
  type_.clear();
  return incomplete;
}

void SseParser::ProcessLine(std::string_view line, const Callback& on_event) {
  if (line.empty()) {
    if (has_data_) {
      SseEvent event;
      event.type = type_.empty() ? "message" : type_;
      event.data = std::move(data_);
      event.last_event_id = last_event_id_;
      event.retry_ms = retry_ms_;
      on_event(event);
    }
    data_.clear();
    has_data_ = false;
    type_.clear();
    return;
  }
  if (line[0] == ':') return;  // Comment (keep-alives).
  std::string_view field = line, value;
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (field == "event") {
    type_ = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_event_id_ = std::string(value);
  } else if (field == "retry") {
    if (!value.empty() && value.size() <= 15 && value.find_first_not_of("0123456789") == std::string_view::npos) {
      retry_ms_ = std::stoll(std::string(value));
    }
  }
  // Other fields are ignored.
}

}  // namespace strata::llm
