// A test tool: renders TEMPLATE_FILE with the variables of VARS_JSON_FILE (jinja_reference.py runs it).
// Exit 0 with the output on stdout, or 2 with the error on stderr.
#include <fstream>
#include <iostream>
#include <sstream>

#include "strata/prompt/jinja.h"

namespace {
std::string ReadAll(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: prompt_render_tool TEMPLATE_FILE VARS_JSON_FILE\n";
    return 2;
  }
  auto vars = strata::prompt::Value::FromJson(ReadAll(argv[2]));
  if (!vars.ok()) {
    std::cerr << vars.status().ToString() << "\n";
    return 2;
  }
  auto tpl = strata::prompt::Template::Parse(ReadAll(argv[1]));
  if (!tpl.ok()) {
    std::cerr << tpl.status().ToString() << "\n";
    return 2;
  }
  auto out = tpl->Render(*vars);
  if (!out.ok()) {
    std::cerr << out.status().ToString() << "\n";
    return 2;
  }
  std::cout << *out;
  return 0;
}
