// Retrieval over a context store: hybrid lexical + vector search, then a hierarchical pass.
//
//   1. For each query, full-text (BM25) and vector (cosine) candidate lists over the whole subtree, fused into
//      one score in [0, 1] (FindOptions::fusion):
//        relative score (default): (1 - w) * bm25 / top_bm25 + w * cosine / top_cosine, where every candidate's
//          cosine is computed exactly even when the vector list did not reach it. It keeps the margins that rank
//          fusion throws away: a node matching two rare query words far outscores nodes matching one common word.
//        reciprocal rank: sum over lists of 1 / (rrf_k + rank), normalised so 1.0 means "first in both lists".
//      bench/memory_bench.cc measures both on the same labelled set (docs/PERFORMANCE.md).
//   2. Hierarchical: directories are scored by their own L0/L1 like any node; the best unexplored ones
//      (a beam) are opened, their children scored locally (fused ranks among siblings) and blended with the
//      parent's score: score = (1 - parent_weight) * local + parent_weight * parent, where local is the same
//      fusion over the siblings alone. Child directories join
//      the frontier. Rounds stop when the top `limit` results are unchanged for a round (converged), the
//      frontier is empty, or max_rounds is reached.
//   3. Results from all queries and scopes are merged: one hit per URI (best score, reasons joined), and
//      leaves with identical content keep only the best-scored copy.
//
// Thread safety: Find only reads the store; it may run concurrently with other store calls.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/memory/store.h"

namespace strata::memory {

enum class Fusion { kRelativeScore, kReciprocalRank };

struct FindOptions {
  Uri under = Uri::Root();
  size_t limit = 10;
  std::optional<ContextType> type;
  std::optional<std::string> category;
  bool include_superseded = false;   // Also return memories superseded by newer ones (metadata "valid_to").
  bool include_directories = false;  // Return directories as hits too (they are always used for the descent).
  size_t lexical_candidates = 300;   // Length of the global full-text list.
  size_t vector_candidates = 100;    // Length of the global vector list.
  Fusion fusion = Fusion::kRelativeScore;
  double vector_weight = 0.5;  // w in relative-score fusion.
  double rrf_k = 60;           // Reciprocal-rank fusion constant.
  size_t children_per_directory = 200;  // Siblings scored when a directory is opened.
  double parent_weight = 0.3;
  size_t beam = 4;      // Directories opened per round.
  int max_rounds = 4;
};

struct Hit {
  Uri uri = Uri::Root();
  bool is_dir = false;
  Level level = Level::kOverview;  // The layer the match came from (what to load first).
  double score = 0;
  std::string abstract_text;       // L0, for display.
  std::string reason;              // e.g. "lexical #2: cache (abstract); vector #5: cosine 0.61; parent 0.42".
};

// Finds the best `limit` hits for any of `queries` below `options.under`, best first.
Result<std::vector<Hit>> Find(ContextStore& store, std::span<const std::string> queries, const FindOptions& options);
Result<std::vector<Hit>> Find(ContextStore& store, const std::string& query, const FindOptions& options);

}  // namespace strata::memory
