// Between Python values and Strata's: errors as strata.errors exceptions, Python values as JSON, JSON views
// as the record classes of strata/types.py, messages as plain dicts in kosong's shape both ways.
//
// Every function here needs the interpreter lock; none of them calls into the engine.
#pragma once

#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata::python {

namespace py = pybind11;
using OrderedJson = nlohmann::ordered_json;

// Raises the strata.errors class for `status`'s code, carrying its message (never returns).
[[noreturn]] void Raise(const Status& status);

inline void Check(const Status& status) {
  if (!status.ok()) Raise(status);
}
template <typename T>
T Check(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(*result);
}

// Runs `f` (a call into the engine) without the interpreter lock, so other Python threads run meanwhile.
template <typename F>
auto NoGil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// Appends `value` as compact JSON to `out`: dict (str keys), list, tuple, str, int, float, bool, None, and
// record objects (their to_dict()). Anything else is kInvalidArgument naming `where` and the path inside.
Status AppendJson(py::handle value, std::string_view where, std::string* out);
// `value` as JSON text, or a raised InvalidArgumentError.
std::string ToJsonText(py::handle value, std::string_view where);

// A JSON value as Python objects (dict, list, str, int, float, bool, None).
py::object FromJson(const OrderedJson& j);
py::object FromJson(const nlohmann::json& j);
// JSON text as Python objects; text that is not JSON raises InternalError (it comes from Strata itself).
py::object FromJsonText(std::string_view text);

// A JSON view wrapped in the record class `type` of strata.types (e.g. "Hit", "Node").
py::object Record(const char* type, const OrderedJson& view);
// A list of views, each wrapped in `type`.
py::list Records(const char* type, const std::vector<OrderedJson>& views);

// A message from a dict in kosong's shape (or JSON text of one); errors name `where` and the field.
Message MessageFromPy(py::handle value, std::string_view where);
// One message (a dict) or a sequence of them.
std::vector<Message> MessagesFromPy(py::handle value, std::string_view where);
// A message as the dict kosong's model_dump(exclude_none=True) gives.
py::dict MessageToPy(const Message& message);
py::list MessagesToPy(const std::vector<Message>& messages);

}  // namespace strata::python
