// Fuzz target: the prompt template loader (YAML + Jinja2) and the renderer, on untrusted template files.
// Any input loads or fails with an error; a loaded template renders (with no variables, under tight
// limits) or fails with an error. Nothing may crash, hang or take unbounded memory.
#include <cstdint>
#include <string_view>

#include "strata/prompt/jinja.h"
#include "strata/prompt/prompt_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64u << 10)) return 0;  // Larger inputs only slow the search down.
  std::string_view text(reinterpret_cast<const char*>(data), size);
  strata::prompt::Value vars(strata::prompt::Dict{});
  // The input as a whole template file.
  auto loaded = strata::prompt::PromptTemplate::FromYaml(text, "fuzz.yaml");
  if (loaded.ok()) (void)loaded->Render(vars);
  // The input as Jinja2 source.
  auto parsed = strata::prompt::Template::Parse(text);
  if (parsed.ok()) {
    (void)parsed->Render(vars, {.max_output_bytes = 1u << 20, .max_value_bytes = 1u << 20, .max_range = 10'000,
                                .max_steps = 100'000});
  }
  return 0;
}
