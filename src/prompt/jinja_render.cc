// Jinja2 renderer: walks internal::Tree with Python semantics (jinja.h).
#include <cmath>
#include <cstdint>
#include <limits>

#include "jinja_internal.h"

namespace strata::prompt {
namespace internal {

namespace {
thread_local const RenderLimits* t_limits = nullptr;
}  // namespace

const RenderLimits* ActiveLimits() { return t_limits; }

Status CheckValueSize(size_t size, int line) {
  if (t_limits == nullptr || size <= t_limits->max_value_bytes) return Status::Ok();
  return Status::ResourceExhausted("line " + std::to_string(line) + ": a value of " + std::to_string(size) +
                                   " bytes or items exceeds the template limit of " +
                                   std::to_string(t_limits->max_value_bytes));
}

namespace {

constexpr char kBlockPlaceholder[] = "\x01" "block";
constexpr int kMaxDepth = 200;

Status LineError(int line, const std::string& what) {
  return Status::InvalidArgument("line " + std::to_string(line) + ": " + what);
}

// `error` with the template line in front; a limit keeps its code (kResourceExhausted).
Status LineError(int line, const Status& error) {
  if (error.code() == StatusCode::kResourceExhausted) {
    return Status::ResourceExhausted("line " + std::to_string(line) + ": " + error.message());
  }
  return LineError(line, error.message());
}

std::string UndefinedMessage(const Value& v) {
  return v.as_string().empty() ? "value is undefined" : v.as_string();
}

Result<int64_t> CheckedAdd(int64_t a, int64_t b, int line) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return LineError(line, "integer overflow");
  return r;
}

// Python's floor division and modulo for ints.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

Result<List> Iterate(const Value& v, int line) {
  auto items = IterateValue(v);
  if (!items.ok()) return LineError(line, items.status());
  return items;
}

Result<bool> Contains(const Value& container, const Value& item, int line) {
  switch (container.type()) {
    case Value::Type::kUndefined: return false;
    case Value::Type::kString:
      if (!item.is_string()) {
        return LineError(line, "'in <string>' requires string as left operand, not " + item.TypeName());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::kList:
      for (const Value& e : container.as_list()) {
        if (e == item) return true;
      }
      return false;
    case Value::Type::kDict: return container.Find(item) != nullptr;
    default: return LineError(line, "argument of type '" + container.TypeName() + "' is not iterable");
  }
}

// Python index normalisation for sequences of `size`.
Result<Value> Subscript(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) return LineError(line, UndefinedMessage(obj));
  if (obj.is_dict()) {
    if (const Value* v = obj.Find(key)) return *v;
    if (key.is_string()) {
      Value attr = GetAttribute(obj, key.as_string());
      if (!attr.is_undefined()) return attr;
    }
    return Value::Undefined("'dict object' has no attribute " + key.Repr());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      auto n = static_cast<int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("list object has no element " + key.Str());
      return obj.as_list()[static_cast<size_t>(i)];
    }
    std::vector<std::string> cps = CodePoints(obj.as_string());
    auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::Undefined("str object has no element " + key.Str());
    return Value(cps[static_cast<size_t>(i)]);
  }
  if (key.is_string()) {
    Value attr = GetAttribute(obj, key.as_string());
    if (!attr.is_undefined()) return attr;
  }
  return Value::Undefined("'" + obj.TypeName() + " object' has no attribute " + key.Repr());
}

Result<Value> Slice(const Value& obj, const Value& start, const Value& stop, const Value& step, int line) {
  std::vector<Value> items;
  bool is_string = obj.is_string();
  if (obj.is_list()) {
    items = obj.as_list();
  } else if (is_string) {
    for (std::string& c : CodePoints(obj.as_string())) items.emplace_back(std::move(c));
  } else if (obj.is_undefined()) {
    return LineError(line, UndefinedMessage(obj));
  } else {
    return LineError(line, "'" + obj.TypeName() + "' object is not subscriptable");
  }
  auto n = static_cast<int64_t>(items.size());
  auto as_index = [&](const Value& v) -> Result<std::optional<int64_t>> {
    if (v.is_undefined() || v.is_none()) return std::optional<int64_t>();
    if (!v.is_int() && !v.is_bool()) return LineError(line, "slice indices must be integers or None");
    return std::optional<int64_t>(v.as_int());
  };
  STRATA_ASSIGN_OR_RETURN(auto st, as_index(step));
  int64_t s = st.value_or(1);
  if (s == 0) return LineError(line, "slice step cannot be zero");
  STRATA_ASSIGN_OR_RETURN(auto b, as_index(start));
  STRATA_ASSIGN_OR_RETURN(auto e, as_index(stop));
  auto clamp = [&](std::optional<int64_t> x, int64_t def) {
    if (!x) return def;
    int64_t v = *x < 0 ? *x + n : *x;
    if (s > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t from = clamp(b, s > 0 ? 0 : n - 1);
  int64_t to = clamp(e, s > 0 ? n : -1);
  List out;
  for (int64_t i = from; s > 0 ? i < to : i > to;) {
    out.push_back(items[static_cast<size_t>(i)]);
    if (__builtin_add_overflow(i, s, &i)) break;  // [1::INT64_MAX] wrapped to a negative index.
  }
  if (!is_string) return Value(std::move(out));
  std::string text;
  for (const Value& c : out) text += c.as_string();
  return Value(std::move(text));
}

Result<Value> Concat(const Value& a, const Value& b, int line) {
  std::string text = a.Str();
  std::string right = b.Str();
  STRATA_RETURN_IF_ERROR(CheckValueSize(text.size() + right.size(), line));
  text += right;
  return Value(std::move(text));
}

Result<Value> Arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  if (a.is_undefined()) return LineError(line, UndefinedMessage(a));
  if (b.is_undefined()) return LineError(line, UndefinedMessage(b));
  auto unsupported = [&] {
    return LineError(line, "unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" +
                               b.TypeName() + "'");
  };
  bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      STRATA_ASSIGN_OR_RETURN(int64_t r, CheckedAdd(a.as_int(), b.as_int(), line));
      return Value(r);
    }
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      STRATA_RETURN_IF_ERROR(CheckValueSize(a.as_string().size() + b.as_string().size(), line));
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      STRATA_RETURN_IF_ERROR(CheckValueSize(a.as_list().size() + b.as_list().size(), line));
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(l));
    }
    return unsupported();
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return LineError(line, "integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_double() - b.as_double());
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return LineError(line, "integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_double() * b.as_double());
    const Value* seq = a.is_string() || a.is_list() ? &a : (b.is_string() || b.is_list()) ? &b : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (seq != nullptr && (count->is_int() || count->is_bool())) {
      int64_t n = std::max<int64_t>(0, count->as_int());
      size_t unit = seq->is_string() ? seq->as_string().size() : seq->as_list().size();
      if (n > 0 && unit > 0) {
        if (static_cast<uint64_t>(n) > (uint64_t{1} << 40) / unit) return LineError(line, "repetition result too large");
        STRATA_RETURN_IF_ERROR(CheckValueSize(unit * static_cast<size_t>(n), line));
      }
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->as_string();
        return Value(std::move(out));
      }
      List out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->as_list().begin(), seq->as_list().end());
      return Value(std::move(out));
    }
    return unsupported();
  }
  if (op == "/") {
    if (!nums) return unsupported();
    if (b.as_double() == 0) return LineError(line, "division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) return unsupported();
    if (b.as_double() == 0) return LineError(line, "integer division or modulo by zero");
    if (ints) {
      // The one quotient int64 cannot hold (the CPU traps on it: SIGFPE).
      if (a.as_int() == std::numeric_limits<int64_t>::min() && b.as_int() == -1) return LineError(line, "integer overflow");
      return Value(FloorDiv(a.as_int(), b.as_int()));
    }
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) {
      auto r = PercentFormat(a.as_string(), b);
      if (!r.ok()) return LineError(line, r.status());
      return Value(std::move(*r));
    }
    if (!nums) return unsupported();
    if (b.as_double() == 0) return LineError(line, "integer division or modulo by zero");
    if (ints) return Value(b.as_int() == -1 ? int64_t{0} : FloorMod(a.as_int(), b.as_int()));  // INT64_MIN % -1 traps.
    double m = std::fmod(a.as_double(), b.as_double());
    if (m != 0 && ((m < 0) != (b.as_double() < 0))) m += b.as_double();
    return Value(m);
  }
  if (op == "**") {
    if (!nums) return unsupported();
    if (ints && b.as_int() >= 0) {
      // By squaring: 1 ** INT64_MAX looped 9e18 times without ever overflowing.
      int64_t result = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; e >>= 1) {
        if ((e & 1) != 0 && __builtin_mul_overflow(result, base, &result)) return LineError(line, "integer overflow");
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
          // Squared only while a higher bit remains, so the result would overflow as well.
          return LineError(line, "integer overflow");
        }
      }
      return Value(result);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  if (op == "~") return Concat(a, b, line);
  return LineError(line, "unknown operator " + op);
}

class Renderer {
 public:
  Renderer(const Value& vars, const RenderLimits& limits) : limits_(limits) {
    scopes_.emplace_back();
    Globals(&scopes_.back());
    scopes_.emplace_back();
    if (vars.is_dict()) {
      for (const auto& [k, v] : vars.as_dict()) {
        if (k.is_string()) scopes_.back().emplace_back(k.as_string(), v);
      }
    }
  }

  Status RenderBody(const Body& body, std::string* out) {
    for (const NodePtr& n : body) STRATA_RETURN_IF_ERROR(RenderNode(*n, out));
    return Status::Ok();
  }

 private:
  using Scope = std::vector<std::pair<std::string, Value>>;

  static void Globals(Scope* g) {
    g->emplace_back("range", Value::Func("range", [](CallArgs& a) -> Result<Value> {
      std::vector<int64_t> n;
      for (const Value& v : a.positional) {
        if (!v.is_int() && !v.is_bool()) return Status::InvalidArgument("range() arguments must be integers");
        n.push_back(v.as_int());
      }
      if (n.empty() || n.size() > 3) return Status::InvalidArgument("range expected 1 to 3 arguments");
      int64_t start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1], step = n.size() == 3 ? n[2] : 1;
      if (step == 0) return Status::InvalidArgument("range() arg 3 must not be zero");
      // The length is known before anything is built: too long fails at once.
      bool empty = step > 0 ? stop <= start : stop >= start;
      uint64_t span = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                               : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
      uint64_t abs_step = step > 0 ? static_cast<uint64_t>(step) : uint64_t{0} - static_cast<uint64_t>(step);
      uint64_t count = empty ? 0 : (span - 1) / abs_step + 1;
      size_t max_range = t_limits != nullptr ? t_limits->max_range : size_t{1} << 40;
      if (count > max_range) {
        return Status::ResourceExhausted("range() of " + std::to_string(count) + " items exceeds the template limit of " +
                                         std::to_string(max_range));
      }
      List out;
      out.reserve(static_cast<size_t>(count));
      for (int64_t i = 0, v = start; i < static_cast<int64_t>(count); ++i, v += step) out.emplace_back(v);
      return Value(std::move(out));
    }));
    g->emplace_back("dict", Value::Func("dict", [](CallArgs& a) -> Result<Value> {
      Dict d;
      if (!a.positional.empty() && a.positional[0].is_dict()) d = a.positional[0].as_dict();
      Value out(std::move(d));
      for (auto& [k, v] : a.keyword) out.Set(Value(k), v);
      return out;
    }));
    g->emplace_back("namespace", Value::Func("namespace", [](CallArgs& a) -> Result<Value> {
      Dict d;
      if (!a.positional.empty() && a.positional[0].is_dict()) d = a.positional[0].as_dict();
      Value out = Value::Namespace(std::move(d));
      for (auto& [k, v] : a.keyword) out.Set(Value(k), v);
      return out;
    }));
    g->emplace_back("joiner", Value::Func("joiner", [](CallArgs& a) -> Result<Value> {
      std::string sep = a.Take(0, "sep").value_or(Value(", ")).Str();
      auto used = std::make_shared<bool>(false);
      return Value::Func("joiner", [sep, used](CallArgs&) -> Result<Value> {
        if (!*used) {
          *used = true;
          return Value("");
        }
        return Value(sep);
      });
    }));
    g->emplace_back("cycler", Value::Func("cycler", [](CallArgs& a) -> Result<Value> {
      auto items = std::make_shared<List>(a.positional);
      auto pos = std::make_shared<size_t>(0);
      if (items->empty()) return Status::InvalidArgument("at least one item has to be provided");
      Dict d;
      d.emplace_back(Value("next"), Value::Func("next", [items, pos](CallArgs&) -> Result<Value> {
        Value v = (*items)[*pos];
        *pos = (*pos + 1) % items->size();
        return v;
      }));
      d.emplace_back(Value("reset"), Value::Func("reset", [pos](CallArgs&) -> Result<Value> {
        *pos = 0;
        return Value::None();
      }));
      return Value(std::move(d));
    }));
  }

  Value Lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      for (auto v = s->rbegin(); v != s->rend(); ++v) {
        if (v->first == name) return v->second;
      }
    }
    return Value::Undefined("'" + name + "' is undefined");
  }

  void Assign(const std::string& name, Value value) {
    Scope& s = scopes_.back();
    for (auto& kv : s) {
      if (kv.first == name) {
        kv.second = std::move(value);
        return;
      }
    }
    s.emplace_back(name, std::move(value));
  }

  Status Unpack(const std::vector<std::string>& targets, const Value& value, int line) {
    if (targets.size() == 1) {
      Assign(targets[0], value);
      return Status::Ok();
    }
    STRATA_ASSIGN_OR_RETURN(List items, Iterate(value, line));
    if (items.size() != targets.size()) {
      return LineError(line, std::string(items.size() > targets.size() ? "too many" : "not enough") +
                                 " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                                 std::to_string(items.size()) + ")");
    }
    for (size_t i = 0; i < targets.size(); ++i) Assign(targets[i], items[i]);
    return Status::Ok();
  }

  Result<CallArgs> EvalArgs(const Expr& e, size_t first) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
      args.positional.push_back(std::move(v));
    }
    for (const auto& [k, v] : e.kwargs) {
      STRATA_ASSIGN_OR_RETURN(Value x, Eval(*v));
      args.keyword.emplace_back(k, std::move(x));
    }
    return args;
  }

  Result<Value> Call(const Value& callee, CallArgs& args, int line) {
    if (callee.is_undefined()) return LineError(line, UndefinedMessage(callee));
    const Value* f = &callee;
    if (callee.is_dict()) f = callee.FindKey("\x01" "call");  // A recursive loop's loop().
    if (f == nullptr || !f->is_function()) return LineError(line, "'" + callee.TypeName() + "' object is not callable");
    auto r = f->as_function()(args);
    if (!r.ok() && r.status().message().rfind("line ", 0) != 0) return LineError(line, r.status());
    return r;
  }

  // Counts one unit of work against the render's step limit.
  Status Step(int line) {
    if (++steps_ <= limits_.max_steps) return Status::Ok();
    return Status::ResourceExhausted("line " + std::to_string(line) + ": the template exceeded its limit of " +
                                     std::to_string(limits_.max_steps) + " steps");
  }

  // The text a node appended must keep its buffer within the output limit.
  Status CheckOutput(const std::string& out, int line) const {
    if (out.size() <= limits_.max_output_bytes) return Status::Ok();
    return Status::ResourceExhausted("line " + std::to_string(line) + ": the rendered text exceeds the template limit of " +
                                     std::to_string(limits_.max_output_bytes) + " bytes");
  }

  Result<Value> Eval(const Expr& e) {
    STRATA_RETURN_IF_ERROR(Step(e.line));
    // Long operator chains (a + a + ... + a) are left-deep trees: evaluation recurses once per operator.
    if (eval_depth_ >= kMaxEvalDepth || StackUsed() > kMaxStackBytes) {
      return LineError(e.line, "expression nested more than " + std::to_string(eval_depth_) + " levels deep");
    }
    ++eval_depth_;
    Result<Value> v = EvalUnchecked(e);
    --eval_depth_;
    return v;
  }

  Result<Value> EvalUnchecked(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: return Lookup(e.name);
      case Expr::Kind::kGetAttr: {
        STRATA_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        if (obj.is_undefined()) return LineError(e.line, UndefinedMessage(obj));
        if (obj.is_dict() && !obj.is_namespace()) {
          Value method = GetAttribute(obj, e.name);  // Methods first, as Python's getattr finds them.
          if (!method.is_undefined()) return method;
          if (const Value* v = obj.FindKey(e.name)) return *v;
          return Value::Undefined("'dict object' has no attribute '" + e.name + "'");
        }
        if (obj.is_namespace()) {
          if (const Value* v = obj.FindKey(e.name)) return *v;
          return Value::Undefined("'Namespace object' has no attribute '" + e.name + "'");
        }
        Value attr = GetAttribute(obj, e.name);
        if (attr.is_undefined() && attr.as_string().empty()) {
          return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + e.name + "'");
        }
        return attr;
      }
      case Expr::Kind::kGetItem: {
        STRATA_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        STRATA_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
        return Subscript(obj, key, e.line);
      }
      case Expr::Kind::kSlice: {
        STRATA_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        Value parts[3];
        for (int k = 0; k < 3; ++k) {
          if (e.args[static_cast<size_t>(k) + 1]) {
 STRATA_ASSIGN_OR_RETURN(parts[k], Eval(*e.args[static_cast<size_t>(k) + 1]));
}
        }
        return Slice(obj, parts[0], parts[1], parts[2], e.line);
      }
      case Expr::Kind::kCall: {
        STRATA_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0]));
        STRATA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
        return Call(callee, args, e.line);
      }
      case Expr::Kind::kFilter: {
        STRATA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        STRATA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
        if (!HasFilter(e.name)) return LineError(e.line, "no filter named '" + e.name + "'");
        auto r = ApplyFilter(e.name, v, args);
        if (!r.ok()) return LineError(e.line, r.status());
        return r;
      }
      case Expr::Kind::kTest: {
        STRATA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        STRATA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
        if (!HasTest(e.name)) return LineError(e.line, "no test named '" + e.name + "'");
        auto r = ApplyTest(e.name, v, args);
        if (!r.ok()) return LineError(e.line, r.status());
        return Value(*r != e.negated);
      }
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        STRATA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        if (v.is_undefined()) return LineError(e.line, UndefinedMessage(v));
        if (!v.is_number()) {
          return LineError(e.line, std::string("bad operand type for unary ") + (e.kind == Expr::Kind::kNeg ? "-" : "+") +
                                       ": '" + v.TypeName() + "'");
        }
        if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
        if (v.is_float()) return Value(-v.as_double());
        if (v.as_int() == std::numeric_limits<int64_t>::min()) return LineError(e.line, "integer overflow");
        return Value(-v.as_int());
      }
      case Expr::Kind::kNot: {
        STRATA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        return Value(!v.Truthy());
      }
      case Expr::Kind::kBinary: {
        STRATA_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        STRATA_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
        if (e.name == "~") return Concat(a, b, e.line);
        return Arithmetic(e.name, a, b, e.line);
      }
      case Expr::Kind::kCompare: {
        STRATA_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          STRATA_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1]));
          const std::string& op = e.ops[i];
          bool r = false;
          if (op == "==") {
            r = left == right;
          } else if (op == "!=") {
            r = left != right;
          } else if (op == "in" || op == "notin") {
            STRATA_ASSIGN_OR_RETURN(r, Contains(right, left, e.line));
            if (op == "notin") r = !r;
          } else {
            if (left.is_undefined()) return LineError(e.line, UndefinedMessage(left));
            if (right.is_undefined()) return LineError(e.line, UndefinedMessage(right));
            Result<bool> less = op == "<" || op == ">=" ? Less(left, right) : Less(right, left);
            if (!less.ok()) {
              std::string msg = less.status().message();
              size_t p = msg.find("'<'");
              if (p != std::string::npos) msg.replace(p, 3, "'" + op + "'");
              if (op == ">" || op == "<=") {  // The operands were swapped for Less().
                msg = "'" + op + "' not supported between instances of '" + left.TypeName() + "' and '" +
                      right.TypeName() + "'";
              }
              return LineError(e.line, msg);
            }
            r = (op == "<" || op == ">") ? *less : !*less;
          }
          if (!r) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::kAnd: {
        STRATA_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        if (!a.Truthy()) return a;
        return Eval(*e.args[1]);
      }
      case Expr::Kind::kOr: {
        STRATA_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        if (a.Truthy()) return a;
        return Eval(*e.args[1]);
      }
      case Expr::Kind::kCond: {
        STRATA_ASSIGN_OR_RETURN(Value c, Eval(*e.args[0]));
        if (c.Truthy()) return Eval(*e.args[1]);
        if (!e.args[2]) return Value::Undefined("the inline if-expression evaluated to false and no else section was defined");
        return Eval(*e.args[2]);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List l;
        for (const ExprPtr& a : e.args) {
          STRATA_ASSIGN_OR_RETURN(Value v, Eval(*a));
          l.push_back(std::move(v));
        }
        return e.kind == Expr::Kind::kTuple ? Value::Tuple(std::move(l)) : Value(std::move(l));
      }
      case Expr::Kind::kDict: {
        Value d{Dict{}};
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          STRATA_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
          STRATA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
          d.Set(std::move(k), std::move(v));
        }
        return d;
      }
    }
    return LineError(e.line, "unknown expression");
  }

  Status RenderNode(const Node& n, std::string* out) {
    STRATA_RETURN_IF_ERROR(Step(n.line));
    if (StackUsed() > kMaxStackBytes) return LineError(n.line, "blocks and calls nested too many levels deep");
    Status s = RenderNodeUnchecked(n, out);
    if (!s.ok()) return s;
    return CheckOutput(*out, n.line);
  }

  Status RenderNodeUnchecked(const Node& n, std::string* out) {
    switch (n.kind) {
      case Node::Kind::kText: *out += n.text; return Status::Ok();
      case Node::Kind::kOutput: {
        STRATA_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        *out += v.Str();
        return Status::Ok();
      }
      case Node::Kind::kIf: {
        for (const auto& [cond, body] : n.branches) {
          STRATA_ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (c.Truthy()) return RenderBody(body, out);
        }
        return RenderBody(n.else_body, out);
      }
      case Node::Kind::kFor: {
        STRATA_ASSIGN_OR_RETURN(Value iterable, Eval(*n.expr));
        return RenderLoop(n, iterable, 0, out);
      }
      case Node::Kind::kSet: {
        STRATA_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        if (n.attribute_target) {
          Value ns = Lookup(n.targets[0]);
          if (!ns.is_namespace()) return LineError(n.line, "cannot assign attribute on non-namespace object");
          if (Status held = CheckNotHolding(v, &ns.as_dict(), "namespace"); !held.ok()) return LineError(n.line, held);
          ns.Set(Value(n.targets[1]), std::move(v));
          return Status::Ok();
        }
        return Unpack(n.targets, v, n.line);
      }
      case Node::Kind::kSetBlock: {
        std::string text;
        STRATA_RETURN_IF_ERROR(RenderBody(n.body, &text));
        Value v(std::move(text));
        if (n.expr) {
 STRATA_ASSIGN_OR_RETURN(v, EvalOnBlock(*n.expr, std::move(v)));
}
        Assign(n.targets[0], std::move(v));
        return Status::Ok();
      }
      case Node::Kind::kFilterBlock: {
        std::string text;
        scopes_.emplace_back();
        Status s = RenderBody(n.body, &text);
        scopes_.pop_back();
        STRATA_RETURN_IF_ERROR(s);
        STRATA_ASSIGN_OR_RETURN(Value v, EvalOnBlock(*n.expr, Value(std::move(text))));
        *out += v.Str();
        return Status::Ok();
      }
      case Node::Kind::kWith: {
        Scope scope;
        for (const auto& [name, expr] : n.params) {
          STRATA_ASSIGN_OR_RETURN(Value v, Eval(*expr));
          scope.emplace_back(name, std::move(v));
        }
        scopes_.push_back(std::move(scope));
        Status s = RenderBody(n.body, out);
        scopes_.pop_back();
        return s;
      }
      case Node::Kind::kMacro: {
        Assign(n.text, MakeMacro(n, n.text));
        return Status::Ok();
      }
      case Node::Kind::kCallBlock: {
        scopes_.emplace_back();
        Assign("caller", MakeMacro(n, "caller"));
        auto v = Eval(*n.expr);
        scopes_.pop_back();
        STRATA_RETURN_IF_ERROR(v.status());
        *out += v->Str();
        return Status::Ok();
      }
    }
    return Status::Ok();
  }

  Result<Value> EvalOnBlock(const Expr& chain, Value text) {
    scopes_.emplace_back();
    scopes_.back().emplace_back(kBlockPlaceholder, std::move(text));
    auto v = Eval(chain);
    scopes_.pop_back();
    return v;
  }

  Value MakeMacro(const Node& n, const std::string& name) {
    return Value::Func(name, [this, &n, name](CallArgs& args) -> Result<Value> {
      if (++depth_ > kMaxDepth) {
        --depth_;
        return LineError(n.line, "maximum recursion depth exceeded in macro '" + name + "'");
      }
      Scope scope;
      List varargs;
      for (size_t i = 0; i < args.positional.size(); ++i) {
        if (i < n.params.size()) {
          scope.emplace_back(n.params[i].first, args.positional[i]);
        } else {
          varargs.push_back(args.positional[i]);
        }
      }
      Dict kwargs;
      for (auto& [k, v] : args.keyword) {
        bool param = false;
        for (const auto& p : n.params) param = param || p.first == k;
        if (param) {
          scope.emplace_back(k, v);
        } else if (k != "caller") {
          kwargs.emplace_back(Value(k), v);
        } else {
          scope.emplace_back("caller", v);
        }
      }
      scopes_.push_back(std::move(scope));
      Status status = Status::Ok();
      for (const auto& [pname, def] : n.params) {
        bool bound = false;
        for (const auto& kv : scopes_.back()) bound = bound || kv.first == pname;
        if (bound) continue;
        if (def) {
          auto v = Eval(*def);
          if (!v.ok()) {
            status = v.status();
            break;
          }
          scopes_.back().emplace_back(pname, std::move(*v));
        } else {
          scopes_.back().emplace_back(pname, Value::Undefined("parameter '" + pname + "' was not provided"));
        }
      }
      scopes_.back().emplace_back("varargs", Value(std::move(varargs)));
      scopes_.back().emplace_back("kwargs", Value(std::move(kwargs)));
      std::string text;
      if (status.ok()) status = RenderBody(n.body, &text);
      scopes_.pop_back();
      --depth_;
      STRATA_RETURN_IF_ERROR(status);
      return Value(std::move(text));
    });
  }

  Status RenderLoop(const Node& n, const Value& iterable, int depth, std::string* out) {
    if (depth > kMaxDepth) return LineError(n.line, "maximum recursion depth exceeded in a recursive loop");
    if (iterable.is_none() || iterable.is_number() || iterable.is_function()) {
      return LineError(n.line, "'" + iterable.TypeName() + "' object is not iterable");
    }
    STRATA_ASSIGN_OR_RETURN(List items, Iterate(iterable, n.line));
    if (n.condition) {
      List kept;
      for (const Value& item : items) {
        scopes_.emplace_back();
        Status s = Unpack(n.targets, item, n.line);
        Result<Value> c = s.ok() ? Eval(*n.condition) : Result<Value>(s);
        scopes_.pop_back();
        STRATA_RETURN_IF_ERROR(c.status());
        if (c->Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      scopes_.emplace_back();
      Status s = RenderBody(n.else_body, out);
      scopes_.pop_back();
      return s;
    }
    auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      STRATA_RETURN_IF_ERROR(Step(n.line));
      STRATA_RETURN_IF_ERROR(CheckOutput(*out, n.line));
      Dict loop;
      loop.emplace_back(Value("index"), Value(i + 1));
      loop.emplace_back(Value("index0"), Value(i));
      loop.emplace_back(Value("revindex"), Value(length - i));
      loop.emplace_back(Value("revindex0"), Value(length - i - 1));
      loop.emplace_back(Value("first"), Value(i == 0));
      loop.emplace_back(Value("last"), Value(i == length - 1));
      loop.emplace_back(Value("length"), Value(length));
      loop.emplace_back(Value("depth"), Value(static_cast<int64_t>(depth + 1)));
      loop.emplace_back(Value("depth0"), Value(static_cast<int64_t>(depth)));
      loop.emplace_back(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("there is no previous item"));
      loop.emplace_back(Value("nextitem"), i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value::Undefined("there is no next item"));
      loop.emplace_back(Value("cycle"), Value::Func("cycle", [i](CallArgs& a) -> Result<Value> {
        if (a.positional.empty()) return Status::InvalidArgument("no items for cycling given");
        return a.positional[static_cast<size_t>(i) % a.positional.size()];
      }));
      if (n.recursive) {
        loop.emplace_back(Value("\x01" "call"), Value::Func("loop", [this, &n, depth](CallArgs& a) -> Result<Value> {
          if (a.positional.empty()) return Status::InvalidArgument("loop() takes the iterable to recurse into");
          std::string text;
          STRATA_RETURN_IF_ERROR(RenderLoop(n, a.positional[0], depth + 1, &text));
          return Value(std::move(text));
        }));
      }
      scopes_.emplace_back();
      scopes_.back().emplace_back("loop", Value(std::move(loop)));
      Status s = Unpack(n.targets, items[static_cast<size_t>(i)], n.line);
      if (s.ok()) s = RenderBody(n.body, out);
      scopes_.pop_back();
      STRATA_RETURN_IF_ERROR(s);
    }
    return Status::Ok();
  }

  std::vector<Scope> scopes_;
  int depth_ = 0;
  RenderLimits limits_;
  int64_t steps_ = 0;
  static constexpr int kMaxEvalDepth = 1000;
  int eval_depth_ = 0;
  // Besides the counts, the stack this render has used is bounded: frame sizes differ between builds
  // (sanitizers make them many times larger), and macros, recursive loops and expressions nest in each
  // other. 2 MiB leaves room on any thread with the usual 8 MiB stack.
  static constexpr size_t kMaxStackBytes = 2u << 20;
  uintptr_t stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  size_t StackUsed() const {
    auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    return here < stack_base_ ? stack_base_ - here : 0;
  }
};

}  // namespace
}  // namespace internal

Result<Template> Template::Parse(std::string_view source, const JinjaOptions& options) {
  Template t;
  STRATA_ASSIGN_OR_RETURN(t.tree_, internal::ParseTemplate(source, options));
  return t;
}

Result<std::string> Template::Render(const Value& vars, const RenderLimits& limits) const {
  // The limits are visible to filters and operators through internal::ActiveLimits() while this render
  // runs on this thread (a nested render, e.g. from a filter, restores the outer one's).
  const RenderLimits* outer = internal::t_limits;
  internal::t_limits = &limits;
  internal::Renderer renderer(vars, limits);
  std::string out;
  Status s = renderer.RenderBody(tree_->body, &out);
  internal::t_limits = outer;
  STRATA_RETURN_IF_ERROR(s);
  return out;
}

}  // namespace strata::prompt
