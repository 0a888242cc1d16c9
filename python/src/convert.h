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
// `strata.types.NodeList(nodes, truncated)`: what ls and tree return.
py::object NodeList(py::list nodes, bool truncated);

// A message from a dict in kosong's shape (or JSON text of one); errors name `where` and the field.
Message MessageFromPy(py::handle value, std::string_view where);
// One message (a dict) or a sequence of them.
std::vector<Message> MessagesFromPy(py::handle value, std::string_view where);
// A message as the dict kosong's model_dump(exclude_none=True) gives.
py::dict MessageToPy(const Message& message);
py::list MessagesToPy(const std::vector<Message>& messages);

// An integer argument read as the server reads one from JSON: an int, or a float with an integral value
// (2.0), in int64's range; a bool or anything else raises InvalidArgumentError "\"<name>\" must be an
// integer", as strata.Client does (pybind took True for 1, refused 2.0 with a TypeError, and 2**70 with a
// RuntimeError).
int64_t IntArg(py::handle value, const char* name);

// A count that is 0 or more, read with IntArg: "\"<name>\" must be 0 or more, not N" otherwise.
int64_t CountArg(py::handle value, const char* name);
// A real number in [min, max] (an int or a float; not a bool, NaN or infinity), the error naming `name`:
// "\"<name>\" must be a number<unit> from <min> to <max>, not …".
double RealArg(py::handle value, const char* name, double min, double max, std::string_view unit = "");
// A str as UTF-8; "<what> must be a string" / "<what> is not valid Unicode (a lone surrogate?)" otherwise
// (pybind's cast said "Unable to cast Python instance" and named nothing).
std::string TextArg(py::handle value, const std::string& what);
// A str as UTF-8 whatever it holds: a lone surrogate becomes "?", as Python's "replace" has it (text shown,
// never refused: a tool's result or error for the model).
std::string LossyText(py::handle value);

// Python's own name for the type of `value` ("set", "bytes", "MyClass").
std::string TypeName(py::handle value);

// A parameter that takes any Python value, read with IntArg where it is used (so the error names it).
struct Int {
  py::object value;
  int64_t Get(const char* name) const { return IntArg(value, name); }
};

// A flag: True or False, None for its default; a truthy string or number is a mistake to name, not to take
// (as over HTTP and in the Client: "" was a forced, recursive delete there, and pybind's own conversion
// took 0 and 1 and raised TypeError for a string).
bool FlagArg(py::handle value, const char* name, bool if_none);

// A parameter that takes any Python value, read with FlagArg where it is used.
struct Flag {
  py::object value;
  bool Get(const char* name, bool if_none = false) const { return FlagArg(value, name, if_none); }
};

}  // namespace strata::python

namespace pybind11::detail {
template <>
struct type_caster<strata::python::Int> {
  PYBIND11_TYPE_CASTER(strata::python::Int, const_name("int"));
  bool load(handle src, bool) {
    if (src.is_none()) return false;  // Where None is allowed the parameter is std::optional<Int>.
    value.value = reinterpret_borrow<object>(src);
    return true;
  }
  static handle cast(const strata::python::Int& v, return_value_policy, handle) { return v.value.inc_ref(); }
};
template <>
struct type_caster<strata::python::Flag> {
  PYBIND11_TYPE_CASTER(strata::python::Flag, const_name("bool"));
  bool load(handle src, bool) {
    value.value = reinterpret_borrow<object>(src);
    return true;
  }
  static handle cast(const strata::python::Flag& v, return_value_policy, handle) { return v.value.inc_ref(); }
};
}  // namespace pybind11::detail
