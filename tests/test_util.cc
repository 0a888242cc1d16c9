#include "test_util.h"

#include <sqlite3.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sqlite_test_util.h"

namespace strata::testing {

Result<std::vector<std::string>> SqliteRows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> rows;
  int rc = sqlite3_open(path.c_str(), &db);
  char* error = nullptr;
  if (rc == SQLITE_OK) {
    rc = sqlite3_exec(
        db, sql.c_str(),
        [](void* out, int, char** values, char**) {
          static_cast<std::vector<std::string>*>(out)->push_back(values[0] != nullptr ? values[0] : "");
          return 0;
        },
        &rows, &error);
  }
  std::string message = error != nullptr ? error : (db != nullptr ? sqlite3_errmsg(db) : "cannot open");
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) return Status::Internal(path + ": " + message);
  return rows;
}

TempDir::TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "strata-test-XXXXXX").string();
  char* made = ::mkdtemp(templ.data());
  if (made == nullptr) std::abort();
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFileOrDie(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  if (!out) ADD_FAILURE() << "cannot write " << path;
}

namespace {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

CliRun RunStrata(const std::vector<std::string>& args, const std::string& input, const std::vector<std::string>& env) {
  TempDir dir;
  WriteFileOrDie(dir.File("in"), input);
  std::string cmd = "env";
  for (const std::string& e : env) cmd += " " + Quote(e);
  cmd += " " + Quote(STRATA_CLI);
  for (const std::string& a : args) cmd += " " + Quote(a);
  cmd += " <" + Quote(dir.File("in")) + " >" + Quote(dir.File("out")) + " 2>" + Quote(dir.File("err"));
  int status = std::system(cmd.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFileOrDie(dir.File("out"));
  run.err = ReadFileOrDie(dir.File("err"));
  return run;
}

}  // namespace strata::testing
