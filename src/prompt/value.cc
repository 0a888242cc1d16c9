#include "strata/prompt/value.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/message/token_estimator.h"

namespace strata::prompt {
namespace {

Value FromNlohmann(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<int64_t>(u)) : Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(FromNlohmann(e));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.reserve(j.size());
      for (const auto& [k, v] : j.items()) d.emplace_back(Value(k), FromNlohmann(v));
      return Value(std::move(d));
    }
    default: return Value::None();
  }
}

void AppendRepr(const Value& v, std::string* out);

void AppendStringRepr(const std::string& s, std::string* out) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  out->push_back(quote);
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out->push_back('\\');
      out->push_back(quote);
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      *out += buf;
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back(quote);
}

void AppendRepr(const Value& v, std::string* out) {
  switch (v.type()) {
    case Value::Type::kString: AppendStringRepr(v.as_string(), out); return;
    case Value::Type::kList: {
      out->push_back(v.is_tuple() ? '(' : '[');
      bool first = true;
      for (const Value& e : v.as_list()) {
        if (!first) *out += ", ";
        first = false;
        AppendRepr(e, out);
      }
      if (v.is_tuple() && v.as_list().size() == 1) out->push_back(',');
      out->push_back(v.is_tuple() ? ')' : ']');
      return;
    }
    case Value::Type::kDict: {
      if (v.is_namespace()) *out += "<Namespace ";
      out->push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.as_dict()) {
        if (!first) *out += ", ";
        first = false;
        AppendRepr(k, out);
        *out += ": ";
        AppendRepr(e, out);
      }
      out->push_back('}');
      if (v.is_namespace()) out->push_back('>');
      return;
    }
    case Value::Type::kUndefined: *out += "Undefined"; return;
    default: *out += v.Str();
  }
}

Status AppendJson(const Value& v, bool sort_keys, int indent, int depth, std::string* out) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.type()) {
    case Value::Type::kNone: *out += "null"; return Status::Ok();
    case Value::Type::kBool: *out += v.as_bool() ? "true" : "false"; return Status::Ok();
    case Value::Type::kInt: *out += std::to_string(v.as_int()); return Status::Ok();
    case Value::Type::kFloat: {
      double d = v.as_double();
      if (std::isnan(d)) *out += "NaN";
      else if (std::isinf(d)) *out += d > 0 ? "Infinity" : "-Infinity";
      else json::AppendPythonFloat(out, d);
      return Status::Ok();
    }
    case Value::Type::kString: json::AppendString(out, v.as_string(), json::StringStyle::kAsciiEscape); return Status::Ok();
    case Value::Type::kList: {
      if (v.as_list().empty()) {
        *out += "[]";
        return Status::Ok();
      }
      out->push_back('[');
      bool first = true;
      for (const Value& e : v.as_list()) {
        if (!first) *out += indent >= 0 ? "," : ", ";
        first = false;
        newline(depth + 1);
        STRATA_RETURN_IF_ERROR(AppendJson(e, sort_keys, indent, depth + 1, out));
      }
      newline(depth);
      out->push_back(']');
      return Status::Ok();
    }
    case Value::Type::kDict: {
      if (v.as_dict().empty()) {
        *out += "{}";
        return Status::Ok();
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.as_dict()) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) {
          auto less = Less(a->first, b->first);
          return less.ok() && *less;
        });
      }
      out->push_back('{');
      bool first = true;
      for (const auto* kv : items) {
        if (!first) *out += indent >= 0 ? "," : ", ";
        first = false;
        newline(depth + 1);
        std::string key = kv->first.is_string() ? kv->first.as_string() : kv->first.Str();
        if (kv->first.is_bool()) key = kv->first.as_bool() ? "true" : "false";
        if (kv->first.is_none()) key = "null";
        json::AppendString(out, key, json::StringStyle::kAsciiEscape);
        *out += ": ";
        STRATA_RETURN_IF_ERROR(AppendJson(kv->second, sort_keys, indent, depth + 1, out));
      }
      newline(depth);
      out->push_back('}');
      return Status::Ok();
    }
    default:
      return Status::InvalidArgument("Object of type " + v.TypeName() + " is not JSON serializable");
  }
}

}  // namespace

Value Value::Func(std::string name, Function f) {
  Value v(Type::kFunction);
  v.str_ = std::move(name);
  v.func_ = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::Tuple(List l) {
  Value v(std::move(l));
  v.namespace_ = true;
  return v;
}

Value Value::Namespace(Dict d) {
  Value v(std::move(d));
  v.namespace_ = true;
  return v;
}

Result<Value> Value::FromJson(std::string_view json) {
  auto j = strata::json::ParseOrDiscard<nlohmann::ordered_json>(json);
  if (j.is_discarded()) return Status::InvalidArgument("invalid JSON: " + json::DescribeSyntaxError(json));
  return FromNlohmann(j);
}

const Value* Value::Find(const Value& key) const {
  if (type_ != Type::kDict) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Value* Value::FindKey(std::string_view key) const {
  if (type_ != Type::kDict) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Value::Set(Value key, Value value) const {
  for (auto& [k, v] : *dict_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  dict_->emplace_back(std::move(key), std::move(value));
}

bool Value::Truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool:
    case Type::kInt: return int_ != 0;
    case Type::kFloat: return float_ != 0.0;
    case Type::kString: return !str_.empty();
    case Type::kList: return !list_->empty();
    case Type::kDict: return !dict_->empty();
    case Type::kFunction: return true;
  }
  return false;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string out;
  json::AppendPythonFloat(&out, d);
  return out;
}

std::string Value::Str() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kNone: return "None";
    case Type::kBool: return int_ ? "True" : "False";
    case Type::kInt: return std::to_string(int_);
    case Type::kFloat: return FloatRepr(float_);
    case Type::kString: return str_;
    case Type::kFunction: return "<function " + str_ + ">";
    default: return Repr();
  }
}

std::string Value::Repr() const {
  std::string out;
  AppendRepr(*this, &out);
  return out;
}

std::string Value::TypeName() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return "list";
    case Type::kDict: return namespace_ ? "Namespace" : "dict";
    case Type::kFunction: return "function";
  }
  return "object";
}

Result<int64_t> Value::Length() const {
  switch (type_) {
    case Type::kUndefined: return 0;
    case Type::kString: return CountCodePoints(str_);
    case Type::kList: return static_cast<int64_t>(list_->size());
    case Type::kDict: return static_cast<int64_t>(dict_->size());
    default: return Status::InvalidArgument("object of type '" + TypeName() + "' has no len()");
  }
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone: return true;
    case Value::Type::kString: return a.as_string() == b.as_string();
    case Value::Type::kList: return a.as_list() == b.as_list();
    case Value::Type::kDict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        const Value* other = b.Find(k);
        if (other == nullptr || !(*other == v)) return false;
      }
      return true;
    }
    case Value::Type::kFunction: return &a.as_function() == &b.as_function();
    default: return false;
  }
}

Result<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order = code point order.
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (x[i] == y[i]) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return Status::InvalidArgument("'<' not supported between instances of '" + a.TypeName() + "' and '" +
                                 b.TypeName() + "'");
}

std::optional<Value> CallArgs::Take(size_t index, std::string_view name) {
  for (auto it = keyword.begin(); it != keyword.end(); ++it) {
    if (it->first == name) {
      Value v = std::move(it->second);
      keyword.erase(it);
      return v;
    }
  }
  if (index < positional.size()) return positional[index];
  return std::nullopt;
}

Result<std::string> ToJson(const Value& v, bool sort_keys, int indent) {
  std::string out;
  STRATA_RETURN_IF_ERROR(AppendJson(v, sort_keys, indent, 0, &out));
  return out;
}

}  // namespace strata::prompt
