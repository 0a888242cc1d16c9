// Internal: the pieces of the Jinja2 engine shared by its source files.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "jinja_ast.h"
#include "strata/prompt/jinja.h"
#include "strata/prompt/value.h"

namespace strata::prompt::internal {

// jinja_parse.cc
Result<std::shared_ptr<const Tree>> ParseTemplate(std::string_view source, const JinjaOptions& options);
void AppendUtf8(uint32_t cp, std::string* out);

// jinja_filters.cc: the built-in filters and tests. `args` are the arguments after the value.
Result<Value> ApplyFilter(const std::string& name, const Value& value, CallArgs& args);
Result<bool> ApplyTest(const std::string& name, const Value& value, CallArgs& args);
bool HasFilter(const std::string& name);
// Python iteration: a list's items, a dict's keys, a string's code points; undefined iterates as empty.
Result<List> IterateValue(const Value& v);
bool HasTest(const std::string& name);

// jinja_format.cc: Python's printf-style `%` formatting and str.format.
Result<std::string> PercentFormat(const std::string& format, const Value& args);
Result<std::string> StrFormat(const std::string& format, CallArgs& args);
// kInvalidArgument ("a <what> cannot hold itself") when `value` is, or holds at any depth, the list or dict
// `container` (a list appended to itself, or a namespace set as its own attribute, made a value that
// printing, comparing or tojson followed forever); kResourceExhausted when `value` nests lists and dicts more
// than 500 deep (nesting built a level per loop step overflowed the stack of whatever read it).
Status CheckNotHolding(const Value& value, const void* container, std::string_view what);
// Attribute lookup that includes Python's methods on str, list and dict ("upper", "items", "get", ...).
// Returns an undefined Value when there is no such attribute.
Value GetAttribute(const Value& object, const std::string& name);
// Unicode-aware case mapping (ICU), like Python's str.lower / str.upper.
std::string ToLower(std::string_view s);
std::string ToUpper(std::string_view s);
// Splits a UTF-8 string into its code points, each as a string.
std::vector<std::string> CodePoints(std::string_view s);

// The limits of the render running on this thread (jinja.h RenderLimits), or nullptr outside a render.
const RenderLimits* ActiveLimits();
// kResourceExhausted when a string or list of `size` bytes/items would exceed the active render's limit.
Status CheckValueSize(size_t size, int line);

}  // namespace strata::prompt::internal
