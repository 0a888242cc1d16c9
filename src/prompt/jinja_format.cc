// Python string behaviour the templates rely on: printf-style `%`, str.format, Unicode case mapping, and
// the methods of str, list and dict reachable as attributes.
#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "jinja_internal.h"

namespace strata::prompt::internal {
namespace {

size_t Utf8Length(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char type = 's';
};

// Widths and precisions beyond this are refused: "%99999999d" would ask for that many bytes of padding.
constexpr int kMaxFormatNumber = 100'000;

Status TooLarge() {
  return Status::ResourceExhausted("a format width or precision above " + std::to_string(kMaxFormatNumber) +
                                   " exceeds the template limit");
}

// Reads the decimal digits of `text` at `*at` into `*out`; an error above kMaxFormatNumber.
Status ReadFormatNumber(std::string_view text, size_t* at, int* out) {
  int64_t n = 0;
  while (*at < text.size() && std::isdigit(static_cast<unsigned char>(text[*at]))) {
    n = n * 10 + (text[(*at)++] - '0');
    if (n > kMaxFormatNumber) return TooLarge();
  }
  *out = static_cast<int>(n);
  return Status::Ok();
}

std::string Pad(std::string s, const Spec& spec, bool numeric) {
  int64_t len = static_cast<int64_t>(CodePoints(s).size());
  if (spec.width <= len) return s;
  size_t fill = static_cast<size_t>(spec.width - len);
  if (spec.flags.find('-') != std::string::npos) return s + std::string(fill, ' ');
  if (numeric && spec.flags.find('0') != std::string::npos) {
    size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ') ? 1 : 0;
    return s.substr(0, sign) + std::string(fill, '0') + s.substr(sign);
  }
  return std::string(fill, ' ') + s;
}

Result<std::string> FormatOne(const Spec& spec, const Value& v) {
  char buf[512];
  std::string sign_flag = spec.flags.find('+') != std::string::npos ? "+" : spec.flags.find(' ') != std::string::npos ? " " : "";
  switch (spec.type) {
    case 's': {
      std::string s = v.Str();
      if (spec.precision >= 0) {
        std::vector<std::string> cps = CodePoints(s);
        if (static_cast<int64_t>(cps.size()) > spec.precision) {
          s.clear();
          for (int i = 0; i < spec.precision; ++i) s += cps[static_cast<size_t>(i)];
        }
      }
      return Pad(s, spec, false);
    }
    case 'r': return Pad(v.Repr(), spec, false);
    case 'd':
    case 'i':
    case 'u': {
      if (!v.is_number()) return Status::InvalidArgument("%d format: a real number is required, not " + v.TypeName());
      int64_t n = v.is_float() ? static_cast<int64_t>(std::trunc(v.as_double())) : v.as_int();
      std::string s = (n >= 0 ? sign_flag : "") + std::to_string(n);
      return Pad(s, spec, true);
    }
    case 'x':
    case 'X':
    case 'o': {
      if (!v.is_int() && !v.is_bool()) return Status::InvalidArgument(std::string("%") + spec.type + " format: an integer is required, not " + v.TypeName());
      int64_t n = v.as_int();
      std::string fmt = std::string("%") + (spec.flags.find('#') != std::string::npos ? "#" : "") + "ll" + spec.type;
      snprintf(buf, sizeof(buf), fmt.c_str(), static_cast<long long>(n < 0 ? -n : n));
      std::string s = (n < 0 ? "-" : sign_flag) + std::string(buf);
      return Pad(s, spec, true);
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number()) return Status::InvalidArgument(std::string("%") + spec.type + " format: a real number is required, not " + v.TypeName());
      double d = v.as_double();
      int precision = spec.precision >= 0 ? spec.precision : 6;
      if (std::isnan(d) || std::isinf(d)) {
        std::string s = std::isnan(d) ? "nan" : (d < 0 ? "-inf" : sign_flag + "inf");
        if (std::isupper(static_cast<unsigned char>(spec.type))) for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return Pad(s, spec, false);
      }
      std::string fmt = "%" + sign_flag + (spec.flags.find('#') != std::string::npos ? "#" : "") + "." +
                        std::to_string(precision) + spec.type;
      snprintf(buf, sizeof(buf), fmt.c_str(), d);
      return Pad(buf, spec, true);
    }
    case 'c': {
      if (v.is_string()) return Pad(v.as_string(), spec, false);
      std::string s;
      AppendUtf8(static_cast<uint32_t>(v.as_int()), &s);
      return Pad(s, spec, false);
    }
    default: return Status::InvalidArgument(std::string("unsupported format character '") + spec.type + "'");
  }
}

}  // namespace

std::vector<std::string> CodePoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = std::min(Utf8Length(static_cast<unsigned char>(s[i])), s.size() - i);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string ToLower(std::string_view s) {
  std::string out;
  icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size()))).toLower(icu::Locale::getRoot()).toUTF8String(out);
  return out;
}

std::string ToUpper(std::string_view s) {
  std::string out;
  icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size()))).toUpper(icu::Locale::getRoot()).toUTF8String(out);
  return out;
}

Result<std::string> PercentFormat(const std::string& format, const Value& args) {
  List positional;
  const Value* mapping = nullptr;
  if (args.is_list()) {
    positional = args.as_list();
  } else if (args.is_dict()) {
    mapping = &args;
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) return Status::InvalidArgument("incomplete format");
    if (format[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* arg = nullptr;
    Value keyed;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos) return Status::InvalidArgument("incomplete format key");
      std::string key = format.substr(i + 1, close - i - 1);
      if (mapping == nullptr) return Status::InvalidArgument("format requires a mapping");
      const Value* found = mapping->FindKey(key);
      if (found == nullptr) return Status::InvalidArgument("KeyError: '" + key + "'");
      keyed = *found;
      arg = &keyed;
      i = close + 1;
    }
    Spec spec;
    while (i < format.size() && std::string("-+ #0").find(format[i]) != std::string::npos) spec.flags += format[i++];
    auto number = [&](int* target) -> Status {
      if (i < format.size() && format[i] == '*') {
        if (next >= positional.size()) return Status::InvalidArgument("not enough arguments for format string");
        int64_t given = positional[next++].as_int();
        if (given > kMaxFormatNumber || given < -kMaxFormatNumber) return TooLarge();
        *target = static_cast<int>(given);
        ++i;
        return Status::Ok();
      }
      if (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) {
        return ReadFormatNumber(format, &i, target);
      }
      return Status::Ok();
    };
    STRATA_RETURN_IF_ERROR(number(&spec.width));
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      STRATA_RETURN_IF_ERROR(number(&spec.precision));
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) return Status::InvalidArgument("incomplete format");
    spec.type = format[i];
    if (arg == nullptr) {
      if (next >= positional.size()) return Status::InvalidArgument("not enough arguments for format string");
      arg = &positional[next++];
    }
    STRATA_ASSIGN_OR_RETURN(std::string piece, FormatOne(spec, *arg));
    out += piece;
  }
  if (mapping == nullptr && next < positional.size()) {
    return Status::InvalidArgument("not all arguments converted during string formatting");
  }
  return out;
}

Result<std::string> StrFormat(const std::string& format, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}' ) {
      if (i + 1 < format.size() && format[i + 1] == '}') ++i;
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) return Status::InvalidArgument("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string spec_text;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec_text = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) field = field.substr(0, bang);
    Value v;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) return Status::InvalidArgument("Replacement index " + std::to_string(auto_index) + " out of range");
      v = args.positional[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      // Digits past size_t's range are an index out of range too (std::stoul threw out of the renderer).
      size_t k = 0;
      if (std::from_chars(field.data(), field.data() + field.size(), k).ec != std::errc() ||
          k >= args.positional.size()) {
        return Status::InvalidArgument("Replacement index " + field.substr(0, 40) + " out of range");
      }
      v = args.positional[k];
    } else {
      bool found = false;
      for (const auto& [name, value] : args.keyword) {
        if (name == field) {
          v = value;
          found = true;
        }
      }
      if (!found) return Status::InvalidArgument("KeyError: '" + field + "'");
    }
    // Format spec subset: [[fill]align][sign][0][width][,][.precision][type]
    Spec spec;
    char align = 0, fill = ' ';
    size_t k = 0;
    if (spec_text.size() >= 2 && std::string("<>^=").find(spec_text[1]) != std::string::npos) {
      fill = spec_text[0];
      align = spec_text[1];
      k = 2;
    } else if (!spec_text.empty() && std::string("<>^=").find(spec_text[0]) != std::string::npos) {
      align = spec_text[0];
      k = 1;
    }
    if (k < spec_text.size() && (spec_text[k] == '+' || spec_text[k] == '-' || spec_text[k] == ' ')) spec.flags += spec_text[k++];
    if (k < spec_text.size() && spec_text[k] == '0') {
      spec.flags += '0';
      ++k;
    }
    int width = 0;
    STRATA_RETURN_IF_ERROR(ReadFormatNumber(spec_text, &k, &width));
    bool comma = k < spec_text.size() && spec_text[k] == ',';
    if (comma) ++k;
    if (k < spec_text.size() && spec_text[k] == '.') {
      ++k;
      STRATA_RETURN_IF_ERROR(ReadFormatNumber(spec_text, &k, &spec.precision));
    }
    char type = k < spec_text.size() ? spec_text[k] : 0;
    std::string piece;
    if (type == 0) {
      piece = v.is_float() && spec.precision >= 0 ? [&] {
        Spec g = spec;
        g.type = 'g';
        auto r = FormatOne(g, v);
        return r.ok() ? *r : v.Str();
      }() : v.Str();
      if (v.is_string() && spec.precision >= 0) {
        Spec s = spec;
        s.type = 's';
        STRATA_ASSIGN_OR_RETURN(piece, FormatOne(s, v));
      }
    } else if (type == '%') {
      Spec f = spec;
      f.type = 'f';
      if (f.precision < 0) f.precision = 6;
      STRATA_ASSIGN_OR_RETURN(piece, FormatOne(f, Value(v.as_double() * 100)));
      piece += "%";
    } else {
      Spec f = spec;
      f.type = type == 'n' ? 'd' : type;
      STRATA_ASSIGN_OR_RETURN(piece, FormatOne(f, v));
    }
    if (comma) {
      size_t start = piece.find_first_of("0123456789");
      size_t end = piece.find_first_not_of("0123456789", start);
      if (end == std::string::npos) end = piece.size();
      for (int64_t p = static_cast<int64_t>(end) - 3; p > static_cast<int64_t>(start); p -= 3) piece.insert(static_cast<size_t>(p), ",");
    }
    int64_t len = static_cast<int64_t>(CodePoints(piece).size());
    if (width > len) {
      size_t pad = static_cast<size_t>(width - len);
      if (align == 0) align = v.is_number() ? '>' : '<';
      if (spec.flags.find('0') != std::string::npos && align == '>' && v.is_number()) {
        fill = '0';
        align = '=';
      }
      if (align == '<') piece += std::string(pad, fill);
      else if (align == '>') piece = std::string(pad, fill) + piece;
      else if (align == '^') piece = std::string(pad / 2, fill) + piece + std::string(pad - pad / 2, fill);
      else {
        size_t sign = !piece.empty() && (piece[0] == '-' || piece[0] == '+') ? 1 : 0;
        piece = piece.substr(0, sign) + std::string(pad, fill) + piece.substr(sign);
      }
    }
    out += piece;
  }
  return out;
}

Value GetAttribute(const Value& object, const std::string& name) {
  auto method = [&](Function f) { return Value::Func(name, std::move(f)); };
  if (object.is_string()) {
    const std::string s = object.as_string();
    if (name == "upper") return method([s](CallArgs&) -> Result<Value> { return Value(ToUpper(s)); });
    if (name == "lower") return method([s](CallArgs&) -> Result<Value> { return Value(ToLower(s)); });
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      return method([s, name](CallArgs& a) -> Result<Value> {
        std::optional<Value> chars = a.Take(0, "chars");
        std::string set = chars && chars->is_string() ? chars->as_string() : std::string(" \t\n\r\v\f");
        size_t b = name == "rstrip" ? 0 : s.find_first_not_of(set);
        if (b == std::string::npos) return Value("");
        size_t e = name == "lstrip" ? s.size() - 1 : s.find_last_not_of(set);
        return Value(s.substr(b, e - b + 1));
      });
    }
    if (name == "startswith" || name == "endswith") {
      return method([s, name](CallArgs& a) -> Result<Value> {
        std::optional<Value> x = a.Take(0, "prefix");
        if (!x || !x->is_string()) return Status::InvalidArgument(name + " expects a string");
        const std::string& p = x->as_string();
        return Value(name == "startswith" ? s.starts_with(p) : s.ends_with(p));
      });
    }
    if (name == "replace") {
      return method([s](CallArgs& a) -> Result<Value> {
        std::optional<Value> from = a.Take(0, "old"), to = a.Take(1, "new");
        if (!from || !to) return Status::InvalidArgument("replace expects 2 arguments");
        std::string f = from->Str(), t = to->Str(), out;
        if (f.empty()) return Value(s);
        size_t pos = 0, hit;
        while ((hit = s.find(f, pos)) != std::string::npos) {
          out += s.substr(pos, hit - pos) + t;
          pos = hit + f.size();
        }
        return Value(out + s.substr(pos));
      });
    }
    if (name == "split") {
      return method([s](CallArgs& a) -> Result<Value> {
        std::optional<Value> sep = a.Take(0, "sep");
        List out;
        if (!sep || sep->is_none()) {
          size_t i = 0;
          while (i < s.size()) {
            while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
            size_t j = i;
            while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
            if (j > i) out.emplace_back(s.substr(i, j - i));
            i = j;
          }
          return Value(std::move(out));
        }
        std::string d = sep->Str();
        if (d.empty()) return Status::InvalidArgument("empty separator");
        size_t pos = 0, hit;
        while ((hit = s.find(d, pos)) != std::string::npos) {
          out.emplace_back(s.substr(pos, hit - pos));
          pos = hit + d.size();
        }
        out.emplace_back(s.substr(pos));
        return Value(std::move(out));
      });
    }
    if (name == "format") return method([s](CallArgs& a) -> Result<Value> {
      STRATA_ASSIGN_OR_RETURN(std::string r, StrFormat(s, a));
      return Value(std::move(r));
    });
    if (name == "join") return method([s](CallArgs& a) -> Result<Value> {
      if (a.positional.empty() || !a.positional[0].is_list()) return Status::InvalidArgument("join expects a list");
      std::string out;
      bool first = true;
      for (const Value& v : a.positional[0].as_list()) {
        if (!v.is_string()) return Status::InvalidArgument("sequence item: expected str instance, " + v.TypeName() + " found");
        if (!first) out += s;
        first = false;
        out += v.as_string();
      }
      return Value(std::move(out));
    });
    if (name == "count") return method([s](CallArgs& a) -> Result<Value> {
      std::string needle = a.Take(0, "sub").value_or(Value("")).Str();
      if (needle.empty()) return Value(static_cast<int64_t>(CodePoints(s).size() + 1));
      int64_t n = 0;
      for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + needle.size())) ++n;
      return Value(n);
    });
    return Value::Undefined();
  }
  if (object.is_dict() && !object.is_namespace()) {
    Value self = object;
    if (name == "items") return method([self](CallArgs&) -> Result<Value> {
      List out;
      for (const auto& [k, v] : self.as_dict()) out.push_back(Value::Tuple(List{k, v}));
      return Value(std::move(out));
    });
    if (name == "keys") return method([self](CallArgs&) -> Result<Value> {
      List out;
      for (const auto& kv : self.as_dict()) out.push_back(kv.first);
      return Value(std::move(out));
    });
    if (name == "values") return method([self](CallArgs&) -> Result<Value> {
      List out;
      for (const auto& kv : self.as_dict()) out.push_back(kv.second);
      return Value(std::move(out));
    });
    if (name == "get") return method([self](CallArgs& a) -> Result<Value> {
      std::optional<Value> key = a.Take(0, "key");
      if (!key) return Status::InvalidArgument("get expected at least 1 argument");
      if (const Value* v = self.Find(*key)) return *v;
      return a.Take(1, "default").value_or(Value::None());
    });
    return Value::Undefined();
  }
  if (object.is_list()) {
    Value self = object;
    if (name == "append") return method([self](CallArgs& a) -> Result<Value> {
      if (a.positional.size() != 1) return Status::InvalidArgument("append takes exactly one argument");
      STRATA_RETURN_IF_ERROR(CheckNotHolding(a.positional[0], &self.as_list(), "list"));
      self.mutable_list().push_back(a.positional[0]);
      return Value::None();
    });
    if (name == "index") return method([self](CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) return Status::InvalidArgument("index expected 1 argument");
      for (size_t i = 0; i < self.as_list().size(); ++i) {
        if (self.as_list()[i] == a.positional[0]) return Value(static_cast<int64_t>(i));
      }
      return Status::InvalidArgument(a.positional[0].Repr() + " is not in list");
    });
    if (name == "count") return method([self](CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) return Status::InvalidArgument("count expected 1 argument");
      int64_t n = 0;
      for (const Value& v : self.as_list()) n += v == a.positional[0];
      return Value(n);
    });
  }
  return Value::Undefined();
}

Status CheckNotHolding(const Value& value, const void* container, std::string_view what) {
  constexpr size_t kMostDepth = 500;
  auto identity = [](const Value& v) -> const void* {
    if (v.is_list()) return &v.as_list();
    if (v.is_dict()) return &v.as_dict();
    return nullptr;
  };
  auto too_deep = [&] {
    return Status::ResourceExhausted("a value nested more than " + std::to_string(kMostDepth) +
                                     " lists and dicts deep cannot be stored in a " + std::string(what));
  };
  const Status itself = Status::InvalidArgument("a " + std::string(what) + " cannot hold itself");
  if (identity(value) == nullptr) return Status::Ok();
  if (identity(value) == container) return itself;
  // Depth first over the containers only, each one's height remembered (shared parts are walked once; a
  // value never holds a cycle, as none can be stored). The path's length is the depth.
  struct Frame {
    const Value* v;
    size_t next = 0;
    size_t height = 0;  // The tallest child finished so far.
  };
  std::unordered_map<const void*, size_t> heights;
  std::vector<Frame> path = {{&value}};
  while (!path.empty()) {
    if (path.size() > kMostDepth) return too_deep();
    Frame& f = path.back();
    const size_t n = f.v->is_list() ? f.v->as_list().size() : 2 * f.v->as_dict().size();
    const Value* descend = nullptr;
    while (f.next < n && descend == nullptr) {
      const size_t i = f.next++;
      const Value& child = f.v->is_list() ? f.v->as_list()[i] : (i % 2 == 0 ? f.v->as_dict()[i / 2].first : f.v->as_dict()[i / 2].second);
      const void* id = identity(child);
      if (id == nullptr) continue;
      if (id == container) return itself;
      if (auto known = heights.find(id); known != heights.end()) {
        if (path.size() + known->second > kMostDepth) return too_deep();
        f.height = std::max(f.height, known->second);
        continue;
      }
      descend = &child;
    }
    if (descend != nullptr) {
      path.push_back({descend});  // `f` is not used after this.
      continue;
    }
    const size_t height = f.height + 1;
    heights[identity(*f.v)] = height;
    path.pop_back();
    if (!path.empty()) path.back().height = std::max(path.back().height, height);
  }
  return Status::Ok();
}

}  // namespace strata::prompt::internal
