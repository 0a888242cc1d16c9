// Value: the dynamic value templates compute with, with Python's semantics (the ones Jinja2 inherits):
// truthiness, str() and repr() text, equality and ordering, int/float arithmetic. Lists and dicts are
// shared by reference like Python objects; dicts keep insertion order.
//
// Thread safety: a Value is not synchronised; lists and dicts are shared between copies.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/util/status.h"

namespace strata::prompt {

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<Value, Value>>;  // Insertion order; keys unique.
struct CallArgs;
using Function = std::function<Result<Value>(CallArgs&)>;

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // Undefined.
  static Value Undefined(std::string hint = "") {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value None() { return Value(Type::kNone); }
  Value(bool b) : type_(Type::kBool), int_(b ? 1 : 0) {}           // NOLINT(google-explicit-constructor)
  Value(int i) : type_(Type::kInt), int_(i) {}                      // NOLINT(google-explicit-constructor)
  Value(int64_t i) : type_(Type::kInt), int_(i) {}                  // NOLINT(google-explicit-constructor)
  Value(double d) : type_(Type::kFloat), float_(d) {}               // NOLINT(google-explicit-constructor)
  Value(std::string s) : type_(Type::kString), str_(std::move(s)) {}  // NOLINT(google-explicit-constructor)
  Value(const char* s) : Value(std::string(s)) {}                  // NOLINT(google-explicit-constructor)
  Value(std::string_view s) : Value(std::string(s)) {}             // NOLINT(google-explicit-constructor)
  Value(List l) : type_(Type::kList), list_(std::make_shared<List>(std::move(l))) {}  // NOLINT
  Value(Dict d) : type_(Type::kDict), dict_(std::make_shared<Dict>(std::move(d))) {}  // NOLINT
  static Value Func(std::string name, Function f);
  // A dict whose attributes are assignable with {% set ns.x = ... %} (Jinja's namespace()).
  static Value Namespace(Dict d);
  // A list that prints as a Python tuple: "(1, 2)", "(1,)".
  static Value Tuple(List l);

  // Parses JSON text (objects keep their key order). Errors name the byte offset.
  static Result<Value> FromJson(std::string_view json);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }       // Not bool (Python's bool is an int: IsIntegral).
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat || type_ == Type::kBool; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_function() const { return type_ == Type::kFunction; }
  bool is_namespace() const { return type_ == Type::kDict && namespace_; }
  bool is_tuple() const { return type_ == Type::kList && namespace_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // For kInt and kBool.
  double as_double() const { return type_ == Type::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }  // For kString (and an undefined value's hint).
  const List& as_list() const { return *list_; }
  List& mutable_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }
  const Function& as_function() const { return *func_; }
  const std::string& function_name() const { return str_; }

  // Dict lookup by key (nullptr if absent); a string key is the common case.
  const Value* Find(const Value& key) const;
  const Value* FindKey(std::string_view key) const;
  // Inserts or replaces.
  void Set(Value key, Value value) const;

  // Python semantics.
  bool Truthy() const;
  std::string Str() const;   // str(): "" for undefined, "None", "True", repr of containers.
  std::string Repr() const;  // repr().
  std::string TypeName() const;  // Python's type name: "str", "int", "list", "dict", "NoneType", ...
  // Length in Python's sense (code points for strings); fails for values without one.
  Result<int64_t> Length() const;

  friend bool operator==(const Value& a, const Value& b);
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  explicit Value(Type t) : type_(t) {}

  Type type_ = Type::kUndefined;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> func_;
  bool namespace_ = false;  // A namespace (dicts) or a tuple (lists).
};

// Arguments of a call: positional then keyword.
struct CallArgs {
  List positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // Returns argument `index` or keyword `name` (removing it from the keywords), or nullopt.
  std::optional<Value> Take(size_t index, std::string_view name);
};

// Python ordering (<): numbers by value, strings by code point, lists lexicographically. Fails with a
// TypeError-like message for values that do not compare.
Result<bool> Less(const Value& a, const Value& b);

// Python's float repr ("12.0", "0.1", "1e+16", "inf").
std::string FloatRepr(double d);

// JSON text of `v` as Python's json.dumps(v, sort_keys=sort_keys) writes it (", " and ": " separators,
// ASCII escapes); indent >= 0 pretty-prints. Fails for values JSON cannot hold (functions, undefined).
Result<std::string> ToJson(const Value& v, bool sort_keys, int indent = -1);

}  // namespace strata::prompt
