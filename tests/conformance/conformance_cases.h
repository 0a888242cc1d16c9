// Loads the data-driven cases in ../shared/conformance/kosong/ for one area. A missing directory or an area
// with no cases is a test failure, not a skip.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/message/message.h"

namespace strata::testing {

std::vector<nlohmann::ordered_json> LoadCases(const std::string& area);

// Loads the cases of ../shared/conformance/budget/budget_cases.json (a failure if missing or empty).
std::vector<nlohmann::ordered_json> LoadBudgetCases();

// Compares `actual` with `expected` under the conformance "subset" rule: every expected key must be present
// with an equal value (objects recursively), lists equal in length and matched element by element. Keys in
// `exact_keys` (top level only) must be equal as a whole. Returns "" on a match, else where it differs.
std::string SubsetMismatch(const nlohmann::ordered_json& expected, const nlohmann::ordered_json& actual,
                           const std::vector<std::string>& exact_keys = {});

// The text/event-stream a provider would have sent for a stream_* case's recorded payloads ("events" are
// named Anthropic events, "chunks" unnamed OpenAI-style data payloads).
std::string SseFromCase(const nlohmann::ordered_json& input);

// Usage as the cases write it: {input_other, output, input_cache_read, input_cache_creation}, or null.
nlohmann::ordered_json UsageJson(const std::optional<TokenUsage>& usage);

}  // namespace strata::testing
