// The prompt conformance cases (../shared/conformance/prompts): YAML loading, validation and rendering,
// through the library and through `strata prompt render`, byte for byte.
#include "strata/prompt/prompt_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace strata::prompt {
namespace {

using Json = nlohmann::ordered_json;

std::vector<Json> PromptCases() {
  std::vector<Json> cases;
  std::filesystem::path dir = std::filesystem::path(STRATA_CONFORMANCE_DIR) / "prompts";
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    cases.push_back(Json::parse(in));
  }
  EXPECT_GE(cases.size(), 10u);
  return cases;
}

TEST(PromptConformance, EveryCaseRendersOrFailsLikeTheReference) {
  for (const Json& c : PromptCases()) {
    SCOPED_TRACE(c["id"].get<std::string>());
    auto vars = Value::FromJson(c["vars"].dump());
    ASSERT_OK(vars);
    Result<std::string> out = std::string();
    auto t = PromptTemplate::FromYaml(c["template_yaml"].get<std::string>(), c["id"].get<std::string>());
    if (t.ok()) {
      EXPECT_EQ(t->id(), c["prompt_id"].get<std::string>());
      out = t->Render(*vars);
    } else {
      out = t.status();
    }
    if (c["expect_error"].get<bool>()) {
      ASSERT_FALSE(out.ok()) << *out;
      EXPECT_EQ(PromptErrorKind(out.status()), c["error_kind"].get<std::string>()) << out.status().ToString();
    } else {
      ASSERT_OK(out);
      EXPECT_EQ(*out, c["expected"].get<std::string>());
    }
  }
}

TEST(PromptCli, RenderPrintsExactlyTheTextOrNamesTheError) {
  testing::TempDir dir;
  for (const Json& c : PromptCases()) {
    SCOPED_TRACE(c["id"].get<std::string>());
    std::string yaml = dir.File(c["id"].get<std::string>() + ".yaml");
    testing::WriteFileOrDie(yaml, c["template_yaml"].get<std::string>());
    testing::WriteFileOrDie(dir.File("vars.json"), c["vars"].dump());
    testing::CliRun run = testing::RunStrata({"prompt", "render", yaml, "--vars", dir.File("vars.json")}, "");
    if (c["expect_error"].get<bool>()) {
      EXPECT_EQ(run.exit_code, 2);
      EXPECT_NE(run.err.find(c["error_kind"].get<std::string>() + ":"), std::string::npos) << run.err;
      EXPECT_EQ(run.out, "");
    } else {
      EXPECT_EQ(run.exit_code, 0) << run.err;
      EXPECT_EQ(run.out, c["expected"].get<std::string>());
    }
  }
  // By id, from a directory, with --var.
  testing::CliRun run = testing::RunStrata({"prompt", "render", "conf.plain_substitution", "--dir", dir.path(), "--var",
                                            "question=Q?", "--var", "passage=P."},
                                           "");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("Question: Q?\nPassage:\nP."), std::string::npos) << run.out;
  run = testing::RunStrata({"prompt", "render", "no.such.id", "--dir", dir.path()}, "");
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_NE(run.err.find("no.such.id"), std::string::npos);
}

}  // namespace
}  // namespace strata::prompt

namespace strata::prompt {
namespace {

// Hostile templates fail fast with kResourceExhausted naming the limit, before they take the machine.
TEST(RenderLimitsTest, HostileTemplatesHitALimitInsteadOfTheMachine) {
  struct Case {
    const char* source;
    const char* expect;  // In the error message.
  };
  for (const Case& c : {Case{"{% for i in range(10**9) %}x{% endfor %}", "range() of 1000000000 items"},
                        Case{"{{ ('x' * 60000000) | length }}", "exceeds the template limit"},
                        Case{"{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                             "{% endfor %}{{ ns.s | length }}",
                             "exceeds the template limit"},
                        Case{"{% for i in range(900000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}",
                             "rendered text exceeds"}}) {
    SCOPED_TRACE(c.source);
    auto t = Template::Parse(c.source);
    ASSERT_OK(t);
    auto out = t->Render(Value(Dict{}));
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().ToString();
    EXPECT_NE(out.status().message().find(c.expect), std::string::npos) << out.status().message();
  }
  // Nested loops that build nothing still count steps (the default allows 2,000,000; a smaller limit here
  // keeps the test fast).
  auto loops = Template::Parse("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}");
  ASSERT_OK(loops);
  auto spun = loops->Render(Value(Dict{}), {.max_steps = 100'000});
  EXPECT_EQ(spun.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(spun.status().message().find("limit of 100000 steps"), std::string::npos) << spun.status().message();
  // Within the limits the same constructs render.
  auto small = Template::Parse("{% for i in range(3) %}{{ i ~ 'x' * 2 }}{% endfor %}");
  ASSERT_OK(small);
  auto out = small->Render(Value(Dict{}));
  ASSERT_OK(out);
  EXPECT_EQ(*out, "0xx1xx2xx");
  // Limits are the caller's to set.
  auto tight = small->Render(Value(Dict{}), {.max_output_bytes = 4});
  EXPECT_EQ(tight.status().code(), StatusCode::kResourceExhausted);
  // A format width is padding the template asks for: a huge one is refused before it is allocated (the
  // fuzzer found "%3333333333333333d", which also overflowed the width).
  for (const char* source : {"{{ '%333333333333333333d' % 1 }}", "{{ '%.999999f' % 1.5 }}", "{{ '%*d' % (10**9, 1) }}",
                             "{{ '{:999999}'.format(1) }}", "{{ '{:.9999999}'.format('x') }}"}) {
    SCOPED_TRACE(source);
    auto t = Template::Parse(source);
    ASSERT_OK(t);
    auto wide = t->Render(Value(Dict{}));
    EXPECT_EQ(wide.status().code(), StatusCode::kResourceExhausted) << wide.status().ToString();
  }
  auto padded = Template::Parse("{{ '%5d|%-4s|%.2f' % (42, 'ab', 3.14159) }}{{ '{:>6}'.format('x') }}");
  ASSERT_OK(padded);
  EXPECT_EQ(*padded->Render(Value(Dict{})), "   42|ab  |3.14     x");
}

}  // namespace
}  // namespace strata::prompt

namespace strata::prompt {
namespace {

// Deeply nested or very long expressions are errors, not a blown stack (parser, renderer or destructor).
// An index of more digits than size_t holds is out of range, said as Python says it (std::stoul threw
// out_of_range out of the renderer: an "unexpected error" naming no template).
TEST(RenderLimitsTest, AnIndexPastEveryIntegerIsOutOfRangeNotAThrow) {
  auto format = Template::Parse(R"({{ "{99999999999999999999}".format(1) }})");
  ASSERT_OK(format);
  auto formatted = format->Render(Value(Dict{}));
  ASSERT_FALSE(formatted.ok());
  EXPECT_NE(formatted.status().message().find("Replacement index 99999999999999999999 out of range"),
            std::string::npos) << formatted.status().ToString();
  auto attribute = Template::Parse(R"({{ [[1, 2]] | map(attribute="99999999999999999999") | list }}|{{ [[1, 2]] | map(attribute="1") | list }})");
  ASSERT_OK(attribute);
  auto mapped = attribute->Render(Value(Dict{}));
  ASSERT_OK(mapped);
  EXPECT_EQ(*mapped, "[Undefined]|[2]");
}

TEST(RenderLimitsTest, DeepNestingIsAnErrorNotACrash) {
  auto repeat = [](std::string_view piece, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += piece;
    return s;
  };
  std::string sum = "{{ 1";
  for (int i = 0; i < 20000; ++i) sum += " + 1";
  sum += " }}";
  for (const std::string& source :
       {"{{ " + repeat("(", 5000) + "1" + repeat(")", 5000) + " }}", sum,
        repeat("{% if true %}", 20000) + "x" + repeat("{% endif %}", 20000), "{{ " + repeat("not ", 20000) + "true }}",
        "{{ 'x'" + repeat("|upper", 20000) + " }}", "{{ " + repeat("[", 20000) + repeat("]", 20000) + " }}",
        "{{ 1" + repeat(" if x else 2", 20000) + " }}"}) {  // The else branch nests too (it crashed the parser).
    SCOPED_TRACE(source.substr(0, 40));
    auto t = Template::Parse(source);
    Status status = t.ok() ? t->Render(Value(Dict{})).status() : t.status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
    EXPECT_NE(status.message().find("levels deep"), std::string::npos) << status.message();
  }
  auto fine = Template::Parse("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}");
  ASSERT_OK(fine);
  EXPECT_EQ(*fine->Render(Value(Dict{})), "1");
}

}  // namespace
}  // namespace strata::prompt

namespace strata::prompt {
namespace {

// Inputs that killed the process: the one int64 division the CPU traps on, a list that holds itself,
// filters that allocated before the limit was looked at, and numbers too large for an integer.
TEST(RenderLimitsTest, ArithmeticAndSelfReferenceAreErrorsNotCrashes) {
  struct Case {
    const char* source;
    StatusCode code;
    const char* expect;
  };
  for (const Case& c : {Case{"{{ (-9223372036854775807 - 1) // -1 }}", StatusCode::kInvalidArgument, "integer overflow"},
                        Case{"{% set a = [] %}{{ a.append(a) }}", StatusCode::kInvalidArgument, "cannot hold itself"},
                        Case{"{% set a = [] %}{% set b = [a] %}{{ a.append(b) }}", StatusCode::kInvalidArgument,
                             "cannot hold itself"},
                        Case{"{% set ns = namespace(x=1) %}{% set ns.x = ns %}", StatusCode::kInvalidArgument,
                             "cannot hold itself"},
                        Case{"{{ 'x' | center(1000000000) }}", StatusCode::kResourceExhausted, "exceeds the template limit"},
                        Case{"{{ 'ab' | indent(1000000000) }}", StatusCode::kResourceExhausted, "exceeds the template limit"},
                        Case{"{{ ('ab' * 1000) | replace('a', 'x' * 100000) }}", StatusCode::kResourceExhausted,
                             "exceeds the template limit"},
                        Case{"{{ '9999999999999999999999' | int }}", StatusCode::kInvalidArgument, "too large for an integer"},
                        Case{"{{ 1e300 | int }}", StatusCode::kInvalidArgument, "too large for an integer"},
                        Case{"{{ (-9223372036854775807 - 1) | abs }}", StatusCode::kInvalidArgument, "integer overflow"},
                        Case{"{{ [9223372036854775807, 1] | sum }}", StatusCode::kInvalidArgument, "integer overflow"},
                        Case{"{{ 3 ** 9223372036854775807 }}", StatusCode::kInvalidArgument, "integer overflow"}}) {
    SCOPED_TRACE(c.source);
    auto t = Template::Parse(c.source);
    ASSERT_OK(t);
    auto out = t->Render(Value(Dict{}));
    ASSERT_FALSE(out.ok()) << *out;
    EXPECT_EQ(out.status().code(), c.code) << out.status().ToString();
    EXPECT_NE(out.status().message().find(c.expect), std::string::npos) << out.status().message();
  }
  // Nesting built a level at a time stops at a limit (the check that refuses a cycle looks at what is
  // stored; it must not make the loop quadratic either).
  auto deep = Template::Parse(
      "{% set ns = namespace(a=[]) %}{% for i in range(200000) %}{% set ns.a = [ns.a] %}{% endfor %}{{ ns.a }}");
  ASSERT_OK(deep);
  auto deep_out = deep->Render(Value(Dict{}));
  ASSERT_FALSE(deep_out.ok());
  EXPECT_EQ(deep_out.status().code(), StatusCode::kResourceExhausted) << deep_out.status().ToString();
  EXPECT_NE(deep_out.status().message().find("nested more than 500 lists and dicts deep"), std::string::npos)
      << deep_out.status().message();
  // Wide values are stored as Jinja2 stores them: 2,001 dicts in a list kept in a namespace, a list of them
  // appended, and a text that grows by a little where it matches.
  auto wide = Template::Parse(
      "{% set ns = namespace(rows=[]) %}{% for i in range(2001) %}{% set ns.rows = ns.rows + [{'i': i}] %}"
      "{% endfor %}{% set out = [] %}{{ out.append(ns.rows) }}{{ out[0] | length }}|"
      "{{ ((('ab\n' * 2000000)) | replace('\n', '<br>\n')) | length }}");
  ASSERT_OK(wide);
  auto wide_out = wide->Render(Value(Dict{}), {.max_steps = 10'000'000});
  ASSERT_OK(wide_out);
  EXPECT_EQ(*wide_out, "None2001|14000000");
  // The same operations within range still work as Python's.
  auto fine = Template::Parse(
      "{{ (-9223372036854775807 - 1) % -1 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 'x' | center(5) }}|{{ '42' | int }}|"
      "{% set a = [1] %}{% set b = [a] %}{{ b.append(a) }}{{ b }}|{{ (-9223372036854775807 - 1) is divisibleby(-1) }}|"
      "{{ [1, 2, 3][1::9223372036854775807] }}|{{ 1 ** 9223372036854775807 }}|{{ (-1) ** 9223372036854775807 }}|"
      "{{ (-2) ** 63 }}|{{ 2 ** 62 }}");
  ASSERT_OK(fine);
  EXPECT_EQ(*fine->Render(Value(Dict{})),
            "0|-4|2|  x  |42|None[[1], [1]]|True|[2]|1|-1|-9223372036854775808|4611686018427387904");
}

// A template file's YAML aliases are counted each time they are used: a "billion laughs" file reached 3.9 GB.
TEST(PromptTemplateTest, YamlAliasesThatExpandWithoutBoundAreRefused) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += std::string(k ? ", " : "") + "*a" + std::to_string(i - 1);
    yaml += "]\n";
  }
  yaml += "metadata: {id: t, name: t, description: t, version: '1', language: en, category: c}\ntemplate: hi\n";
  auto t = PromptTemplate::FromYaml(yaml, "laughs.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("YAML nodes (aliases counted each time they are used)"), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("laughs.yaml"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace strata::prompt
