// A Jinja2-compatible template engine, written for Strata (no packaged C++ engine exists), with the
// semantics of Python's Jinja2 3.1 default Environment: the same whitespace rules (no trim_blocks or
// lstrip_blocks unless asked for, `-` whitespace control, one trailing newline dropped, newlines
// normalised), Python truthiness, str()/repr() text, arithmetic (true division, floor division, modulo,
// banker's rounding in `round`), printf-style `%` and `str.format`, default Undefined (prints as "", is
// false, iterates as empty, fails when its attributes are used).
//
// Supported: {{ }}, {% %}, {# #}, raw; if/elif/else, for (tuple targets, inline `if`, else, `loop`
// variables, loop.cycle, recursive loops), set (names, tuples, namespace attributes, block set), macro,
// call blocks with caller(), filter blocks, with, block (rendered in place); literals, attribute and item
// access, slices, calls, filters, tests, the operators of Jinja2; globals range, dict, namespace, cycler,
// joiner; the built-in filters and tests listed in docs/prompts.md. Not supported (an error names them):
// template inheritance and inclusion (extends, include, import), loop controls (break/continue), autoescape.
//
// Errors name the template line: "line 3: unexpected end of template, expected 'endfor'".
//
// Thread safety: a parsed Template is immutable and may be rendered from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "strata/prompt/value.h"
#include "strata/util/status.h"

namespace strata::prompt {

namespace internal {
struct Tree;
}

struct JinjaOptions {
  bool trim_blocks = false;            // Drop the first newline after a block tag.
  bool lstrip_blocks = false;          // Strip spaces and tabs before a block tag at the start of a line.
  bool keep_trailing_newline = false;  // Keep the single trailing newline of the source.
};

// What one render may use, checked as it goes and, where the size is known in advance (range(),
// repetition, concatenation), before anything is built: a template from an untrusted file fails with a
// clear error instead of running for seconds and taking gigabytes.
struct RenderLimits {
  size_t max_output_bytes = 16u << 20;  // The rendered text (and any block captured by set or filter).
  size_t max_value_bytes = 16u << 20;   // One string or list built by *, + or ~ (bytes or items).
  size_t max_range = 1'000'000;         // Items of one range().
  int64_t max_steps = 2'000'000;        // Nodes rendered + expressions evaluated + loop iterations.
};

class Template {
 public:
  // Parses `source`. Syntax errors are kInvalidArgument with the line.
  static Result<Template> Parse(std::string_view source, const JinjaOptions& options = {});

  // Renders with the variables of `vars` (a dict; anything else counts as no variables). Render-time
  // errors (an undefined value used, a type error, division by zero) are kInvalidArgument with the line.
  // Exceeding a limit is kResourceExhausted naming it and the line.
  Result<std::string> Render(const Value& vars, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const internal::Tree> tree_;
};

}  // namespace strata::prompt
