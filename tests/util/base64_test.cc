#include "strata/util/base64.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

std::string Decode(std::string_view in, bool* ok) { return Base64Decode(in, ok); }

TEST(Base64, DecodesWithAndWithoutPadding) {
  bool ok = false;
  EXPECT_EQ(Decode("aGVsbG8gd29ybGQ=", &ok), "hello world");
  EXPECT_TRUE(ok);
  EXPECT_EQ(Decode("aGVsbG8gd29ybGQ", &ok), "hello world");
  EXPECT_TRUE(ok);
  EXPECT_EQ(Decode("aGk=", &ok), "hi");
  EXPECT_TRUE(ok);
  EXPECT_EQ(Decode("aA==", &ok), "h");
  EXPECT_TRUE(ok);
  EXPECT_EQ(Decode("", &ok), "");
  EXPECT_TRUE(ok);
}

// What is not base64 is refused, never read as a shorter text: a file carried as "aGVsbG8=garbage" replaced
// the stored one with "hello".
TEST(Base64, AnythingElseIsRefused) {
  for (const char* bad : {"aGVsbG8=garbage", "x", "aGVsb", "aGk===", "a===", "aGk=aGk=", "=aGk", "aG=k", "!!!!",
                          "aGVs bG8=", "aGVsbG8\n"}) {
    bool ok = true;
    Decode(bad, &ok);
    EXPECT_FALSE(ok) << '"' << bad << '"';
  }
}

}  // namespace
}  // namespace strata
