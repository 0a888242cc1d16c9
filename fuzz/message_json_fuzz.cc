// Fuzz target: the message JSON reader. Any input must either be rejected with a status or parse into
// messages whose dump reads back to the same messages.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/message/message_json.h"
#include "strata/message/stream_merge.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto messages = strata::ParseMessages(text);
  if (messages.ok()) {
    for (const strata::Message& m : *messages) {
      std::string dumped = strata::MessageToJson(m);
      auto again = strata::ParseMessage(dumped);
      if (!again.ok() || !(*again == m)) std::abort();  // The writer and reader disagree.
    }
  }
  auto part = strata::ParseStreamedPart(text);
  if (part.ok()) {
    strata::StreamMerger merger;
    merger.Push(*part);
    merger.Push(*part);
    (void)merger.Finish();
  }
  return 0;
}
