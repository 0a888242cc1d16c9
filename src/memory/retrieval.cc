#include "strata/memory/retrieval.h"

#include <algorithm>
#include <map>
#include <set>

#include "strata/memory/hash.h"

namespace strata::memory {
namespace {

// Sibling lists are short: a smaller RRF constant keeps their ranks apart.
constexpr double kLocalRrfK = 10;

struct Candidate {
  bool is_dir = false;
  double score = 0;
  int level = -1;
  std::string reason;
};

void AddReason(Candidate& c, const std::string& part) { c.reason += (c.reason.empty() ? "" : "; ") + part; }

std::string Fixed(double v) {
  std::string s = std::to_string(v);
  return s.substr(0, s.find('.') + 4);
}

// One candidate list's evidence about a node: its lexical rank and BM25 score (if it matched any term) and its
// cosine with the query (always known: computed exactly when the vector list did not reach the node).
struct Evidence {
  bool is_dir = false;
  int level = -1;
  int lexical_rank = -1;  // 0-based; -1 when it matched no query term.
  double bm25 = 0;
  int vector_rank = -1;  // 0-based within the vector list; -1 when outside it.
  double cosine = 0;
  std::string lexical_detail;
};

// Fills in the cosine of every candidate the vector list did not reach.
Status FillCosines(ContextStore& store, const Vector& qv, std::map<std::string, Evidence>& evidence) {
  std::vector<Uri> missing;
  std::vector<Evidence*> where;
  for (auto& [uri, e] : evidence) {
    if (e.vector_rank >= 0) continue;
    STRATA_ASSIGN_OR_RETURN(Uri u, Uri::Parse(uri));
    missing.push_back(std::move(u));
    where.push_back(&e);
  }
  if (missing.empty()) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(std::vector<float> cosines, store.Similarities(qv, missing));
  for (size_t i = 0; i < where.size(); ++i) where[i]->cosine = cosines[i];
  return Status::Ok();
}

// Fuses the evidence into one score in [0, 1] per node (see FindOptions::fusion).
std::map<std::string, double> Fuse(const std::map<std::string, Evidence>& evidence, const FindOptions& options,
                                   double rrf_k) {
  std::map<std::string, double> fused;
  if (options.fusion == Fusion::kReciprocalRank) {
    const double norm = 2.0 / (rrf_k + 1);
    for (const auto& [uri, e] : evidence) {
      double score = 0;
      if (e.lexical_rank >= 0) score += 1.0 / (rrf_k + e.lexical_rank + 1);
      if (e.vector_rank >= 0) score += 1.0 / (rrf_k + e.vector_rank + 1);
      fused[uri] = score / norm;
    }
    return fused;
  }
  // BM25 has no absolute scale, so it is taken relative to the best match; cosine has one, and is used as is:
  // when nothing is similar (all cosines low) the vector side cannot reorder strong lexical evidence.
  double top_bm25 = 0;
  for (const auto& [uri, e] : evidence) top_bm25 = std::max(top_bm25, e.bm25);
  const double w = options.vector_weight;
  for (const auto& [uri, e] : evidence) {
    double lexical = top_bm25 > 0 ? e.bm25 / top_bm25 : 0;
    fused[uri] = (1 - w) * lexical + w * std::max(0.0, e.cosine);
  }
  return fused;
}

std::string EvidenceReason(const Evidence& e) {
  std::string reason;
  if (e.lexical_rank >= 0) reason = "lexical #" + std::to_string(e.lexical_rank + 1) + ": " + e.lexical_detail;
  if (e.vector_rank >= 0 || e.lexical_rank < 0) {
    reason += std::string(reason.empty() ? "" : "; ") + "vector" +
              (e.vector_rank >= 0 ? " #" + std::to_string(e.vector_rank + 1) : "") + ": cosine " + Fixed(e.cosine);
  } else {
    reason += "; cosine " + Fixed(e.cosine);
  }
  return reason;
}

Result<std::map<std::string, Candidate>> FindOne(ContextStore& store, const std::string& query,
                                                 const FindOptions& options) {
  std::vector<std::string> texts = {query};
  STRATA_ASSIGN_OR_RETURN(std::vector<Vector> embedded, store.EmbedTexts(texts));
  const Vector& qv = embedded[0];
  SearchFilter filter{.under = options.under,
                      .type = options.type,
                      .category = options.category,
                      .current_only = !options.include_superseded};
  STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> lexical, store.Lexical(query, filter, options.lexical_candidates));
  STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> vector, store.VectorNeighbours(qv, filter, options.vector_candidates));
  std::map<std::string, Evidence> global;
  for (size_t i = 0; i < lexical.size(); ++i) {
    Evidence& e = global[lexical[i].uri.str()];
    e.is_dir = lexical[i].is_dir;
    e.level = lexical[i].level;
    e.lexical_rank = static_cast<int>(i);
    e.bm25 = lexical[i].score;
    e.lexical_detail = lexical[i].detail;
  }
  for (size_t i = 0; i < vector.size(); ++i) {
    Evidence& e = global[vector[i].uri.str()];
    e.is_dir = vector[i].is_dir;
    e.vector_rank = static_cast<int>(i);
    e.cosine = vector[i].score;
  }
  if (options.fusion == Fusion::kRelativeScore) STRATA_RETURN_IF_ERROR(FillCosines(store, qv, global));
  std::map<std::string, Candidate> cands;
  for (const auto& [uri, score] : Fuse(global, options, options.rrf_k)) {
    const Evidence& e = global[uri];
    Candidate& c = cands[uri];
    c.is_dir = e.is_dir;
    c.level = e.level;
    c.score = score;
    c.reason = EvidenceReason(e);
  }
  // Among siblings, lexical evidence comes from the global list (one full-text query per find).
  std::map<std::string, std::vector<size_t>> lexical_by_parent;
  for (size_t i = 0; i < lexical.size(); ++i) lexical_by_parent[lexical[i].uri.Parent().str()].push_back(i);

  std::set<std::string> opened;
  std::vector<std::string> previous_top;
  for (int round = 0; round < options.max_rounds; ++round) {
    std::vector<std::pair<double, std::string>> frontier;
    for (const auto& [uri, c] : cands) {
      if (c.is_dir && !opened.contains(uri)) frontier.emplace_back(c.score, uri);
    }
    if (round == 0 && !options.under.is_root() && !opened.contains(options.under.str())) {
      frontier.emplace_back(1e9, options.under.str());  // The starting directory is always opened.
    }
    if (frontier.empty()) break;
    std::sort(frontier.begin(), frontier.end(), std::greater<>());
    if (frontier.size() > options.beam) frontier.resize(options.beam);
    for (const auto& [dir_score, dir] : frontier) {
      opened.insert(dir);
      auto it = cands.find(dir);
      double parent = it == cands.end() ? 0 : it->second.score;
      STRATA_ASSIGN_OR_RETURN(Uri dir_uri, Uri::Parse(dir));
      SearchFilter children{.under = options.under,
                            .type = options.type,
                            .category = options.category,
                            .parent = dir_uri,
                            .current_only = !options.include_superseded};
      STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> local_vector,
                              store.VectorNeighbours(qv, children, options.children_per_directory));
      std::map<std::string, Evidence> local;
      for (size_t i = 0; i < local_vector.size(); ++i) {
        Evidence& e = local[local_vector[i].uri.str()];
        e.is_dir = local_vector[i].is_dir;
        e.vector_rank = static_cast<int>(i);
        e.cosine = local_vector[i].score;
      }
      const std::vector<size_t>& siblings = lexical_by_parent[dir];
      for (size_t k = 0; k < siblings.size(); ++k) {
        const ScoredUri& s = lexical[siblings[k]];
        Evidence& e = local[s.uri.str()];
        e.is_dir = s.is_dir;
        e.level = s.level;
        e.lexical_rank = static_cast<int>(k);
        e.bm25 = s.score;
        e.lexical_detail = s.detail;
      }
      if (options.fusion == Fusion::kRelativeScore) STRATA_RETURN_IF_ERROR(FillCosines(store, qv, local));
      for (const auto& [uri, local_score] : Fuse(local, options, kLocalRrfK)) {
        double blended = (1 - options.parent_weight) * local_score + options.parent_weight * parent;
        Candidate& c = cands[uri];
        c.is_dir = local[uri].is_dir;
        if (c.level < 0) c.level = local[uri].level;
        if (blended > c.score) {
          c.score = blended;
          AddReason(c, "in " + dir + " (local " + Fixed(local_score) + ", parent " + Fixed(parent) + ")");
        }
      }
    }
    // Converged when the best leaves no longer change.
    std::vector<std::pair<double, std::string>> ranked;
    for (const auto& [uri, c] : cands) {
      if (!c.is_dir || options.include_directories) ranked.emplace_back(c.score, uri);
    }
    std::sort(ranked.begin(), ranked.end(), std::greater<>());
    std::vector<std::string> top;
    for (size_t i = 0; i < ranked.size() && i < options.limit; ++i) top.push_back(ranked[i].second);
    if (top == previous_top) break;
    previous_top = std::move(top);
  }
  return cands;
}

}  // namespace

Result<std::vector<Hit>> Find(ContextStore& store, std::span<const std::string> queries, const FindOptions& options) {
  if (queries.empty()) return Status::InvalidArgument("find: no query");
  std::map<std::string, Candidate> merged;
  for (const std::string& query : queries) {
    if (query.find_first_not_of(" \t\r\n") == std::string::npos) return Status::InvalidArgument("find: empty query");
    STRATA_ASSIGN_OR_RETURN(auto cands, FindOne(store, query, options));
    for (auto& [uri, c] : cands) {
      auto [it, inserted] = merged.emplace(uri, c);
      if (inserted) continue;
      Candidate& m = it->second;
      if (c.score > m.score) {
        m.score = c.score;
        m.level = c.level >= 0 ? c.level : m.level;
      }
      AddReason(m, "query \"" + query + "\": " + c.reason);
    }
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [uri, c] : merged) {
    // No evidence at all (no query word, no positive similarity, no promising parent) is not a hit.
    if (c.score > 0 && (!c.is_dir || options.include_directories)) ranked.emplace_back(c.score, uri);
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<Hit> hits;
  std::set<std::string> seen_content;
  for (const auto& [score, uri_text] : ranked) {
    if (hits.size() >= options.limit) break;
    STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(uri_text));
    Result<Node> node = store.Stat(uri);
    if (!node.ok()) continue;  // Removed since it was found.
    const Candidate& c = merged[uri_text];
    if (!node->is_dir) {
      // The same memory stored in two scopes (or found by two queries under two names) is one hit.
      if (!seen_content.insert(HashHex(node->abstract_text + '\0' + node->content)).second) continue;
    }
    Level level = node->is_dir ? Level::kOverview : c.level >= 0 ? static_cast<Level>(c.level) : Level::kOverview;
    hits.push_back({uri, node->is_dir, level, score, node->abstract_text, c.reason});
  }
  return hits;
}

Result<std::vector<Hit>> Find(ContextStore& store, const std::string& query, const FindOptions& options) {
  std::vector<std::string> queries = {query};
  return Find(store, queries, options);
}

}  // namespace strata::memory
