// Fuzz target: ExtractModelJson, which reads JSON out of model replies (untrusted text). Any reply returns
// a value or an error; a value is always valid JSON of the shape asked for, and extracting an object or
// array from it again gives it back.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "strata/llm/model_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view reply(reinterpret_cast<const char*>(data), size);
  using strata::llm::JsonShape;
  for (JsonShape shape : {JsonShape::kAny, JsonShape::kObject, JsonShape::kArray}) {
    auto out = strata::llm::ExtractModelJson(reply, shape);
    if (!out.ok()) {
      if (out.status().message().empty()) std::abort();  // Errors say what was wrong.
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(*out, nullptr, false);
    if (j.is_discarded()) std::abort();
    if (shape == JsonShape::kObject && !j.is_object()) std::abort();
    if (shape == JsonShape::kArray && !j.is_array()) std::abort();
    if (!j.is_object() && !j.is_array()) continue;  // A scalar from a code block is not found in prose.
    auto again = strata::llm::ExtractModelJson(*out, shape);
    if (!again.ok() || nlohmann::json::parse(*again, nullptr, false) != j) std::abort();
  }
  return 0;
}
