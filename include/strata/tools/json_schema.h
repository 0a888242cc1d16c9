// Validation of tool-call arguments against the tool's JSON Schema.
//
// Supported keywords (the ones tool schemas use): type (one or a list; "integer" accepts 3.0), enum, const,
// properties, required, additionalProperties (boolean or schema), items (schema), minItems, maxItems,
// uniqueItems, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength
// (in code points), pattern (ECMAScript), anyOf, oneOf, allOf, not, and local $ref ("#/$defs/X",
// "#/definitions/X", "#"). Annotation keywords (description, title, default, examples, format) are
// ignored. Unknown keywords are ignored, as the specification requires.
//
// Errors are kInvalidArgument and name the location in the instance ("$.path[2]: expected integer, got
// string") so a model can correct its call.
//
// Thread safety: thread-safe; a compiled JsonSchema is immutable.
#pragma once

#include <memory>
#include <string_view>

#include "strata/util/status.h"

namespace strata::tools {

class JsonSchema {
 public:
  // Parses `schema` (JSON text). Fails if it is not JSON or not an object/boolean schema.
  static Result<JsonSchema> Parse(std::string_view schema);

  // Validates the JSON text `instance`. A syntax error is reported as such.
  Status Validate(std::string_view instance) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace strata::tools
