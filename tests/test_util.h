// Shared helpers for Strata's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/util/status.h"

namespace strata::testing {

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadFileOrDie(const std::string& path);

// The outcome of running the strata program.
struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `strata ARGS` (the binary built with the tests) with `input` on stdin and `env` ("NAME=value")
// added to the environment.
CliRun RunStrata(const std::vector<std::string>& args, const std::string& input,
                 const std::vector<std::string>& env = {});
void WriteFileOrDie(const std::string& path, const std::string& data);

}  // namespace strata::testing

namespace strata::testing {
inline const Status& AsStatus(const Status& s) { return s; }
template <typename T>
const Status& AsStatus(const Result<T>& r) { return r.status(); }
}  // namespace strata::testing

#define ASSERT_OK(expr)                                                      \
  do {                                                                       \
    const ::strata::Status strata_s_ = ::strata::testing::AsStatus((expr)); \
    ASSERT_TRUE(strata_s_.ok()) << strata_s_.ToString();                     \
  } while (0)
#define EXPECT_OK(expr)                                                      \
  do {                                                                       \
    const ::strata::Status strata_s_ = ::strata::testing::AsStatus((expr)); \
    EXPECT_TRUE(strata_s_.ok()) << strata_s_.ToString();                     \
  } while (0)
