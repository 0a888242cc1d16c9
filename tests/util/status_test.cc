#include "strata/util/status.h"

#include <gtest/gtest.h>

#include <set>

#include "strata/util/path.h"

namespace strata {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Chain(int x, int* out) {
  STRATA_ASSIGN_OR_RETURN(int h, Half(x));
  STRATA_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, ResultCarriesValueOrError) {
  int out = 0;
  EXPECT_TRUE(Chain(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Chain(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
  EXPECT_EQ(s.ToString(), "invalid_argument: odd: 3");
  EXPECT_EQ(s.WithContext("line 4").message(), "line 4: odd: 3");
}

TEST(StatusTest, PayloadsSurviveCopiesAndContext) {
  Status s = Status::Unavailable("busy");
  s.SetPayload("k", "1");
  Status copy = s;
  copy.SetPayload("k", "2");  // Copy-on-write: the original keeps its value.
  EXPECT_EQ(s.GetPayload("k"), "1");
  EXPECT_EQ(copy.GetPayload("k"), "2");
  EXPECT_NE(s, copy);
  EXPECT_EQ(s.WithContext("ctx").GetPayload("k"), "1");
  EXPECT_FALSE(s.GetPayload("other").has_value());
  Status ok;
  ok.SetPayload("k", "1");
  EXPECT_FALSE(ok.GetPayload("k").has_value());
  EXPECT_EQ(ok, Status::Ok());
}

TEST(StatusTest, EveryCodeMapsToDistinctExitCode) {
  std::set<int> seen;
  for (StatusCode c : {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kFailedPrecondition,
                       StatusCode::kUnavailable, StatusCode::kResourceExhausted, StatusCode::kDataLoss,
                       StatusCode::kCancelled, StatusCode::kDeadlineExceeded, StatusCode::kAlreadyExists,
                       StatusCode::kInternal, StatusCode::kUnauthenticated, StatusCode::kPermissionDenied}) {
    int code = ExitCodeFor(c);
    EXPECT_GT(code, 1) << StatusCodeName(c);  // 0 is success, 1 means "ran and found a problem".
    EXPECT_TRUE(seen.insert(code).second) << StatusCodeName(c);
    EXPECT_GE(HttpStatusFor(c), 400);
  }
  EXPECT_EQ(ExitCodeFor(StatusCode::kOk), 0);
}

TEST(PathTest, SplitsAndJoins) {
  EXPECT_EQ(Dirname("a/b/c.jsonl"), "a/b");
  EXPECT_EQ(Dirname("c.jsonl"), ".");
  EXPECT_EQ(Dirname("/c.jsonl"), "/");
  EXPECT_EQ(Basename("a/b/c.jsonl"), "c.jsonl");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath(".", "b"), "b");
  EXPECT_EQ(SplitExtension("context.jsonl"), (std::pair<std::string, std::string>{"context", ".jsonl"}));
  EXPECT_EQ(SplitExtension("README"), (std::pair<std::string, std::string>{"README", ""}));
}

}  // namespace
}  // namespace strata
