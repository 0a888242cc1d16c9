#include "strata/memory/retrieval.h"

#include <algorithm>
#include <map>
#include <set>

#include "memory/hash.h"

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

Result<std::map<std::string, Candidate>> FindOne(ContextStore& store, const std::string& query,
                                                 const FindOptions& options) {
  std::map<std::string, Candidate> cands;
  std::vector<std::string> texts = {query};
  STRATA_ASSIGN_OR_RETURN(std::vector<Vector> embedded, store.EmbedTexts(texts));
  const Vector& qv = embedded[0];
  SearchFilter filter{.under = options.under, .type = options.type, .category = options.category};
  STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> lexical, store.Lexical(query, filter, options.lexical_candidates));
  STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> vector, store.VectorNeighbours(qv, filter, options.vector_candidates));
  const double norm = 2.0 / (options.rrf_k + 1);
  for (size_t i = 0; i < lexical.size(); ++i) {
    Candidate& c = cands[lexical[i].uri.str()];
    c.is_dir = lexical[i].is_dir;
    c.score += 1.0 / (options.rrf_k + static_cast<double>(i) + 1) / norm;
    c.level = lexical[i].level;
    AddReason(c, "lexical #" + std::to_string(i + 1) + ": " + lexical[i].detail);
  }
  for (size_t i = 0; i < vector.size(); ++i) {
    Candidate& c = cands[vector[i].uri.str()];
    c.is_dir = vector[i].is_dir;
    c.score += 1.0 / (options.rrf_k + static_cast<double>(i) + 1) / norm;
    AddReason(c, "vector #" + std::to_string(i + 1) + ": " + vector[i].detail);
  }
  // Lexical ranks among siblings come from the global list (one full-text query per find).
  std::map<std::string, std::vector<std::string>> lexical_by_parent;
  for (const ScoredUri& s : lexical) lexical_by_parent[s.uri.Parent().str()].push_back(s.uri.str());

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
      SearchFilter children{.under = options.under, .type = options.type, .category = options.category,
                            .parent = dir_uri};
      STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> local, store.VectorNeighbours(qv, children, 200));
      const auto& local_lexical = lexical_by_parent[dir];
      const double local_norm = 2.0 / (kLocalRrfK + 1);
      for (size_t i = 0; i < local.size(); ++i) {
        double local_score = 1.0 / (kLocalRrfK + static_cast<double>(i) + 1);
        auto pos = std::find(local_lexical.begin(), local_lexical.end(), local[i].uri.str());
        if (pos != local_lexical.end()) {
          local_score += 1.0 / (kLocalRrfK + static_cast<double>(pos - local_lexical.begin()) + 1);
        }
        double blended = (1 - options.parent_weight) * local_score / local_norm + options.parent_weight * parent;
        Candidate& c = cands[local[i].uri.str()];
        c.is_dir = local[i].is_dir;
        if (blended > c.score) {
          c.score = blended;
          AddReason(c, "in " + dir + " (sibling #" + std::to_string(i + 1) + ", parent " + Fixed(parent) + ")");
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
    if (!c.is_dir || options.include_directories) ranked.emplace_back(c.score, uri);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
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
    Level level = node->is_dir ? Level::kOverview
                  : c.level >= 0 ? static_cast<Level>(c.level) : Level::kOverview;
    hits.push_back({uri, node->is_dir, level, score, node->abstract_text, c.reason});
  }
  return hits;
}

Result<std::vector<Hit>> Find(ContextStore& store, const std::string& query, const FindOptions& options) {
  std::vector<std::string> queries = {query};
  return Find(store, queries, options);
}

}  // namespace strata::memory
