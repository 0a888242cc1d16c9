// YAML prompt templates: metadata, declared variables, a Jinja2 template, optional LLM settings.
//
//   metadata:  {id, name, description, version, language, category}   (all required)
//   variables: [{name, type, description, required?, default?, max_length?}]  (name, type, description required)
//   template:  the Jinja2 text (jinja.h)
//   llm_config: optional, kept as a value; unknown top-level keys are ignored.
//
// Rendering validates first, in this order: defaults fill missing variables (a null default fills
// nothing); a required variable still missing is `missing_required`; a value whose declared type is
// string / int / float / bool and does not match is `type_mismatch` (other type names are not checked);
// strings longer than a positive max_length are cut to that many characters. Errors are kInvalidArgument
// whose message starts with the kind ("schema_invalid: ...", "missing_required: ...", "type_mismatch: ...",
// "template_error: ..."); PromptErrorKind() extracts it.
//
// Thread safety: a loaded PromptTemplate is immutable; Render may run on several threads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/prompt/jinja.h"
#include "strata/prompt/value.h"
#include "strata/util/status.h"

namespace strata::prompt {

struct PromptVariable {
  std::string name;
  std::string type;
  std::string description;
  bool required = false;
  std::optional<Value> default_value;  // Absent or null: no default.
  int64_t max_length = 0;              // 0 or negative: no limit.
};

class PromptTemplate {
 public:
  // Parses the YAML text; `where` names its source in errors (a path, or an id).
  static Result<PromptTemplate> FromYaml(std::string_view yaml, std::string_view where = "template");
  static Result<PromptTemplate> FromFile(const std::string& path);

  // Validates `vars` (a dict) and renders.
  Result<std::string> Render(const Value& vars) const;

  const std::string& id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::string& version() const { return version_; }
  const std::string& language() const { return language_; }
  const std::string& category() const { return category_; }
  const std::vector<PromptVariable>& variables() const { return variables_; }
  const std::string& source() const { return source_; }
  const Value& llm_config() const { return llm_config_; }

 private:
  std::string id_, name_, description_, version_, language_, category_;
  std::vector<PromptVariable> variables_;
  std::string source_;
  Template template_;
  Value llm_config_;
};

// "missing_required", "type_mismatch", "schema_invalid", "template_error", or "" for other errors.
std::string PromptErrorKind(const Status& status);

}  // namespace strata::prompt
