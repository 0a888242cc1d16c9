#include "convert.h"

#include <cmath>
#include <sstream>

#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/message/message_json.h"

namespace strata::python {

namespace {

// A module of the strata package, imported once and kept for the life of the process (module objects
// live until the interpreter ends; the reference is deliberately never released).
py::handle PackageModule(const char* name) {
  if (std::string_view(name) == "strata.errors") {
    static PyObject* errors = py::module_::import("strata.errors").release().ptr();
    return errors;
  }
  static PyObject* types = py::module_::import("strata.types").release().ptr();
  return types;
}

Status Bad(std::string_view where, const std::string& path, const std::string& what) {
  return Status::InvalidArgument(std::string(where) + (path.empty() ? "" : path) + ": " + what);
}

// "an int", "a list": for messages that name what was given instead.
std::string WithArticle(const std::string& noun) {
  bool vowel = !noun.empty() && std::string_view("aeiouAEIOU").find(noun[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + noun;
}

Status Append(py::handle value, std::string_view where, std::string& path, int depth, std::string* out) {
  if (depth > static_cast<int>(json::kMaxJsonDepth)) return Bad(where, path, "nested too deeply");
  PyObject* o = value.ptr();
  if (o == Py_None) {
    out->append("null");
  } else if (o == Py_True) {
    out->append("true");
  } else if (o == Py_False) {
    out->append("false");
  } else if (PyUnicode_Check(o)) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(o, &size);
    if (data == nullptr) {
      PyErr_Clear();
      return Bad(where, path, "a string that is not valid Unicode (a lone surrogate?)");
    }
    json::AppendString(out, {data, static_cast<size_t>(size)});
  } else if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) return Bad(where, path, "an integer beyond 64 bits");
    out->append(std::to_string(v));
  } else if (PyFloat_Check(o)) {
    double d = PyFloat_AS_DOUBLE(o);
    if (!std::isfinite(d)) return Bad(where, path, "a float that JSON cannot hold (nan or infinity)");
    json::AppendPythonFloat(out, d);
  } else if (PyDict_Check(o)) {
    out->push_back('{');
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    bool first = true;
    size_t base = path.size();
    while (PyDict_Next(o, &pos, &key, &item)) {
      if (!PyUnicode_Check(key)) return Bad(where, path, "a dict key that is not a string (" + TypeName(key) + ")");
      if (!first) out->push_back(',');
      first = false;
      Py_ssize_t size = 0;
      const char* k = PyUnicode_AsUTF8AndSize(key, &size);
      if (k == nullptr) {
        PyErr_Clear();
        return Bad(where, path, "a dict key that is not valid Unicode");
      }
      json::AppendString(out, {k, static_cast<size_t>(size)});
      out->push_back(':');
      path.append(".").append(k, static_cast<size_t>(size));
      STRATA_RETURN_IF_ERROR(Append(item, where, path, depth + 1, out));
      path.resize(base);
    }
    out->push_back('}');
  } else if (PyList_Check(o) || PyTuple_Check(o)) {
    out->push_back('[');
    py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
    size_t base = path.size();
    for (size_t i = 0; i < seq.size(); ++i) {
      if (i != 0) out->push_back(',');
      path.append("[").append(std::to_string(i)).append("]");
      STRATA_RETURN_IF_ERROR(Append(seq[i], where, path, depth + 1, out));
      path.resize(base);
    }
    out->push_back(']');
  } else if (py::hasattr(value, "to_dict")) {
    py::object d = value.attr("to_dict")();
    if (!PyDict_Check(d.ptr())) return Bad(where, path, TypeName(value) + ".to_dict() did not return a dict");
    return Append(d, where, path, depth + 1, out);
  } else {
    return Bad(where, path, "a " + TypeName(value) + ", which JSON cannot hold (use dict, list, str, int, float, bool or None)");
  }
  return Status::Ok();
}

template <typename J>
py::object FromJsonImpl(const J& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.template get<uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.template get<double>());
    case nlohmann::json::value_t::string: {
      const std::string& s = j.template get_ref<const std::string&>();
      PyObject* u = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
      if (u == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(u);
    }
    case nlohmann::json::value_t::array: {
      py::list out(j.size());
      size_t i = 0;
      for (const J& item : j) out[i++] = FromJsonImpl(item);
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (auto it = j.begin(); it != j.end(); ++it) out[py::str(it.key())] = FromJsonImpl(it.value());
      return out;
    }
    default: return py::none();  // Binary and discarded values never come out of Strata's views.
  }
}

}  // namespace

void Raise(const Status& status) {
  py::handle errors = PackageModule("strata.errors");
  py::object cls = errors.attr("error_class")(std::string(StatusCodeName(status.code())));
  py::object exc = cls(status.message());
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

Status AppendJson(py::handle value, std::string_view where, std::string* out) {
  std::string path;
  return Append(value, where, path, 0, out);
}

std::string ToJsonText(py::handle value, std::string_view where) {
  std::string out;
  Check(AppendJson(value, where, &out));
  return out;
}

py::object FromJson(const OrderedJson& j) { return FromJsonImpl(j); }
py::object FromJson(const nlohmann::json& j) { return FromJsonImpl(j); }

py::object FromJsonText(std::string_view text) {
  auto j = json::ParseOrDiscard<OrderedJson>(text);
  if (j.is_discarded()) Raise(Status::Internal("Strata produced JSON it cannot read back"));
  return FromJson(j);
}

py::object Record(const char* type, const OrderedJson& view) {
  return PackageModule("strata.types").attr(type)(FromJson(view));
}

py::list Records(const char* type, const std::vector<OrderedJson>& views) {
  py::object cls = PackageModule("strata.types").attr(type);
  py::list out(views.size());
  for (size_t i = 0; i < views.size(); ++i) out[i] = cls(FromJson(views[i]));
  return out;
}

py::object NodeList(py::list nodes, bool truncated) {
  return PackageModule("strata.types").attr("NodeList")(std::move(nodes), truncated);
}

Message MessageFromPy(py::handle value, std::string_view where) {
  if (PyUnicode_Check(value.ptr())) {
    // A str is a message's JSON text (a context.jsonl line); plain words are a mistake said as such.
    Result<Message> m = ParseMessage(value.cast<std::string>());
    if (!m.ok()) {
      Raise(Status::InvalidArgument(std::string(where) + ": a message is a dict like {\"role\": \"user\", \"content\": "
                                    "\"...\"} or its JSON text, and this str is not one (" + m.status().message() + ")"));
    }
    return std::move(*m);
  }
  if (!PyDict_Check(value.ptr()) && !py::hasattr(value, "to_dict") && !py::hasattr(value, "model_dump")) {
    Raise(Status::InvalidArgument(std::string(where) + ": a message is a dict like {\"role\": \"user\", \"content\": \"...\"}, not " +
                                  WithArticle(TypeName(value))));
  }
  std::string text;
  if (PyDict_Check(value.ptr()) || py::hasattr(value, "to_dict")) {
    Check(AppendJson(value, where, &text));
  } else {
    // A pydantic model (kosong's Message): its own JSON dump, as kimi-cli writes it.
    text = value.attr("model_dump_json")(py::arg("exclude_none") = true).cast<std::string>();
  }
  Result<Message> m = ParseMessage(text);
  if (!m.ok()) Raise(Status::InvalidArgument(std::string(where) + ": " + m.status().message()));
  return std::move(*m);
}

std::vector<Message> MessagesFromPy(py::handle value, std::string_view where) {
  std::vector<Message> out;
  if (PyDict_Check(value.ptr()) || PyUnicode_Check(value.ptr()) || py::hasattr(value, "model_dump")) {
    out.push_back(MessageFromPy(value, where));
    return out;
  }
  if (!py::isinstance<py::sequence>(value)) {
    Raise(Status::InvalidArgument(std::string(where) + ": give a message (a dict) or a list of them, not " +
                                  WithArticle(TypeName(value))));
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
  out.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i) {
    out.push_back(MessageFromPy(seq[i], std::string(where) + "[" + std::to_string(i) + "]"));
  }
  return out;
}

namespace {

py::str Str(std::string_view s) {
  // Strata keeps text valid UTF-8; anything else would be a bug, shown with replacement characters.
  PyObject* u = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (u == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(u);
}

}  // namespace

// Built field by field for the common shapes (text, tool calls), as AppendMessageJson writes them
// (message_json.h: exclude_none, one text part as a string); rarer parts go through their JSON.
// tests/test_context_log.py compares the two on every part type. Keys and role names are interned once.
py::dict MessageToPy(const Message& message) {
  struct Keys {
    PyObject *role, *name, *content, *type, *text, *tool_calls, *id, *function, *arguments, *extras, *tool_call_id,
        *partial, *function_type, *text_type;
    PyObject* roles[4];
  };
  static const Keys k = [] {
    auto intern = [](const char* s) { return PyUnicode_InternFromString(s); };  // Kept for the process.
    return Keys{intern("role"), intern("name"), intern("content"), intern("type"), intern("text"),
                intern("tool_calls"), intern("id"), intern("function"), intern("arguments"), intern("extras"),
                intern("tool_call_id"), intern("partial"), intern("function"), intern("text"),
                {intern("system"), intern("user"), intern("assistant"), intern("tool")}};
  }();
  auto set = [](PyObject* dict, PyObject* key, py::handle value) {
    if (PyDict_SetItem(dict, key, value.ptr()) != 0) throw py::error_already_set();
  };
  py::dict out;
  set(out.ptr(), k.role, k.roles[static_cast<int>(message.role)]);
  if (message.name) set(out.ptr(), k.name, Str(*message.name));
  if (message.content.size() == 1 && std::holds_alternative<TextPart>(message.content[0])) {
    set(out.ptr(), k.content, Str(std::get<TextPart>(message.content[0]).text));
  } else {
    py::list parts(message.content.size());
    for (size_t i = 0; i < message.content.size(); ++i) {
      if (const auto* text = std::get_if<TextPart>(&message.content[i])) {
        py::dict part;
        set(part.ptr(), k.type, k.text_type);
        set(part.ptr(), k.text, Str(text->text));
        parts[i] = std::move(part);
      } else {
        parts[i] = FromJsonText(ContentPartToJson(message.content[i]));
      }
    }
    set(out.ptr(), k.content, parts);
  }
  if (message.tool_calls) {
    py::list calls(message.tool_calls->size());
    for (size_t i = 0; i < message.tool_calls->size(); ++i) {
      const ToolCall& call = (*message.tool_calls)[i];
      py::dict c, function;
      set(c.ptr(), k.type, k.function_type);
      set(c.ptr(), k.id, Str(call.id));
      set(function.ptr(), k.name, Str(call.function.name));
      if (call.function.arguments) set(function.ptr(), k.arguments, Str(*call.function.arguments));
      set(c.ptr(), k.function, function);
      if (call.extras) set(c.ptr(), k.extras, FromJsonText(*call.extras));
      calls[i] = std::move(c);
    }
    set(out.ptr(), k.tool_calls, calls);
  }
  if (message.tool_call_id) set(out.ptr(), k.tool_call_id, Str(*message.tool_call_id));
  if (message.partial) set(out.ptr(), k.partial, *message.partial ? Py_True : Py_False);
  return out;
}

py::list MessagesToPy(const std::vector<Message>& messages) {
  py::list out(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) out[i] = MessageToPy(messages[i]);
  return out;
}

std::string TypeName(py::handle value) { return py::str(py::type::handle_of(value).attr("__name__")); }

int64_t CountArg(py::handle value, const char* name) {
  const int64_t n = IntArg(value, name);
  if (n < 0) Raise(Status::InvalidArgument("\"" + std::string(name) + "\" must be 0 or more, not " + std::to_string(n)));
  return n;
}

double RealArg(py::handle value, const char* name, double min, double max, std::string_view unit) {
  // A whole bound as an integer (86400, 1000000000000), another in its shortest form (0.1).
  auto bound = [](double d) {
    if (d == std::floor(d) && std::fabs(d) < 9e15) return std::to_string(static_cast<int64_t>(d));
    std::ostringstream out;
    out << d;
    return out.str();
  };
  const std::string range = "\"" + std::string(name) + "\" must be a number" + std::string(unit) + " from " + bound(min) +
                            " to " + bound(max);
  PyObject* o = value.ptr();
  if (PyBool_Check(o) || !(PyFloat_Check(o) || PyLong_Check(o))) Raise(Status::InvalidArgument(range + ", not " + TypeName(value)));
  const double d = PyFloat_AsDouble(o);
  if (PyErr_Occurred()) {  // An int beyond a double's range.
    PyErr_Clear();
    Raise(Status::InvalidArgument(range));
  }
  if (!std::isfinite(d) || d < min || d > max) {
    Raise(Status::InvalidArgument(range + ", not " + std::string(py::str(py::repr(value)))));
  }
  return d;
}

std::string TextArg(py::handle value, const std::string& what) {
  if (!PyUnicode_Check(value.ptr())) Raise(Status::InvalidArgument(what + " must be a string, not " + TypeName(value)));
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    Raise(Status::InvalidArgument(what + " is not valid Unicode (a lone surrogate?)"));
  }
  return std::string(data, static_cast<size_t>(size));
}

std::string LossyText(py::handle value) {
  py::object text = py::reinterpret_steal<py::object>(PyObject_Str(value.ptr()));
  if (!text) {
    PyErr_Clear();
    return "<" + TypeName(value) + " that cannot be shown>";
  }
  py::object bytes = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(text.ptr(), "utf-8", "replace"));
  if (!bytes) {
    PyErr_Clear();
    return "";
  }
  return std::string(PyBytes_AS_STRING(bytes.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(bytes.ptr())));
}

bool FlagArg(py::handle value, const char* name, bool if_none) {
  if (value.is_none()) return if_none;
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True;
  // numpy's bool is a flag too, as pybind's own bool conversion takes it (told by its type's name).
  const std::string_view type = Py_TYPE(value.ptr())->tp_name;
  if (type == "numpy.bool" || type == "numpy.bool_") {
    const int truth = PyObject_IsTrue(value.ptr());
    if (truth < 0) throw py::error_already_set();
    return truth == 1;
  }
  Raise(Status::InvalidArgument("\"" + std::string(name) + "\" must be True or False, not " + TypeName(value)));
}

int64_t IntArg(py::handle value, const char* name) {
  const std::string wrong = "\"" + std::string(name) + "\" must be an integer";
  PyObject* o = value.ptr();
  if (PyBool_Check(o)) Raise(Status::InvalidArgument(wrong + ", not a bool"));
  if (PyLong_Check(o) || (!PyFloat_Check(o) && PyIndex_Check(o))) {  // An int, or an int-like (numpy.int64).
    py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!as_int) {
      PyErr_Clear();
      Raise(Status::InvalidArgument(wrong));
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
    if (overflow != 0) Raise(Status::InvalidArgument(wrong + " of at most 64 bits"));
    return static_cast<int64_t>(v);
  }
  if (PyFloat_Check(o)) {
    double d = PyFloat_AsDouble(o);
    // Integral, and where a double still holds every integer (as the server reads a JSON number).
    if (d == std::floor(d) && std::fabs(d) <= 9007199254740992.0) return static_cast<int64_t>(d);
  }
  Raise(Status::InvalidArgument(wrong + ", not " + std::string(py::str(py::type::of(value).attr("__name__")))));
}

}  // namespace strata::python
