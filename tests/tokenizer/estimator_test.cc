#include "strata/tokenizer/estimator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "strata/tokenizer/encoding.h"
#include "test_util.h"

namespace strata::tokenizer {
namespace {

// The default weights were calibrated against o200k_base; on every file of the varied test corpus the
// estimate must stay within 25% of the real count, and in particular must not undercount CJK the way
// characters / 4 does.
TEST(ScriptEstimatorTest, WithinToleranceOfO200kOnTheCorpus) {
  auto enc = Encoding::Load("o200k_base");
  ASSERT_OK(enc);
  // From the source tree named at build time (__FILE__ is relative when ccache rewrites paths).
  std::filesystem::path dir = std::filesystem::path(STRATA_SOURCE_DIR) / "tests/tokenizer/corpus";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    double real = static_cast<double>((*enc)->Count(text));
    double estimate = static_cast<double>(EstimateTokens(text));
    double chars_over_4 = static_cast<double>(CountCodePoints(text) / 4);
    std::printf("%-26s o200k %6.0f  estimate %6.0f (%+5.1f%%)  chars/4 %6.0f (%+5.1f%%)\n",
                entry.path().filename().c_str(), real, estimate, 100 * (estimate - real) / real, chars_over_4,
                100 * (chars_over_4 - real) / real);
    EXPECT_NEAR(estimate / real, 1.0, 0.25) << entry.path().filename();
    ++files;
  }
  EXPECT_GE(files, 8);
}

TEST(ScriptEstimatorTest, ChineseIsNotUndercounted) {
  std::string zh = "智能体会遗忘，会撑爆上下文窗口，会在进程崩溃时丢失工作。";
  EXPECT_GT(EstimateTokens(zh), CountCodePoints(zh) / 2);
  Message m = Message::User(zh);
  ScriptRatioEstimator estimator;
  EXPECT_GT(estimator.CountMessages(std::span<const Message>(&m, 1)), CharRatioEstimator().CountMessages(std::span<const Message>(&m, 1)) * 2);
}

}  // namespace
}  // namespace strata::tokenizer
