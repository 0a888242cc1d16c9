#include "strata/prompt/prompt_template.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "jinja_internal.h"

namespace strata::prompt {
namespace {

Status Schema(std::string_view where, const std::string& what) {
  return Status::InvalidArgument("schema_invalid: " + std::string(where) + ": " + what);
}

// A plain YAML scalar resolved the way PyYAML (YAML 1.1) resolves it; quoted scalars stay strings.
Value Scalar(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return Value(s);
  static const std::regex kBool("yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF");
  static const std::regex kNull("~|null|Null|NULL|");
  static const std::regex kInt("[-+]?(0|[1-9][0-9_]*)");
  static const std::regex kFloat("[-+]?([0-9][0-9_]*)?\\.[0-9_]*([eE][-+][0-9]+)?|[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  if (std::regex_match(s, kNull)) return Value::None();
  if (std::regex_match(s, kBool)) {
    char c = s[0];
    return Value(c == 'y' || c == 'Y' || c == 't' || c == 'T' || (s.size() == 2 && (s == "on" || s == "On" || s == "ON")));
  }
  std::string digits;
  for (char c : s) if (c != '_') digits += c;
  if (std::regex_match(s, kInt)) return Value(static_cast<int64_t>(std::strtoll(digits.c_str(), nullptr, 10)));
  if (std::regex_match(s, kFloat) && s != "." ) {
    if (s.find("inf") != std::string::npos || s.find("Inf") != std::string::npos || s.find("INF") != std::string::npos) {
      return Value(s[0] == '-' ? -HUGE_VAL : HUGE_VAL);
    }
    if (s.find("nan") != std::string::npos || s.find("NaN") != std::string::npos || s.find("NAN") != std::string::npos) {
      return Value(std::nan(""));
    }
    return Value(std::strtod(digits.c_str(), nullptr));
  }
  return Value(s);
}

// A template file is a few kilobytes of YAML; aliases can make a short one a huge document ("billion
// laughs": 3.9 GB before bad_alloc), so the nodes read, alias targets counted each time, are bounded.
constexpr int64_t kMaxYamlNodes = 20000;
constexpr int kMaxYamlDepth = 64;

Status ToValue(const YAML::Node& node, int depth, int64_t* budget, Value* out) {
  if (--*budget < 0) {
    return Status::InvalidArgument("more than " + std::to_string(kMaxYamlNodes) +
                                   " YAML nodes (aliases counted each time they are used)");
  }
  if (depth > kMaxYamlDepth) return Status::InvalidArgument("YAML nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      *out = Scalar(node);
      return Status::Ok();
    case YAML::NodeType::Sequence: {
      List l;
      for (const YAML::Node& e : node) {
        Value item;
        STRATA_RETURN_IF_ERROR(ToValue(e, depth + 1, budget, &item));
        l.push_back(std::move(item));
      }
      *out = Value(std::move(l));
      return Status::Ok();
    }
    case YAML::NodeType::Map: {
      Value d{Dict{}};
      for (const auto& kv : node) {
        Value key, value;
        STRATA_RETURN_IF_ERROR(ToValue(kv.first, depth + 1, budget, &key));
        STRATA_RETURN_IF_ERROR(ToValue(kv.second, depth + 1, budget, &value));
        d.Set(std::move(key), std::move(value));
      }
      *out = std::move(d);
      return Status::Ok();
    }
    default:
      *out = Value::None();
      return Status::Ok();
  }
}

Result<std::string> RequiredString(const Value& map, const char* key, std::string_view where) {
  const Value* v = map.FindKey(key);
  if (v == nullptr || v->is_none()) return Schema(where, std::string(key) + ": field required");
  if (!v->is_string()) {
    if (v->is_number()) return v->Str();  // PyYAML reads version: 1.0 as a float; pydantic would refuse it.
    return Schema(where, std::string(key) + ": expected a string, got " + v->TypeName());
  }
  return v->as_string();
}

bool TypeMatches(const std::string& type, const Value& v) {
  if (type == "string") return v.is_string();
  if (type == "int") return v.is_int() || v.is_bool();
  if (type == "float") return v.is_float() || v.is_int();
  if (type == "bool") return v.is_bool();
  return true;  // Other type names are not validated.
}

}  // namespace

std::string PromptErrorKind(const Status& status) {
  for (const char* kind : {"missing_required", "type_mismatch", "schema_invalid", "template_error"}) {
    if (status.message().rfind(std::string(kind) + ":", 0) == 0) return kind;
  }
  return "";
}

Result<PromptTemplate> PromptTemplate::FromYaml(std::string_view yaml, std::string_view where) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Schema(where, "not valid YAML: " + std::string(e.what()));
  }
  if (!root.IsMap()) return Schema(where, "expected a mapping with metadata, variables and template");
  Value doc;
  int64_t budget = kMaxYamlNodes;
  if (Status read = ToValue(root, 0, &budget, &doc); !read.ok()) return Schema(where, std::string(read.message()));
  PromptTemplate t;
  const Value* meta = doc.FindKey("metadata");
  if (meta == nullptr || !meta->is_dict()) return Schema(where, "metadata: field required (a mapping)");
  std::string at = std::string(where) + ": metadata";
  STRATA_ASSIGN_OR_RETURN(t.id_, RequiredString(*meta, "id", at));
  STRATA_ASSIGN_OR_RETURN(t.name_, RequiredString(*meta, "name", at));
  STRATA_ASSIGN_OR_RETURN(t.description_, RequiredString(*meta, "description", at));
  STRATA_ASSIGN_OR_RETURN(t.version_, RequiredString(*meta, "version", at));
  STRATA_ASSIGN_OR_RETURN(t.language_, RequiredString(*meta, "language", at));
  STRATA_ASSIGN_OR_RETURN(t.category_, RequiredString(*meta, "category", at));
  if (const Value* vars = doc.FindKey("variables"); vars != nullptr && !vars->is_none()) {
    if (!vars->is_list()) return Schema(where, "variables: expected a list");
    for (size_t i = 0; i < vars->as_list().size(); ++i) {
      const Value& v = vars->as_list()[i];
      std::string vat = std::string(where) + ": variables[" + std::to_string(i) + "]";
      if (!v.is_dict()) return Schema(vat, "expected a mapping");
      PromptVariable pv;
      STRATA_ASSIGN_OR_RETURN(pv.name, RequiredString(v, "name", vat));
      STRATA_ASSIGN_OR_RETURN(pv.type, RequiredString(v, "type", vat));
      STRATA_ASSIGN_OR_RETURN(pv.description, RequiredString(v, "description", vat));
      if (const Value* r = v.FindKey("required"); r != nullptr && !r->is_none()) {
        if (!r->is_bool()) return Schema(vat, "required: expected a boolean");
        pv.required = r->as_bool();
      }
      if (const Value* d = v.FindKey("default"); d != nullptr && !d->is_none()) pv.default_value = *d;
      if (const Value* m = v.FindKey("max_length"); m != nullptr && !m->is_none()) {
        if (!m->is_int()) return Schema(vat, "max_length: expected an integer");
        pv.max_length = m->as_int();
      }
      t.variables_.push_back(std::move(pv));
    }
  }
  const Value* text = doc.FindKey("template");
  if (text == nullptr || !text->is_string()) return Schema(where, "template: field required (a string)");
  t.source_ = text->as_string();
  auto compiled = Template::Parse(t.source_);
  if (!compiled.ok()) return Status::InvalidArgument("template_error: " + std::string(where) + ": " + compiled.status().message());
  t.template_ = std::move(*compiled);
  if (const Value* llm = doc.FindKey("llm_config")) t.llm_config_ = *llm;
  return t;
}

Result<PromptTemplate> PromptTemplate::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("prompt template " + path + " cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  return FromYaml(s.str(), path);
}

Result<std::string> PromptTemplate::Render(const Value& vars) const {
  Value context{Dict{}};
  if (vars.is_dict()) {
    for (const auto& [k, v] : vars.as_dict()) context.Set(k, v);
  }
  for (const PromptVariable& v : variables_) {
    if (context.FindKey(v.name) == nullptr && v.default_value) context.Set(Value(v.name), *v.default_value);
  }
  for (const PromptVariable& v : variables_) {
    const Value* value = context.FindKey(v.name);
    if (value == nullptr) {
      if (v.required) return Status::InvalidArgument("missing_required: " + id_ + ": variable '" + v.name + "' is required");
      continue;
    }
    if (!TypeMatches(v.type, *value)) {
      return Status::InvalidArgument("type_mismatch: " + id_ + ": variable '" + v.name + "' should be " + v.type +
                                     ", got " + value->TypeName() + " " + value->Repr());
    }
    if (v.max_length > 0 && value->is_string()) {
      std::vector<std::string> cps = internal::CodePoints(value->as_string());
      if (static_cast<int64_t>(cps.size()) > v.max_length) {
        std::string cut;
        for (int64_t i = 0; i < v.max_length; ++i) cut += cps[static_cast<size_t>(i)];
        context.Set(Value(v.name), Value(std::move(cut)));
      }
    }
  }
  auto out = template_.Render(context);
  if (!out.ok()) {
    // A limit keeps its code (kResourceExhausted): the template is not wrong for every input.
    std::string message = "template_error: " + id_ + ": " + out.status().message();
    if (out.status().code() == StatusCode::kResourceExhausted) return Status::ResourceExhausted(message);
    return Status::InvalidArgument(message);
  }
  return out;
}

}  // namespace strata::prompt
