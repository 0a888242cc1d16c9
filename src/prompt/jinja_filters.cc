// Jinja2's built-in filters and tests, with Jinja2 3.1's behaviour (jinja2/filters.py, jinja2/tests.py).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "jinja_internal.h"

namespace strata::prompt::internal {
namespace {

// A filter's result of `size` bytes is refused before it is built when it would pass the template's value
// limit (center(10**9) allocated 2.9 GB before the output limit was looked at).
Status CheckResultSize(uint64_t size) {
  const RenderLimits* limits = ActiveLimits();
  const uint64_t most = limits != nullptr ? limits->max_value_bytes : (uint64_t{16} << 20);
  if (size <= most) return Status::Ok();
  return Status::ResourceExhausted("a value of " + std::to_string(size) + " bytes exceeds the template limit of " +
                                   std::to_string(most));
}

// `d` truncated to an int, or an error when int64 cannot hold it (1e300|int gave INT64_MIN).
Result<int64_t> TruncatedInt(double d) {
  double t = std::trunc(d);
  if (!(t >= -9.2233720368547758e18 && t < 9.2233720368547758e18)) {
    return Status::InvalidArgument("the number " + std::to_string(d) + " is too large for an integer");
  }
  return static_cast<int64_t>(t);
}

using FilterFn = Result<Value> (*)(const Value&, CallArgs&);
using TestFn = Result<bool> (*)(const Value&, CallArgs&);

Value Arg(CallArgs& a, size_t i, std::string_view name, Value def) { return a.Take(i, name).value_or(std::move(def)); }

Result<List> Items(const Value& v) { return IterateValue(v); }

// Jinja's attribute paths ("a.b", "0") for sort/map/groupby/...
Value Resolve(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_dict()) {
      const Value* v = cur.FindKey(part);
      cur = v ? *v : Value::Undefined("no attribute '" + part + "'");
    } else if (cur.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      size_t i = 0;
      // Digits past size_t's range name no item.
      const bool fits = std::from_chars(part.data(), part.data() + part.size(), i).ec == std::errc();
      cur = fits && i < cur.as_list().size() ? cur.as_list()[i] : Value::Undefined();
    } else {
      cur = GetAttribute(cur, part);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(ToLower(v.as_string()));
  return v;
}

Status SortValues(List* items, bool reverse, bool case_sensitive, const std::string& attribute) {
  Status error;
  std::stable_sort(items->begin(), items->end(), [&](const Value& a, const Value& b) {
    Value ka = SortKey(attribute.empty() ? a : Resolve(a, attribute), case_sensitive);
    Value kb = SortKey(attribute.empty() ? b : Resolve(b, attribute), case_sensitive);
    auto less = reverse ? Less(kb, ka) : Less(ka, kb);
    if (!less.ok()) {
      if (error.ok()) error = less.status();
      return false;
    }
    return *less;
  });
  return error;
}

// Python's round(x, n): correctly rounded, ties to even on the exact binary value.
double PyRound(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    char buf[512];
    snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(n, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double p = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / p) * p;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Capitalize(const std::string& s) {
  std::vector<std::string> cps = CodePoints(s);
  if (cps.empty()) return s;
  std::string rest;
  for (size_t i = 1; i < cps.size(); ++i) rest += cps[i];
  return ToUpper(cps[0]) + ToLower(rest);
}

bool IsWordBreak(const std::string& cp) {
  return cp.size() == 1 && (std::isspace(static_cast<unsigned char>(cp[0])) || cp[0] == '-' || cp[0] == '(' ||
                            cp[0] == '{' || cp[0] == '[' || cp[0] == '<');
}

Result<Value> FDefault(const Value& v, CallArgs& a) {
  Value def = Arg(a, 0, "default_value", Value(""));
  bool boolean = Arg(a, 1, "boolean", Value(false)).Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) return def;
  return v;
}
Result<Value> FLower(const Value& v, CallArgs&) { return Value(ToLower(v.Str())); }
Result<Value> FUpper(const Value& v, CallArgs&) { return Value(ToUpper(v.Str())); }
Result<Value> FCapitalize(const Value& v, CallArgs&) { return Value(Capitalize(v.Str())); }
Result<Value> FTitle(const Value& v, CallArgs&) {
  std::string out, word;
  auto flush = [&] {
    if (!word.empty()) out += Capitalize(word);
    word.clear();
  };
  for (const std::string& cp : CodePoints(v.Str())) {
    if (IsWordBreak(cp)) {
      flush();
      out += cp;
    } else {
      word += cp;
    }
  }
  flush();
  return Value(out);
}
Result<Value> FTrim(const Value& v, CallArgs& a) {
  std::optional<Value> chars = a.Take(0, "chars");
  std::string s = v.Str();
  std::string set = chars && chars->is_string() ? chars->as_string() : std::string(" \t\n\r\v\f");
  size_t b = s.find_first_not_of(set);
  if (b == std::string::npos) return Value("");
  return Value(s.substr(b, s.find_last_not_of(set) - b + 1));
}
Result<Value> FLength(const Value& v, CallArgs&) {
  STRATA_ASSIGN_OR_RETURN(int64_t n, v.Length());
  return Value(n);
}
Result<Value> FJoin(const Value& v, CallArgs& a) {
  std::string sep = Arg(a, 0, "d", Value("")).Str();
  std::optional<Value> attribute = a.Take(1, "attribute");
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += (attribute ? Resolve(items[i], attribute->Str()) : items[i]).Str();
  }
  return Value(out);
}
Result<Value> FRound(const Value& v, CallArgs& a) {
  int64_t precision = Arg(a, 0, "precision", Value(0)).as_int();
  std::string method = Arg(a, 1, "method", Value("common")).Str();
  if (!v.is_number()) return Status::InvalidArgument("round: expected a number, got " + v.TypeName());
  double x = v.as_double();
  double p = std::pow(10.0, static_cast<double>(precision));
  if (method == "common") return Value(PyRound(x, precision));
  if (method == "ceil") return Value(std::ceil(x * p) / p);
  if (method == "floor") return Value(std::floor(x * p) / p);
  return Status::InvalidArgument("method must be common, ceil or floor");
}
Result<Value> FInt(const Value& v, CallArgs& a) {
  Value def = Arg(a, 0, "default", Value(0));
  int64_t base = Arg(a, 1, "base", Value(10)).as_int();
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double())) return def;
    STRATA_ASSIGN_OR_RETURN(int64_t n, TruncatedInt(v.as_double()));
    return Value(n);
  }
  if (v.is_string()) {
    std::string s = v.as_string();
    s.erase(0, s.find_first_not_of(" \t\n"));
    s.erase(s.find_last_not_of(" \t\n") + 1);
    std::string digits;
    for (char c : s) if (c != '_') digits += c;
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
    if (!digits.empty() && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(n));
    if (!digits.empty() && *end == '\0' && errno == ERANGE) {
      return Status::InvalidArgument("the number '" + s.substr(0, 40) + "' is too large for an integer");
    }
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && std::isfinite(d)) {
      STRATA_ASSIGN_OR_RETURN(int64_t t, TruncatedInt(d));
      return Value(t);
    }
  }
  return def;
}
Result<Value> FFloat(const Value& v, CallArgs& a) {
  Value def = Arg(a, 0, "default", Value(0.0));
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    char* end = nullptr;
    std::string s = v.as_string();
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(d);
  }
  return def;
}
Result<Value> FString(const Value& v, CallArgs&) { return Value(v.Str()); }
Result<Value> FToJson(const Value& v, CallArgs& a) {
  std::optional<Value> indent = a.Take(0, "indent");
  STRATA_ASSIGN_OR_RETURN(std::string s, ToJson(v, true, indent && indent->is_int() ? static_cast<int>(indent->as_int()) : -1));
  std::string out;
  for (char c : s) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == '\'') out += "\\u0027";
    else out += c;
  }
  return Value(out);
}
Result<Value> FTruncate(const Value& v, CallArgs& a) {
  int64_t length = Arg(a, 0, "length", Value(255)).as_int();
  bool killwords = Arg(a, 1, "killwords", Value(false)).Truthy();
  std::string end = Arg(a, 2, "end", Value("...")).Str();
  int64_t leeway = Arg(a, 3, "leeway", Value(5)).as_int();
  std::vector<std::string> cps = CodePoints(v.Str());
  auto n = static_cast<int64_t>(cps.size());
  int64_t end_len = static_cast<int64_t>(CodePoints(end).size());
  if (length < end_len) return Status::InvalidArgument("expected length >= " + std::to_string(end_len));
  if (leeway < 0) return Status::InvalidArgument("expected leeway >= 0");
  if (n <= length + leeway) return Value(v.Str());
  std::string head;
  for (int64_t i = 0; i < length - end_len; ++i) head += cps[static_cast<size_t>(i)];
  if (killwords) return Value(head + end);
  size_t space = head.rfind(' ');
  if (space != std::string::npos) head.resize(space);
  return Value(head + end);
}
Result<Value> FFirst(const Value& v, CallArgs&) {
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
}
Result<Value> FLast(const Value& v, CallArgs&) {
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
}
Result<Value> FList(const Value& v, CallArgs&) {
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  return Value(std::move(items));
}
Result<Value> FReverse(const Value& v, CallArgs&) {
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  std::reverse(items.begin(), items.end());
  if (!v.is_string()) return Value(std::move(items));
  std::string out;
  for (const Value& c : items) out += c.as_string();
  return Value(out);
}
Result<Value> FSort(const Value& v, CallArgs& a) {
  bool reverse = Arg(a, 0, "reverse", Value(false)).Truthy();
  bool case_sensitive = Arg(a, 1, "case_sensitive", Value(false)).Truthy();
  std::optional<Value> attribute = a.Take(2, "attribute");
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  STRATA_RETURN_IF_ERROR(SortValues(&items, reverse, case_sensitive, attribute ? attribute->Str() : ""));
  return Value(std::move(items));
}
Result<Value> FDictSort(const Value& v, CallArgs& a) {
  bool case_sensitive = Arg(a, 0, "case_sensitive", Value(false)).Truthy();
  std::string by = Arg(a, 1, "by", Value("key")).Str();
  bool reverse = Arg(a, 2, "reverse", Value(false)).Truthy();
  if (!v.is_dict()) return Status::InvalidArgument("dictsort expects a dict");
  List pairs;
  for (const auto& [k, x] : v.as_dict()) pairs.push_back(Value::Tuple(List{k, x}));
  STRATA_RETURN_IF_ERROR(SortValues(&pairs, reverse, case_sensitive, by == "value" ? "1" : "0"));
  return Value(std::move(pairs));
}
Result<Value> FItems(const Value& v, CallArgs&) {
  List pairs;
  if (v.is_dict()) {
    for (const auto& [k, x] : v.as_dict()) pairs.push_back(Value::Tuple(List{k, x}));
  } else if (!v.is_undefined()) {
    return Status::InvalidArgument("Can only get item pairs from a mapping.");
  }
  return Value(std::move(pairs));
}
Result<Value> FUnique(const Value& v, CallArgs& a) {
  bool case_sensitive = Arg(a, 0, "case_sensitive", Value(false)).Truthy();
  std::optional<Value> attribute = a.Take(1, "attribute");
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  List out, seen;
  for (const Value& item : items) {
    Value key = SortKey(attribute ? Resolve(item, attribute->Str()) : item, case_sensitive);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value(std::move(out));
}
Result<Value> MinMax(const Value& v, CallArgs& a, bool max) {
  bool case_sensitive = Arg(a, 0, "case_sensitive", Value(false)).Truthy();
  std::optional<Value> attribute = a.Take(1, "attribute");
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  if (items.empty()) return Value::Undefined(std::string("No aggregated item, sequence was empty."));
  STRATA_RETURN_IF_ERROR(SortValues(&items, false, case_sensitive, attribute ? attribute->Str() : ""));
  return max ? items.back() : items.front();
}
Result<Value> FMin(const Value& v, CallArgs& a) { return MinMax(v, a, false); }
Result<Value> FMax(const Value& v, CallArgs& a) { return MinMax(v, a, true); }
Result<Value> FSum(const Value& v, CallArgs& a) {
  std::optional<Value> attribute = a.Take(0, "attribute");
  Value total = Arg(a, 1, "start", Value(0));
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  for (const Value& item : items) {
    Value x = attribute ? Resolve(item, attribute->Str()) : item;
    if (!x.is_number() || !total.is_number()) return Status::InvalidArgument("unsupported operand type(s) for +: '" + total.TypeName() + "' and '" + x.TypeName() + "'");
    if (total.is_float() || x.is_float()) total = Value(total.as_double() + x.as_double());
    else {
      int64_t sum;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &sum)) return Status::InvalidArgument("integer overflow");
      total = Value(sum);
    }
  }
  return total;
}
Result<Value> FAbs(const Value& v, CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return Status::InvalidArgument("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  return Status::InvalidArgument("bad operand type for abs(): '" + v.TypeName() + "'");
}
Result<Value> FReplace(const Value& v, CallArgs& a) {
  std::string from = Arg(a, 0, "old", Value("")).Str(), to = Arg(a, 1, "new", Value("")).Str();
  std::optional<Value> count = a.Take(2, "count");
  std::string s = v.Str(), out;
  int64_t limit = count && count->is_int() ? count->as_int() : -1;
  if (to.size() > from.size()) {
    // What it grows to, counted before it is built (every gap between code points when `old` is empty).
    uint64_t places = 0;
    if (from.empty()) {
      places = CodePoints(s).size() + 1;
    } else {
      for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) {
        if (limit >= 0 && places >= static_cast<uint64_t>(limit)) break;
        ++places;
      }
    }
    if (limit >= 0) places = std::min<uint64_t>(places, static_cast<uint64_t>(limit));
    STRATA_RETURN_IF_ERROR(CheckResultSize(s.size() + places * (to.size() - from.size())));
  }
  if (from.empty()) {
    std::vector<std::string> cps = CodePoints(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (limit < 0 || done < limit) {
        out += to;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
    }
    return Value(out);
  }
  size_t pos = 0, hit;
  int64_t done = 0;
  while ((limit < 0 || done < limit) && (hit = s.find(from, pos)) != std::string::npos) {
    out += s.substr(pos, hit - pos) + to;
    pos = hit + from.size();
    ++done;
  }
  return Value(out + s.substr(pos));
}
Result<Value> FCenter(const Value& v, CallArgs& a) {
  int64_t width = Arg(a, 0, "width", Value(80)).as_int();
  std::string s = v.Str();
  auto len = static_cast<int64_t>(CodePoints(s).size());
  if (width <= len) return Value(s);
  STRATA_RETURN_IF_ERROR(CheckResultSize(static_cast<uint64_t>(width - len) + s.size()));
  int64_t total = width - len;
  int64_t left = total / 2 + (total & width & 1);  // Python's str.center rounding.
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
}
Result<Value> FIndent(const Value& v, CallArgs& a) {
  Value w = Arg(a, 0, "width", Value(4));
  bool first = Arg(a, 1, "first", Value(false)).Truthy();
  bool blank = Arg(a, 2, "blank", Value(false)).Truthy();
  if (!w.is_string()) STRATA_RETURN_IF_ERROR(CheckResultSize(static_cast<uint64_t>(std::max<int64_t>(0, w.as_int()))));
  std::string indention = w.is_string() ? w.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, w.as_int())), ' ');
  std::string s = v.Str() + "\n";
  STRATA_RETURN_IF_ERROR(CheckResultSize(s.size() + static_cast<uint64_t>(std::count(s.begin(), s.end(), '\n') + 1) *
                                                        indention.size()));
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n') {
      lines.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
  }
  if (first) rv = indention + rv;
  return Value(rv);
}
Result<Value> FWordCount(const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : v.Str()) {
    bool word = std::isalnum(c) || c == '_' || c >= 0x80;
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value(n);
}
Result<Value> FEscape(const Value& v, CallArgs&) { return Value(Escape(v.Str())); }
Result<Value> FSafe(const Value& v, CallArgs&) { return v; }
Result<Value> FFormat(const Value& v, CallArgs& a) {
  if (!a.keyword.empty()) {
    Dict d;
    for (auto& [k, x] : a.keyword) d.emplace_back(Value(k), x);
    STRATA_ASSIGN_OR_RETURN(std::string r, PercentFormat(v.Str(), Value(std::move(d))));
    return Value(r);
  }
  STRATA_ASSIGN_OR_RETURN(std::string r, PercentFormat(v.Str(), Value(a.positional)));
  return Value(r);
}
Result<Value> FAttr(const Value& v, CallArgs& a) {
  std::string name = Arg(a, 0, "name", Value("")).Str();
  if (v.is_dict()) {
    const Value* x = v.FindKey(name);
    return x ? *x : Value::Undefined();
  }
  return GetAttribute(v, name);
}
Result<Value> FBatch(const Value& v, CallArgs& a) {
  int64_t count = Arg(a, 0, "linecount", Value(1)).as_int();
  std::optional<Value> fill = a.Take(1, "fill_with");
  if (count <= 0) return Status::InvalidArgument("batch size must be positive");
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  List out, cur;
  for (const Value& item : items) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == count) {
      out.emplace_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none()) while (static_cast<int64_t>(cur.size()) < count) cur.push_back(*fill);
    out.emplace_back(std::move(cur));
  }
  return Value(std::move(out));
}
Result<Value> FStripTags(const Value& v, CallArgs&) {
  std::string s = v.Str(), out;
  bool tag = false;
  for (char c : s) {
    if (c == '<') tag = true;
    else if (c == '>' && tag) tag = false;
    else if (!tag) out += c;
  }
  // Collapse whitespace like Jinja's striptags.
  std::string collapsed;
  bool space = false;
  for (char c : out) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !collapsed.empty();
    } else {
      if (space) collapsed += ' ';
      space = false;
      collapsed += c;
    }
  }
  return Value(collapsed);
}

const std::map<std::string, FilterFn>& Filters();
const std::map<std::string, TestFn>& Tests();

Result<Value> FMap(const Value& v, CallArgs& a) {
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  std::optional<Value> attribute = a.Take(static_cast<size_t>(-1), "attribute");
  Value def = a.Take(static_cast<size_t>(-1), "default").value_or(Value::Undefined());
  List out;
  if (attribute) {
    for (const Value& item : items) {
      Value x = Resolve(item, attribute->Str());
      out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
    }
    return Value(std::move(out));
  }
  if (a.positional.empty()) return Status::InvalidArgument("map requires a filter name or attribute=");
  std::string name = a.positional[0].Str();
  auto it = Filters().find(name);
  if (it == Filters().end()) return Status::InvalidArgument("no filter named '" + name + "'");
  for (const Value& item : items) {
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    STRATA_ASSIGN_OR_RETURN(Value x, it->second(item, rest));
    out.push_back(std::move(x));
  }
  return Value(std::move(out));
}

Result<Value> SelectImpl(const Value& v, CallArgs& a, bool by_attribute, bool keep) {
  STRATA_ASSIGN_OR_RETURN(List items, Items(v));
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (a.positional.empty()) return Status::InvalidArgument("selectattr requires an attribute name");
    attribute = a.positional[next++].Str();
  }
  std::string test = next < a.positional.size() ? a.positional[next++].Str() : "";
  CallArgs test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<ptrdiff_t>(std::min(next, a.positional.size())), a.positional.end());
  TestFn fn = nullptr;
  if (!test.empty()) {
    auto it = Tests().find(test);
    if (it == Tests().end()) return Status::InvalidArgument("no test named '" + test + "'");
    fn = it->second;
  }
  List out;
  for (const Value& item : items) {
    Value x = by_attribute ? Resolve(item, attribute) : item;
    bool pass;
    if (fn) {
      CallArgs copy = test_args;
      STRATA_ASSIGN_OR_RETURN(pass, fn(x, copy));
    } else {
      pass = x.Truthy();
    }
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}
Result<Value> FSelect(const Value& v, CallArgs& a) { return SelectImpl(v, a, false, true); }
Result<Value> FReject(const Value& v, CallArgs& a) { return SelectImpl(v, a, false, false); }
Result<Value> FSelectAttr(const Value& v, CallArgs& a) { return SelectImpl(v, a, true, true); }
Result<Value> FRejectAttr(const Value& v, CallArgs& a) { return SelectImpl(v, a, true, false); }

const std::map<std::string, FilterFn>& Filters() {
  static const auto* filters = new std::map<std::string, FilterFn>{
      {"abs", FAbs},         {"attr", FAttr},         {"batch", FBatch},       {"capitalize", FCapitalize},
      {"center", FCenter},   {"count", FLength},      {"d", FDefault},         {"default", FDefault},
      {"dictsort", FDictSort}, {"e", FEscape},        {"escape", FEscape},     {"first", FFirst},
      {"float", FFloat},     {"forceescape", FEscape}, {"format", FFormat},    {"indent", FIndent},
      {"int", FInt},         {"items", FItems},       {"join", FJoin},         {"last", FLast},
      {"length", FLength},   {"list", FList},         {"lower", FLower},       {"map", FMap},
      {"max", FMax},         {"min", FMin},           {"reject", FReject},     {"rejectattr", FRejectAttr},
      {"replace", FReplace}, {"reverse", FReverse},   {"round", FRound},       {"safe", FSafe},
      {"select", FSelect},   {"selectattr", FSelectAttr}, {"sort", FSort},     {"string", FString},
      {"striptags", FStripTags}, {"sum", FSum},       {"title", FTitle},       {"tojson", FToJson},
      {"trim", FTrim},       {"truncate", FTruncate}, {"unique", FUnique},     {"upper", FUpper},
      {"wordcount", FWordCount}};
  return *filters;
}

Result<bool> TDefined(const Value& v, CallArgs&) { return !v.is_undefined(); }
Result<bool> TUndefined(const Value& v, CallArgs&) { return v.is_undefined(); }
Result<bool> TNone(const Value& v, CallArgs&) { return v.is_none(); }
Result<bool> TBoolean(const Value& v, CallArgs&) { return v.is_bool(); }
Result<bool> TTrue(const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
Result<bool> TFalse(const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
Result<bool> TInteger(const Value& v, CallArgs&) { return v.is_int(); }
Result<bool> TFloat(const Value& v, CallArgs&) { return v.is_float(); }
Result<bool> TNumber(const Value& v, CallArgs&) { return v.is_number(); }
Result<bool> TString(const Value& v, CallArgs&) { return v.is_string(); }
Result<bool> TMapping(const Value& v, CallArgs&) { return v.is_dict(); }
Result<bool> TSequence(const Value& v, CallArgs&) { return v.is_list() || v.is_string() || v.is_dict(); }
Result<bool> TIterable(const Value& v, CallArgs&) { return v.is_list() || v.is_string() || v.is_dict() || v.is_undefined(); }
Result<bool> TCallable(const Value& v, CallArgs&) { return v.is_function(); }
Result<bool> TLower(const Value& v, CallArgs&) { return v.is_string() && ToLower(v.as_string()) == v.as_string(); }
Result<bool> TUpper(const Value& v, CallArgs&) { return v.is_string() && ToUpper(v.as_string()) == v.as_string(); }
Result<bool> TOdd(const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) return Status::InvalidArgument("odd: expected an integer");
  return v.as_int() % 2 != 0;
}
Result<bool> TEven(const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) return Status::InvalidArgument("even: expected an integer");
  return v.as_int() % 2 == 0;
}
Result<bool> TDivisibleBy(const Value& v, CallArgs& a) {
  std::optional<Value> n = a.Take(0, "num");
  if (!n || !n->is_number() || n->as_double() == 0) return Status::InvalidArgument("divisibleby needs a non-zero number");
  if ((v.is_int() || v.is_bool()) && n->is_int()) return n->as_int() == -1 || v.as_int() % n->as_int() == 0;  // INT64_MIN % -1 traps.
  return std::fmod(v.as_double(), n->as_double()) == 0;
}
Result<bool> TEq(const Value& v, CallArgs& a) { return v == a.Take(0, "other").value_or(Value::Undefined()); }
Result<bool> TNe(const Value& v, CallArgs& a) { return v != a.Take(0, "other").value_or(Value::Undefined()); }
Result<bool> TLt(const Value& v, CallArgs& a) { return Less(v, a.Take(0, "other").value_or(Value::None())); }
Result<bool> TGt(const Value& v, CallArgs& a) { return Less(a.Take(0, "other").value_or(Value::None()), v); }
Result<bool> TLe(const Value& v, CallArgs& a) {
  STRATA_ASSIGN_OR_RETURN(bool gt, Less(a.Take(0, "other").value_or(Value::None()), v));
  return !gt;
}
Result<bool> TGe(const Value& v, CallArgs& a) {
  STRATA_ASSIGN_OR_RETURN(bool lt, Less(v, a.Take(0, "other").value_or(Value::None())));
  return !lt;
}
Result<bool> TIn(const Value& v, CallArgs& a) {
  Value seq = a.Take(0, "seq").value_or(Value::Undefined());
  if (seq.is_string()) return v.is_string() && seq.as_string().find(v.as_string()) != std::string::npos;
  if (seq.is_dict()) return seq.Find(v) != nullptr;
  if (seq.is_list()) return std::find(seq.as_list().begin(), seq.as_list().end(), v) != seq.as_list().end();
  return false;
}
Result<bool> TSameAs(const Value& v, CallArgs& a) {
  Value other = a.Take(0, "other").value_or(Value::Undefined());
  if (v.is_none() || v.is_bool() || v.is_undefined()) return v.type() == other.type() && v == other;
  if (v.is_list() && other.is_list()) return &v.as_list() == &other.as_list();
  if (v.is_dict() && other.is_dict()) return &v.as_dict() == &other.as_dict();
  return v.type() == other.type() && v == other;
}
Result<bool> TFilter(const Value& v, CallArgs&) { return v.is_string() && Filters().count(v.as_string()) > 0; }
Result<bool> TTest(const Value& v, CallArgs&) { return v.is_string() && Tests().count(v.as_string()) > 0; }

const std::map<std::string, TestFn>& Tests() {
  static const auto* tests = new std::map<std::string, TestFn>{
      {"boolean", TBoolean}, {"callable", TCallable}, {"defined", TDefined}, {"divisibleby", TDivisibleBy},
      {"eq", TEq},           {"equalto", TEq},        {"==", TEq},           {"even", TEven},
      {"false", TFalse},     {"filter", TFilter},     {"float", TFloat},     {"ge", TGe},
      {">=", TGe},           {"gt", TGt},             {">", TGt},            {"greaterthan", TGt},
      {"in", TIn},           {"integer", TInteger},   {"iterable", TIterable}, {"le", TLe},
      {"<=", TLe},           {"lower", TLower},       {"lt", TLt},           {"<", TLt},
      {"lessthan", TLt},     {"mapping", TMapping},   {"ne", TNe},           {"!=", TNe},
      {"none", TNone},       {"number", TNumber},     {"odd", TOdd},         {"sameas", TSameAs},
      {"sequence", TSequence}, {"string", TString},   {"test", TTest},       {"true", TTrue},
      {"undefined", TUndefined}, {"upper", TUpper}};
  return *tests;
}

}  // namespace

Result<List> IterateValue(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return List{};
    case Value::Type::kList: return v.as_list();
    case Value::Type::kDict: {
      List keys;
      for (const auto& kv : v.as_dict()) keys.push_back(kv.first);
      return keys;
    }
    case Value::Type::kString: {
      List out;
      for (std::string& c : CodePoints(v.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    default: return Status::InvalidArgument("'" + v.TypeName() + "' object is not iterable");
  }
}

bool HasFilter(const std::string& name) { return Filters().count(name) > 0; }
bool HasTest(const std::string& name) { return Tests().count(name) > 0; }

Result<Value> ApplyFilter(const std::string& name, const Value& value, CallArgs& args) {
  return Filters().at(name)(value, args);
}

Result<bool> ApplyTest(const std::string& name, const Value& value, CallArgs& args) {
  return Tests().at(name)(value, args);
}

}  // namespace strata::prompt::internal
