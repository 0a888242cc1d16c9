// Tools with typed parameters: the JSON Schema is generated from a parameter struct and the arguments are
// parsed into it, so a tool body never touches raw JSON.
//
//   struct ReadParams {
//     std::string path;
//     std::optional<int> limit;  // optional -> not "required"
//     static constexpr auto kFields = std::make_tuple(
//         strata::tools::Field("path", &ReadParams::path, "File to read"),
//         strata::tools::Field("limit", &ReadParams::limit, "Maximum lines"));
//   };
//   auto tool = strata::tools::MakeTypedTool<ReadParams>("read", "Read a file",
//       [](const ReadParams& p, const strata::Canceller&) { return ToolOutput::Text(...); });
//
// Field types: std::string, bool, integers, floating point, std::vector<T>, std::optional<T> (not
// required) and nested structs with their own kFields. Extra keys in the arguments are rejected
// (additionalProperties: false) so the model learns the right names.
//
// This header includes nlohmann/json.hpp; include it only where tools are defined.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "strata/tools/tool.h"

namespace strata::tools {

template <typename S, typename T>
struct FieldSpec {
  const char* name;
  T S::*member;
  const char* description;
};

template <typename S, typename T>
constexpr FieldSpec<S, T> Field(const char* name, T S::*member, const char* description = "") {
  return {name, member, description};
}

namespace typed_internal {

template <typename T> struct IsOptional : std::false_type {};
template <typename T> struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T> struct IsVector : std::false_type {};
template <typename T> struct IsVector<std::vector<T>> : std::true_type {};
template <typename T> concept HasFields = requires { T::kFields; };

template <typename T>
nlohmann::ordered_json SchemaOf() {
  using nlohmann::ordered_json;
  if constexpr (IsOptional<T>::value) {
    return SchemaOf<typename T::value_type>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return {{"type", "string"}};
  } else if constexpr (std::is_same_v<T, bool>) {
    return {{"type", "boolean"}};
  } else if constexpr (std::is_integral_v<T>) {
    return {{"type", "integer"}};
  } else if constexpr (std::is_floating_point_v<T>) {
    return {{"type", "number"}};
  } else if constexpr (IsVector<T>::value) {
    return {{"type", "array"}, {"items", SchemaOf<typename T::value_type>()}};
  } else if constexpr (HasFields<T>) {
    ordered_json properties = ordered_json::object();
    ordered_json required = ordered_json::array();
    std::apply(
        [&](const auto&... field) {
          auto add = [&](const auto& f) {
            using M = std::remove_cvref_t<decltype(std::declval<T>().*(f.member))>;
            ordered_json s = SchemaOf<M>();
            if (f.description != nullptr && f.description[0] != '\0') s["description"] = f.description;
            properties[f.name] = std::move(s);
            if (!IsOptional<M>::value) required.push_back(f.name);
          };
          (add(field), ...);
        },
        T::kFields);
    ordered_json schema = {{"type", "object"}, {"properties", std::move(properties)}};
    if (!required.empty()) schema["required"] = std::move(required);
    schema["additionalProperties"] = false;
    return schema;
  } else {
    static_assert(sizeof(T) == 0, "unsupported parameter field type");
  }
}

// Reads `j` (already schema-validated) into `out`.
template <typename T>
void Read(const nlohmann::json& j, T* out) {
  if constexpr (IsOptional<T>::value) {
    if (j.is_null()) {
      out->reset();
    } else {
      typename T::value_type v{};
      Read(j, &v);
      *out = std::move(v);
    }
  } else if constexpr (IsVector<T>::value) {
    out->clear();
    for (const auto& item : j) {
      typename T::value_type v{};
      Read(item, &v);
      out->push_back(std::move(v));
    }
  } else if constexpr (HasFields<T>) {
    std::apply(
        [&](const auto&... field) {
          auto read = [&](const auto& f) {
            auto it = j.find(f.name);
            if (it != j.end()) Read(*it, &(out->*(f.member)));
          };
          (read(field), ...);
        },
        T::kFields);
  } else {
    *out = j.get<T>();
  }
}

}  // namespace typed_internal

// Returns the JSON Schema of `Params` (an object schema) as JSON text.
template <typename Params>
std::string SchemaFor() {
  return typed_internal::SchemaOf<Params>().dump();
}

// Parses schema-valid arguments into `Params`.
template <typename Params>
Result<Params> ParseParams(std::string_view arguments) {
  nlohmann::json j = nlohmann::json::parse(arguments, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("arguments must be a JSON object");
  Params params{};
  try {
    typed_internal::Read(j, &params);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("arguments do not fit the parameters: ") + e.what());
  }
  return params;
}

template <typename Params>
std::shared_ptr<Tool> MakeTypedTool(std::string name, std::string description,
                                    std::function<ToolOutput(const Params&, const Canceller&)> function) {
  llm::ToolDeclaration declaration{std::move(name), std::move(description), SchemaFor<Params>()};
  return MakeTool(std::move(declaration), [function = std::move(function)](std::string_view arguments,
                                                                            const Canceller& cancel) {
    Result<Params> params = ParseParams<Params>(arguments);
    if (!params.ok()) return ToolOutput::Error("Error: " + params.status().message());
    return function(*params, cancel);
  });
}

}  // namespace strata::tools
