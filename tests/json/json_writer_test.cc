#include "strata/json/json_writer.h"
#include "strata/json/checked.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

namespace strata::json {
namespace {

std::string Str(std::string_view s, StringStyle style) {
  std::string out;
  AppendString(&out, s, style);
  return out;
}

std::string Float(double v) {
  std::string out;
  AppendPythonFloat(&out, v);
  return out;
}

TEST(JsonWriterTest, RawUtf8KeepsNonAsciiAndEscapesControls) {
  EXPECT_EQ(Str("Héllo 世界", StringStyle::kRawUtf8), "\"Héllo 世界\"");
  EXPECT_EQ(Str("a\"b\\c\n\t\x01\x7f", StringStyle::kRawUtf8), "\"a\\\"b\\\\c\\n\\t\\u0001\x7f\"");
}

// The byte-at-a-time rule the fast escaper (sixteen bytes a step, escapes gathered in blocks) must keep.
std::string ReferenceRaw(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", c);
          out += u;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

TEST(JsonWriterTest, RawUtf8AgreesWithTheByteRuleOnEveryLengthAndPosition) {
  std::mt19937 rng(7);
  const std::string alphabet = std::string("ab\"\\\n\t\x01\x1f\x7f ") + "\xc3\xa9\xe4\xb8\xad";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    size_t n = rng() % (iter < 2000 ? 70 : 9000);  // Short ones, and ones past the 4 KiB block.
    bool dense = rng() % 2 == 0;
    for (size_t i = 0; i < n; ++i) s.push_back(dense ? alphabet[rng() % alphabet.size()] : (rng() % 50 ? 'x' : '"'));
    ASSERT_EQ(Str(s, StringStyle::kRawUtf8), ReferenceRaw(s)) << "length " << n;
  }
}

TEST(JsonWriterTest, AsciiEscapeMatchesPythonJsonDumps) {
  // json.dumps("You are 助手 😀") == '"You are \\u52a9\\u624b \\ud83d\\ude00"'
  EXPECT_EQ(Str("You are 助手 😀", StringStyle::kAsciiEscape), "\"You are \\u52a9\\u624b \\ud83d\\ude00\"");
  EXPECT_EQ(Str("é", StringStyle::kAsciiEscape), "\"\\u00e9\"");
}

TEST(JsonWriterTest, PythonFloatRepr) {
  EXPECT_EQ(Float(1.0), "1.0");
  EXPECT_EQ(Float(0.1), "0.1");
  EXPECT_EQ(Float(-2.5), "-2.5");
  EXPECT_EQ(Float(1e16), "1e+16");
  EXPECT_EQ(Float(1e15), "1000000000000000.0");
  EXPECT_EQ(Float(0.0001), "0.0001");
  EXPECT_EQ(Float(0.00001), "1e-05");
  EXPECT_EQ(Float(1.5e-7), "1.5e-07");
  EXPECT_EQ(Float(123456.789), "123456.789");
  EXPECT_EQ(Float(0.0), "0.0");
}

TEST(JsonWriterTest, CanonicalizeIsCompactAndNamesErrors) {
  auto c = Canonicalize(" { \"b\" : [1, 2.50, true, null, \"\\u00e9\"], \"a\": {} } ");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, "{\"b\":[1,2.5,true,null,\"é\"],\"a\":{}}");
  auto bad = Canonicalize("{\"a\": tru}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("byte"), std::string::npos) << bad.status().message();
}

TEST(JsonWriterTest, Utf8Validation) {
  size_t bad = 0;
  EXPECT_TRUE(IsValidUtf8("ok 世界"));
  EXPECT_FALSE(IsValidUtf8("ab\xe4\xb8", &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // A UTF-16 surrogate encoded in UTF-8.
  EXPECT_EQ(ReplaceInvalidUtf8("a\xff" "b"), "a\xEF\xBF\xBD" "b");
}

// A whole number is what JSON Schema's "integer" takes: 5 and 5.0, not 5.5, nor what int64_t cannot hold.
TEST(CheckedJsonTest, WholeNumbersAreIntegersAndFloatsWithoutAFraction) {
  using J = nlohmann::json;
  EXPECT_EQ(WholeNumber(J(5)), 5);
  EXPECT_EQ(WholeNumber(J(-7)), -7);
  EXPECT_EQ(WholeNumber(J(5.0)), 5);
  EXPECT_EQ(WholeNumber(J(-0.0)), 0);
  EXPECT_EQ(WholeNumber(J(9007199254740992.0)), int64_t{1} << 53);
  EXPECT_EQ(WholeNumber(J(-9223372036854775808.0)), std::nullopt) << "past 2^53 a float does not say which";
  EXPECT_EQ(WholeNumber(J(INT64_MIN)), INT64_MIN);
  EXPECT_EQ(WholeNumber(J(5.5)), std::nullopt);
  EXPECT_EQ(WholeNumber(J(9223372036854775808.0)), std::nullopt);
  EXPECT_EQ(WholeNumber(J(1e300)), std::nullopt);
  EXPECT_EQ(WholeNumber(J(uint64_t{1} << 63)), std::nullopt);
  EXPECT_EQ(WholeNumber(J("5")), std::nullopt);
  EXPECT_EQ(WholeNumber(J(true)), std::nullopt);
  EXPECT_EQ(IntOr(J{{"n", 3.0}}, "n", 9), 3);
  EXPECT_EQ(IntOr(J{{"n", 3.5}}, "n", 9), 9);
}

}  // namespace
}  // namespace strata::json
