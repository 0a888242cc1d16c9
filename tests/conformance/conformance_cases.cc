#include "conformance/conformance_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace strata::testing {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// Numbers compare by value (1 == 1.0), everything else structurally.
bool SameScalar(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

std::string Mismatch(const Json& expected, const Json& actual, const std::string& path) {
  if (expected.is_object()) {
    if (!actual.is_object()) return path + ": expected an object, got " + actual.dump();
    for (const auto& [key, value] : expected.items()) {
      if (!actual.contains(key)) return path + "." + key + ": missing";
      std::string m = Mismatch(value, actual[key], path + "." + key);
      if (!m.empty()) return m;
    }
    return "";
  }
  if (expected.is_array()) {
    if (!actual.is_array()) return path + ": expected a list, got " + actual.dump();
    if (expected.size() != actual.size()) {
      return path + ": expected " + std::to_string(expected.size()) + " elements, got " +
             std::to_string(actual.size()) + ": " + actual.dump();
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      std::string m = Mismatch(expected[i], actual[i], path + "[" + std::to_string(i) + "]");
      if (!m.empty()) return m;
    }
    return "";
  }
  if (!SameScalar(expected, actual)) return path + ": expected " + expected.dump() + ", got " + actual.dump();
  return "";
}

}  // namespace

std::vector<Json> LoadCases(const std::string& area) {
  std::vector<Json> cases;
  fs::path dir = fs::path(STRATA_CONFORMANCE_DIR) / "kosong";
  EXPECT_TRUE(fs::is_directory(dir)) << "conformance cases not found at " << dir;
  if (!fs::is_directory(dir)) return cases;
  // The shared cases first, then the project's own (tests/conformance/cases: behaviour matched from
  // kosong's and kimi-cli's code and snapshot tests beyond the shared sample), each directory in name order.
  for (const fs::path& d : {dir, fs::path(STRATA_SOURCE_DIR) / "tests" / "conformance" / "cases"}) {
    if (!fs::is_directory(d)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(d)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      std::ifstream in(file);
      Json c = Json::parse(in, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(c.is_discarded()) << file << " is not valid JSON";
      if (c.is_discarded()) continue;
      if (c.value("area", "") == area) cases.push_back(std::move(c));
    }
  }
  EXPECT_FALSE(cases.empty()) << "no cases for area " << area;
  return cases;
}

std::vector<Json> LoadBudgetCases() {
  fs::path file = fs::path(STRATA_CONFORMANCE_DIR) / "budget" / "budget_cases.json";
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "budget cases not found at " << file;
  if (!in) return {};
  Json all = Json::parse(in);
  std::vector<Json> cases(all["cases"].begin(), all["cases"].end());
  EXPECT_FALSE(cases.empty()) << "no budget cases in " << file;
  return cases;
}

std::string SubsetMismatch(const Json& expected, const Json& actual, const std::vector<std::string>& exact_keys) {
  if (expected.is_object() && actual.is_object()) {
    for (const std::string& key : exact_keys) {
      if (!expected.contains(key)) continue;
      if (!actual.contains(key)) return "." + key + ": missing";
      if (nlohmann::json::parse(expected[key].dump()) != nlohmann::json::parse(actual[key].dump())) {
        // Exact: no extra keys anywhere below. Report the first difference found by the subset walk, or
        // the extra keys.
        std::string m = Mismatch(expected[key], actual[key], "." + key);
        if (!m.empty()) return m;
        return "." + key + ": has keys the expected value does not: " + actual[key].dump();
      }
    }
  }
  return Mismatch(expected, actual, "");
}

std::string SseFromCase(const Json& input) {
  std::string sse;
  if (input.contains("events")) {  // Anthropic names each event.
    for (const Json& e : input["events"]) sse += "event: " + e.value("type", "") + "\ndata: " + e.dump() + "\n\n";
  }
  for (const Json& chunk : input.value("chunks", Json::array())) sse += "data: " + chunk.dump() + "\n\n";
  return sse;
}

Json UsageJson(const std::optional<TokenUsage>& usage) {
  if (!usage) return nullptr;
  return Json{{"input_other", usage->input_other}, {"output", usage->output},
              {"input_cache_read", usage->input_cache_read}, {"input_cache_creation", usage->input_cache_creation}};
}

}  // namespace strata::testing
