#include "strata/tools/json_schema.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "strata/json/checked.h"
#include "strata/json/json_writer.h"

namespace strata::tools {

using Json = nlohmann::json;

struct JsonSchema::Impl {
  Json root;
};

namespace {

std::string_view TypeOf(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    default: return "unknown";
  }
}

bool HasType(const Json& v, std::string_view type) {
  std::string_view actual = TypeOf(v);
  if (type == actual) return true;
  if (type == "number") return actual == "integer";
  if (type == "integer" && actual == "number") {
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Shorten(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}

  // Returns "" when `v` matches `schema`, else the first error as "path: message".
  std::string Check(const Json& schema, const Json& v, const std::string& path, int depth = 0) const {
    if (depth > 64) return path + ": schema nesting too deep (a $ref cycle?)";
    if (schema.is_boolean()) return schema.get<bool>() ? "" : path + ": no value is allowed here";
    if (!schema.is_object()) return "";
    if (auto ref = schema.find("$ref"); ref != schema.end() && ref->is_string()) {
      const Json* target = Resolve(ref->get<std::string>());
      if (target == nullptr) return path + ": schema has an unresolvable $ref " + ref->dump();
      std::string e = Check(*target, v, path, depth + 1);
      if (!e.empty()) return e;
    }
    if (auto type = schema.find("type"); type != schema.end()) {
      bool ok = false;
      std::string names;
      if (type->is_string()) {
        ok = HasType(v, type->get<std::string>());
        names = type->get<std::string>();
      } else if (type->is_array()) {
        for (const Json& t : *type) {
          if (!t.is_string()) continue;
          ok = ok || HasType(v, t.get<std::string>());
          names += (names.empty() ? "" : " or ") + t.get<std::string>();
        }
      } else {
        ok = true;
      }
      if (!ok) return path + ": expected " + names + ", got " + std::string(TypeOf(v));
    }
    if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
      bool found = false;
      for (const Json& option : *e) found = found || option == v;
      if (!found) return path + ": " + Shorten(v) + " is not one of " + Shorten(*e);
    }
    if (auto c = schema.find("const"); c != schema.end() && *c != v) {
      return path + ": expected " + Shorten(*c) + ", got " + Shorten(v);
    }
    if (v.is_number()) {
      std::string e = CheckNumber(schema, v.get<double>(), path);
      if (!e.empty()) return e;
    }
    if (v.is_string()) {
      std::string e = CheckString(schema, v.get<std::string>(), path);
      if (!e.empty()) return e;
    }
    if (v.is_array()) {
      std::string e = CheckArray(schema, v, path, depth);
      if (!e.empty()) return e;
    }
    if (v.is_object()) {
      std::string e = CheckObject(schema, v, path, depth);
      if (!e.empty()) return e;
    }
    return CheckCombinators(schema, v, path, depth);
  }

 private:
  const Json* Resolve(const std::string& ref) const {
    if (ref == "#") return &root_;
    if (!ref.starts_with("#/")) return nullptr;
    try {
      const Json& target = root_.at(Json::json_pointer(ref.substr(1)));
      return &target;
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  // A number as the schema or the caller wrote it: 1, not 1.0, when it is whole.
  static std::string Shown(double x) {
    if (std::fabs(x) < 9007199254740992.0 && x == std::trunc(x)) return std::to_string(static_cast<int64_t>(x));
    return Json(x).dump();
  }

  static std::string CheckNumber(const Json& schema, double x, const std::string& path) {
    auto num = [&](const char* key, double* out) {
      auto it = schema.find(key);
      if (it == schema.end() || !it->is_number()) return false;
      *out = it->get<double>();
      return true;
    };
    double limit;
    if (num("minimum", &limit) && x < limit) return path + ": " + Shown(x) + " is less than the minimum " + Shown(limit);
    if (num("maximum", &limit) && x > limit) return path + ": " + Shown(x) + " is greater than the maximum " + Shown(limit);
    if (num("exclusiveMinimum", &limit) && x <= limit) return path + ": must be greater than " + Shown(limit);
    if (num("exclusiveMaximum", &limit) && x >= limit) return path + ": must be less than " + Shown(limit);
    if (num("multipleOf", &limit) && limit > 0) {
      double q = x / limit;
      if (std::fabs(q - std::round(q)) > 1e-9) return path + ": must be a multiple of " + Shown(limit);
    }
    return "";
  }

  static std::string CheckString(const Json& schema, const std::string& s, const std::string& path) {
    size_t n = CodePoints(s);
    if (auto it = schema.find("minLength"); it != schema.end() && it->is_number_unsigned() && n < it->get<size_t>()) {
      return path + ": shorter than " + it->dump() + " characters";
    }
    if (auto it = schema.find("maxLength"); it != schema.end() && it->is_number_unsigned() && n > it->get<size_t>()) {
      return path + ": longer than " + it->dump() + " characters";
    }
    if (auto it = schema.find("pattern"); it != schema.end() && it->is_string()) {
      try {
        if (!std::regex_search(s, std::regex(it->get<std::string>(), std::regex::ECMAScript))) {
          return path + ": does not match the pattern " + it->dump();
        }
      } catch (const std::regex_error&) {
        // An unsupported pattern is not the caller's fault: accept.
      }
    }
    return "";
  }

  std::string CheckArray(const Json& schema, const Json& v, const std::string& path, int depth) const {
    if (auto it = schema.find("minItems"); it != schema.end() && it->is_number_unsigned() && v.size() < it->get<size_t>()) {
      return path + ": needs at least " + it->dump() + " items, got " + std::to_string(v.size());
    }
    if (auto it = schema.find("maxItems"); it != schema.end() && it->is_number_unsigned() && v.size() > it->get<size_t>()) {
      return path + ": allows at most " + it->dump() + " items, got " + std::to_string(v.size());
    }
    if (auto it = schema.find("uniqueItems"); it != schema.end() && it->is_boolean() && it->get<bool>()) {
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = i + 1; j < v.size(); ++j) {
          if (v[i] == v[j]) return path + ": items " + std::to_string(i) + " and " + std::to_string(j) + " are equal";
        }
      }
    }
    if (auto items = schema.find("items"); items != schema.end() && (items->is_object() || items->is_boolean())) {
      for (size_t i = 0; i < v.size(); ++i) {
        std::string e = Check(*items, v[i], path + "[" + std::to_string(i) + "]", depth + 1);
        if (!e.empty()) return e;
      }
    }
    return "";
  }

  std::string CheckObject(const Json& schema, const Json& v, const std::string& path, int depth) const {
    if (auto req = schema.find("required"); req != schema.end() && req->is_array()) {
      for (const Json& name : *req) {
        if (name.is_string() && !v.contains(name.get<std::string>())) {
          return path + ": missing required property \"" + name.get<std::string>() + "\"";
        }
      }
    }
    auto props = schema.find("properties");
    auto additional = schema.find("additionalProperties");
    for (const auto& [key, value] : v.items()) {
      std::string child = path + "." + key;
      if (props != schema.end() && props->is_object() && props->contains(key)) {
        std::string e = Check((*props)[key], value, child, depth + 1);
        if (!e.empty()) return e;
      } else if (additional != schema.end()) {
        if (additional->is_boolean() && !additional->get<bool>()) {
          return child + ": unknown property (allowed: " + AllowedNames(schema) + ")";
        }
        std::string e = Check(*additional, value, child, depth + 1);
        if (!e.empty()) return e;
      }
    }
    return "";
  }

  static std::string AllowedNames(const Json& schema) {
    std::string names;
    if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
      for (const auto& [key, value] : props->items()) names += (names.empty() ? "" : ", ") + key;
    }
    return names.empty() ? "none" : names;
  }

  std::string CheckCombinators(const Json& schema, const Json& v, const std::string& path, int depth) const {
    if (auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
      for (const Json& s : *all) {
        std::string e = Check(s, v, path, depth + 1);
        if (!e.empty()) return e;
      }
    }
    if (auto any = schema.find("anyOf"); any != schema.end() && any->is_array() && !any->empty()) {
      std::string first;
      bool ok = false;
      for (const Json& s : *any) {
        std::string e = Check(s, v, path, depth + 1);
        if (e.empty()) ok = true;
        else if (first.empty()) first = e;
      }
      if (!ok) return path + ": matches none of the allowed alternatives (first: " + first + ")";
    }
    if (auto one = schema.find("oneOf"); one != schema.end() && one->is_array() && !one->empty()) {
      int matches = 0;
      for (const Json& s : *one) matches += Check(s, v, path, depth + 1).empty();
      if (matches != 1) {
        return path + ": must match exactly one alternative, matches " + std::to_string(matches);
      }
    }
    if (auto n = schema.find("not"); n != schema.end() && Check(*n, v, path, depth + 1).empty()) {
      return path + ": matches a schema it must not match";
    }
    return "";
  }

  const Json& root_;
};

}  // namespace

Result<JsonSchema> JsonSchema::Parse(std::string_view schema) {
  Json root = strata::json::ParseOrDiscard<Json>(schema);
  if (root.is_discarded()) return Status::InvalidArgument("schema is not valid JSON: " + json::DescribeSyntaxError(schema));
  if (!root.is_object() && !root.is_boolean()) return Status::InvalidArgument("schema must be an object or a boolean");
  JsonSchema out;
  auto impl = std::make_shared<Impl>();
  impl->root = std::move(root);
  out.impl_ = std::move(impl);
  return out;
}

Status JsonSchema::Validate(std::string_view instance) const {
  Json v = strata::json::ParseOrDiscard<Json>(instance);
  if (v.is_discarded()) return Status::InvalidArgument("not valid JSON: " + json::DescribeSyntaxError(instance));
  if (!impl_) return Status::Ok();
  std::string error = Validator(impl_->root).Check(impl_->root, v, "$");
  if (!error.empty()) return Status::InvalidArgument(error);
  return Status::Ok();
}

}  // namespace strata::tools
