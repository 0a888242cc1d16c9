// FindOptions from "name=value" settings, for sweeping retrieval weights in the benchmarks without a rebuild
// (retrieval_bench --set, memory_bench STRATA_BENCH_FIND="name=value,...").
#pragma once

#include <cstdlib>
#include <string>

#include "strata/memory/retrieval.h"

namespace strata::bench {

inline Status ApplyFindSetting(memory::FindOptions& o, const std::string& setting) {
  size_t eq = setting.find('=');
  if (eq == std::string::npos) return Status::InvalidArgument("find setting " + setting + ": expected name=value");
  std::string name = setting.substr(0, eq);
  double v = std::atof(setting.c_str() + eq + 1);
  if (name == "vector_weight") {
    o.vector_weight = v;
  } else if (name == "neighbour_weight") {
    o.neighbour_weight = v;
  } else if (name == "neighbour_span") {
    o.neighbour_span = static_cast<int>(v);
  } else if (name == "context_candidates") {
    o.context_candidates = static_cast<size_t>(v);
  } else if (name == "directory_weight") {
    o.directory_weight = v;
  } else if (name == "lexical_candidates") {
    o.lexical_candidates = static_cast<size_t>(v);
  } else if (name == "vector_candidates") {
    o.vector_candidates = static_cast<size_t>(v);
  } else if (name == "step_over_questions") {
    o.step_over_questions = v != 0;
  } else if (name == "reply_weight") {
    o.reply_weight = v;
  } else if (name == "speaker_weight") {
    o.speaker_weight = v;
  } else if (name == "question_penalty") {
    o.question_penalty = v;
  } else if (name == "answer_kind_weight") {
    o.answer_kind_weight = v;
  } else if (name == "long_turn_weight") {
    o.long_turn_weight = v;
  } else if (name == "long_turn_words") {
    o.long_turn_words = static_cast<size_t>(v);
  } else if (name == "beam") {
    o.beam = static_cast<size_t>(v);
  } else if (name == "children_per_directory") {
    o.children_per_directory = static_cast<size_t>(v);
  } else if (name == "limit") {  // Hits returned (recall@k counts the first k either way).
    o.limit = static_cast<size_t>(v);
  } else if (name == "rrf") {
    o.fusion = v != 0 ? memory::Fusion::kReciprocalRank : memory::Fusion::kRelativeScore;
  } else {
    return Status::InvalidArgument("find setting: unknown option " + name);
  }
  return Status::Ok();
}

// Applies a comma-separated list of settings.
inline Status ApplyFindSettings(memory::FindOptions& o, const std::string& list) {
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) STRATA_RETURN_IF_ERROR(ApplyFindSetting(o, list.substr(start, comma - start)));
    start = comma + 1;
  }
  return Status::Ok();
}

}  // namespace strata::bench
