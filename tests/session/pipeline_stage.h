// Which step of the memory pipeline a scripted model is being asked for, told from the shipped prompts
// (prompts/session/*.yaml, prompts/find/*.yaml): tests answer each step differently.
#pragma once

#include <string>

#include "strata/llm/scripted.h"

namespace strata::testing {

enum class Stage { kSummary, kExtract, kDedup, kRewrite, kRerank, kOther };

// A scripted model's reply of one text part.
inline llm::ScriptedReply TextReply(std::string text) {
  llm::ScriptedReply r;
  r.parts.push_back(ContentPart(TextPart{std::move(text)}));
  return r;
}

inline Stage StageOf(const llm::ScriptedProvider::Request& req) {
  std::string prompt = req.history.empty() ? "" : req.history[0].ExtractText();
  if (prompt.find("Summarise the conversation") != std::string::npos) return Stage::kSummary;
  if (prompt.find("You maintain an agent's long-term memory") != std::string::npos) return Stage::kExtract;
  if (prompt.find("A new memory was extracted") != std::string::npos) return Stage::kDedup;
  if (prompt.find("write up to") != std::string::npos && prompt.find("\"queries\"") != std::string::npos) {
    return Stage::kRewrite;  // prompts/find/rewrite.yaml
  }
  if (prompt.find("Below are passages found for a question") != std::string::npos) return Stage::kRerank;
  return Stage::kOther;
}

}  // namespace strata::testing
