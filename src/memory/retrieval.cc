#include "strata/memory/retrieval.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "fts_text.h"
#include "turns.h"
#include "strata/memory/hash.h"

namespace strata::memory {

namespace {

// A transcript turn's label (SpeakerOf): the speaker's name, and where the text after the label's colon starts
// (0 with an empty name when the text does not open with a label).
struct Label {
  std::string_view name;
  size_t text_start = 0;
};

Label ParseLabel(std::string_view text) {
  size_t i = 0;
  int words = 0;
  while (i < text.size() && words < 4) {
    size_t start = i;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) != 0 || text[i] == '.' ||
                               text[i] == '\'' || text[i] == '-' || static_cast<unsigned char>(text[i]) >= 0x80)) {
      ++i;
    }
    if (i == start) return {};
    // Names are capitalised: "The plan:", "Step 1:" and "https:" are not speakers.
    auto first = static_cast<unsigned char>(text[start]);
    if (std::isupper(first) == 0 && first < 0x80) return {};
    ++words;
    size_t end = i;
    if (i < text.size() && text[i] == ':') return {text.substr(0, end), i + 1};
    if (i + 1 < text.size() && text[i] == ' ' && text[i + 1] == '(') {
      size_t close = text.find(')', i + 2);
      if (close == std::string_view::npos || close - i > 80 || close + 1 >= text.size() || text[close + 1] != ':') {
        return {};
      }
      return {text.substr(0, end), close + 2};
    }
    if (i >= text.size() || text[i] != ' ') return {};
    ++i;
  }
  return {};
}

}  // namespace

std::string_view SpeakerOf(std::string_view text) { return ParseLabel(text).name; }

bool EndsWithQuestion(std::string_view text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  if (text[end] == ']') {  // The note, brackets inside it included.
    int depth = 0;
    size_t open = end + 1;
    for (size_t i = end + 1; i-- > 0;) {
      if (text[i] == ']') ++depth;
      if (text[i] == '[' && --depth == 0) {
        open = i;
        break;
      }
    }
    if (open > end || open == 0) return false;
    end = text.find_last_not_of(" \t\r\n", open - 1);
    if (end == std::string_view::npos) return false;
  }
  // Closing quotes and brackets after the mark: 'did she say "why?"'.
  while (end > 0 && (text[end] == '"' || text[end] == '\'' || text[end] == ')')) --end;
  if (text.substr(0, end + 1).ends_with("\xef\xbc\x9f")) return true;  // U+FF1F, the full-width mark.
  return text[end] == '?';
}

size_t TurnWords(std::string_view text) {
  size_t i = ParseLabel(text).text_start;
  size_t words = 0;
  bool in_word = false;
  while (i < text.size()) {
    char32_t cp = NextCodePoint(text, &i);
    bool cjk = IsCjk(cp);
    bool letter = !cjk && IsWordChar(cp);
    if (cjk || (letter && !in_word)) ++words;
    in_word = letter;
  }
  return words;
}

namespace {

// The words of a text (letters and digits; bytes outside ASCII are letters), ASCII lower-cased, in order: how
// find splits a query, a speaker's label and a turn alike.
std::vector<std::string> LowerWordList(std::string_view text) {
  std::vector<std::string> out;
  std::string w;
  for (char ch : text) {
    if (std::isalnum(static_cast<unsigned char>(ch)) != 0 || static_cast<unsigned char>(ch) >= 0x80) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

// Nouns whose answer is a named thing or a place: "which city", "what books", "what authors".
bool NamesANamedThing(const std::string& w) {
  static const std::set<std::string> kNouns = {
      "state", "states", "city", "cities", "country", "countries", "place", "places", "park", "parks", "beach",
      "beaches", "restaurant", "restaurants", "location", "locations", "destination", "destinations", "author",
      "authors", "artist", "artists", "band", "bands", "singer", "singers", "name", "names", "book", "books",
      "movie", "movies", "film", "films", "show", "shows", "game", "games", "song", "songs", "novel", "novels",
      "series", "brand", "brands", "company", "companies", "team", "teams", "person", "people", "musician",
      "musicians", "composer", "composers", "title", "titles"};
  return kNouns.contains(w);
}

}  // namespace

AnswerKind AnswerKindOf(std::string_view question) {
  const std::vector<std::string> w = LowerWordList(question);
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == "how" && i + 1 < w.size() &&
        (w[i + 1] == "many" || w[i + 1] == "much" || w[i + 1] == "long" || w[i + 1] == "old")) {
      return AnswerKind::kNumber;
    }
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == "who" || w[i] == "whose" || w[i] == "where") return AnswerKind::kName;
    if (w[i] == "what" || w[i] == "which") {
      for (size_t k = i + 1; k < w.size() && k <= i + 2; ++k) {
        if (NamesANamedThing(w[k])) return AnswerKind::kName;
      }
    }
  }
  return AnswerKind::kNone;
}

bool HoldsAnswer(std::string_view text, AnswerKind kind, const std::set<std::string>& query_words) {
  // "one" is left out: "the one", "one of" say no number.
  static const std::set<std::string> kNumberWords = {"two",     "three",    "four",   "five",   "six",    "seven",
                                                     "eight",   "nine",     "ten",    "eleven", "twelve", "twenty",
                                                     "thirty",  "hundred",  "thousand", "couple", "few",  "several"};
  if (kind == AnswerKind::kNone) return false;
  const Label label = ParseLabel(text);
  const std::vector<std::string> own = LowerWordList(label.name);
  auto word_char = [](unsigned char c) { return std::isalnum(c) != 0 || c >= 0x80; };
  bool opens_sentence = true;  // At the start of the text after the label, and after . ! ? or a line break.
  size_t i = label.text_start;
  std::string lower;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!word_char(c)) {
      if (c == '.' || c == '!' || c == '?' || c == '\n') opens_sentence = true;
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && word_char(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view word = text.substr(start, i - start);
    const bool opened = opens_sentence;
    opens_sentence = false;
    if (kind == AnswerKind::kNumber) {
      if (std::isdigit(c) != 0) return true;
      if (word.size() > 8) continue;  // Longer than any number word.
    } else if (opened || std::isupper(c) == 0 || word.size() < 2) {
      continue;
    }
    lower.assign(word);
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (kind == AnswerKind::kNumber) {
      if (kNumberWords.contains(lower)) return true;
      continue;
    }
    if (!query_words.contains(lower) && std::find(own.begin(), own.end(), lower) == own.end()) return true;
  }
  return false;
}

namespace {

// What find needs of a node it read (steps 2 and 5), kept instead of the node: a session archive's content
// can be a whole transcript, and a find may look at hundreds of nodes.
struct NodeFacts {
  bool is_dir = false;
  std::string abstract_text;
  std::string content_key;  // Abstract and content hashed: leaves with the same are one hit.
  std::string speaker;      // A transcript turn's (SpeakerOf); empty when the leaf is not a turn.
  bool asks = false;        // A turn that ends with a question.
  size_t words = 0;         // A turn's words after its label (TurnWords).
  bool holds_answer = false;  // A turn holding the kind of answer the query asks for (HoldsAnswer).
};

// The nodes one find reads, each once, in batches: one ContextStore::StatMany per batch of at most kBatch (on
// PostgreSQL one round trip, where one Stat per node cost up to 30 round trips per find).
class NodeReader {
 public:
  // `asked` and `query_words`: what the query asks for and its words (HoldsAnswer), read once per turn.
  NodeReader(ContextStore& store, AnswerKind asked, const std::set<std::string>& query_words)
      : store_(store), asked_(asked), query_words_(query_words) {}

  // Reads those of `uris` not read yet.
  Status Load(std::span<const Uri> uris) {
    constexpr size_t kBatch = 64;  // Bounds the nodes held at once (their content included).
    std::vector<Uri> wanted;
    std::set<std::string> asked;
    for (const Uri& uri : uris) {
      if (!facts_.contains(uri.str()) && asked.insert(uri.str()).second) wanted.push_back(uri);
    }
    for (size_t start = 0; start < wanted.size(); start += kBatch) {
      std::span<const Uri> batch = std::span<const Uri>(wanted).subspan(start, std::min(kBatch, wanted.size() - start));
      STRATA_ASSIGN_OR_RETURN(std::vector<std::optional<Node>> read, store_.StatMany(batch));
      if (read.size() != batch.size()) return Status::Internal("find: the store read a different number of nodes");
      for (size_t i = 0; i < batch.size(); ++i) {
        std::optional<NodeFacts>& facts = facts_[batch[i].str()];
        if (read[i]) facts = FactsOf(*read[i]);
      }
    }
    return Status::Ok();
  }
  // A node loaded before; nullptr when nothing is stored there (removed since it was found) or not loaded.
  const NodeFacts* Get(const std::string& uri) const {
    auto it = facts_.find(uri);
    return it == facts_.end() || !it->second ? nullptr : &*it->second;
  }

 private:
  NodeFacts FactsOf(const Node& node) const {
    NodeFacts f{.is_dir = node.is_dir, .abstract_text = node.abstract_text};
    if (node.is_dir) return f;
    f.content_key = HashHex(node.abstract_text + '\0' + node.content);
    // A turn is read from the content, or the abstract when there is none.
    const std::string& text = node.content.empty() ? node.abstract_text : node.content;
    f.speaker = std::string(SpeakerOf(text));
    if (!f.speaker.empty()) {
      f.asks = EndsWithQuestion(text);
      f.words = TurnWords(text);
      f.holds_answer = HoldsAnswer(text, asked_, query_words_);
    }
    return f;
  }

  ContextStore& store_;
  const AnswerKind asked_;
  const std::set<std::string>& query_words_;
  std::map<std::string, std::optional<NodeFacts>> facts_;
};

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
  if (e.lexical_rank >= 0) {
    reason = "lexical #" + std::to_string(e.lexical_rank + 1) + (e.lexical_detail.empty() ? "" : ": " + e.lexical_detail);
  }
  if (e.vector_rank >= 0 || e.lexical_rank < 0) {
    reason += std::string(reason.empty() ? "" : "; ") + "vector" +
              (e.vector_rank >= 0 ? " #" + std::to_string(e.vector_rank + 1) : "") + ": cosine " + Fixed(e.cosine);
  } else {
    reason += "; cosine " + Fixed(e.cosine);
  }
  return reason;
}

// Opens the best `beam` directories that matched by their own layers: their children join the candidates
// with their own cosine (the lexical list already holds every child that matched a word).
Status OpenDirectories(ContextStore& store, const Vector& qv, const FindOptions& options,
                       std::map<std::string, Candidate>& cands) {
  std::vector<std::pair<double, std::string>> dirs;
  for (const auto& [uri, c] : cands) {
    if (c.is_dir && c.score > 0) dirs.emplace_back(c.score, uri);
  }
  std::sort(dirs.begin(), dirs.end(), std::greater<>());
  if (dirs.size() > options.beam) dirs.resize(options.beam);
  const double w = options.fusion == Fusion::kRelativeScore ? options.vector_weight : 0.5;
  for (const auto& [dir_score, dir] : dirs) {
    STRATA_ASSIGN_OR_RETURN(Uri dir_uri, Uri::Parse(dir));
    // A large directory is not opened: scoring all its children would cost more than the whole search, and
    // those that resemble the query are in the global lists already.
    SearchFilter children{.under = options.under,
                          .type = options.type,
                          .category = options.category,
                          .parent = dir_uri,
                          .current_only = !options.include_superseded,
                          .roots = options.roots};
    // Counted with superseded memories (an upper bound: an index-only count, where reading each child's
    // metadata to leave them out cost more than the rest of a search).
    const auto most = static_cast<int64_t>(options.children_per_directory);
    SearchFilter all_children = children;
    all_children.current_only = false;
    STRATA_ASSIGN_OR_RETURN(int64_t count, store.Count(all_children, most + 1));
    if (count > most) continue;
    STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> found,
                            store.VectorNeighbours(qv, children, options.children_per_directory));
    for (const ScoredUri& child : found) {
      auto [it, inserted] = cands.try_emplace(child.uri.str());
      if (!inserted) continue;
      Candidate& c = it->second;
      c.is_dir = child.is_dir;
      c.score = w * std::max(0.0, child.score);
      c.reason = "cosine " + Fixed(child.score) + "; child of " + dir;
    }
  }
  return Status::Ok();
}


// Step 2: the best leaves lend part of their base score to the leaves written beside them.
Status LendToNeighbours(ContextStore& store, NodeReader& reader, const FindOptions& options,
                        std::map<std::string, Candidate>& cands) {
  if (options.neighbour_weight <= 0 || options.neighbour_span <= 0 || options.context_candidates == 0) {
    return Status::Ok();
  }
  std::vector<std::pair<double, std::string>> best;
  for (const auto& [uri, c] : cands) {
    if (!c.is_dir && c.score > 0) best.emplace_back(c.score, uri);
  }
  std::sort(best.begin(), best.end(), std::greater<>());
  if (best.size() > options.context_candidates) best.resize(options.context_candidates);
  std::vector<Uri> leaves;
  for (const auto& [score, uri] : best) {
    STRATA_ASSIGN_OR_RETURN(Uri u, Uri::Parse(uri));
    leaves.push_back(std::move(u));
  }
  SearchFilter filter{.under = options.under,
                      .type = options.type,
                      .category = options.category,
                      .leaves_only = true,
                      .current_only = !options.include_superseded,
                      .roots = options.roots};
  STRATA_ASSIGN_OR_RETURN(auto neighbours, store.Neighbours(leaves, options.neighbour_span, filter));
  // What the leaves around the best lenders are: a transcript turn (step 5's SpeakerOf) or not, and a turn
  // that ends with a question or not. Only the best kQuestionLenders lenders that have neighbours are read, and
  // their neighbours only when the lender is a turn: two batches of reads, and a document's chunks cost at most
  // kQuestionLenders nodes.
  constexpr size_t kQuestionLenders = 10;
  auto is_turn = [&](const Uri& uri) {
    const NodeFacts* node = reader.Get(uri.str());
    return node != nullptr && !node->speaker.empty();
  };
  auto asks = [&](const Uri& uri) {
    const NodeFacts* node = reader.Get(uri.str());
    return node != nullptr && node->asks;
  };
  std::vector<bool> lender_read(leaves.size(), false);  // Whether the lender (and, for a turn, its neighbours) was read.
  if (options.step_over_questions) {
    std::vector<Uri> lenders;
    for (size_t i = 0; i < leaves.size() && lenders.size() < kQuestionLenders; ++i) {
      if (neighbours[i].empty()) continue;
      lender_read[i] = true;
      lenders.push_back(leaves[i]);
    }
    STRATA_RETURN_IF_ERROR(reader.Load(lenders));
    std::vector<Uri> between;  // Only a turn's neighbours; only those that can lie between it and another.
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!lender_read[i] || !is_turn(leaves[i])) continue;
      for (const Neighbour& n : neighbours[i]) {
        if (std::abs(n.offset) < options.neighbour_span) between.push_back(n.uri);
      }
    }
    STRATA_RETURN_IF_ERROR(reader.Load(between));
  }
  // The best loan each leaf receives, and from whom. A loan moves a leaf part of the way from its own score
  // toward its lender's, never past it: context around a strong hit must not bury it (where every leaf
  // matches a little, adding the loan to a neighbour's own evidence would).
  std::map<std::string, std::pair<double, size_t>> loans;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (neighbours[i].empty()) continue;
    const double lender = best[i].first;
    const bool lender_asks = lender_read[i] && asks(leaves[i]);
    std::map<int, bool> asks_at;  // By offset.
    if (lender_read[i] && is_turn(leaves[i])) {
      for (const Neighbour& n : neighbours[i]) {
        if (std::abs(n.offset) < options.neighbour_span) asks_at[n.offset] = asks(n.uri);
      }
    }
    for (const Neighbour& n : neighbours[i]) {
      auto own = cands.find(n.uri.str());
      double base = own == cands.end() ? 0 : own->second.score;
      // Steps toward the neighbour, not counting the turns between that end with a question.
      int steps = std::abs(n.offset);
      for (int k = 1; k < std::abs(n.offset); ++k) {
        auto between = asks_at.find(n.offset > 0 ? k : -k);
        if (between != asks_at.end() && between->second) --steps;
      }
      double share = options.neighbour_weight * std::ldexp(1.0, 1 - steps);
      // The reply to a question: the leaves after it up to the first that is not a question itself (requiring
      // the reply not to be a question measured 0.002 lower at @5).
      if (lender_asks && n.offset > 0 && steps == 1) share = options.reply_weight;
      share = std::min(1.0, share);  // Never past the lender.
      double loan = share * (lender - base);
      if (loan <= 0) continue;
      auto [it, inserted] = loans.try_emplace(n.uri.str(), loan, i);
      if (!inserted && loan > it->second.first) it->second = {loan, i};
    }
  }
  for (const auto& [uri, loan] : loans) {
    Candidate& c = cands[uri];
    if (c.reason.empty()) c.reason = "no match of its own";
    c.score += loan.first;
    AddReason(c, "beside " + best[loan.second].second + " +" + Fixed(loan.first));
  }
  return Status::Ok();
}

// Step 3: a directory's evidence is the best of its own score and its three best children's mean; candidates
// gain directory_weight of the best score, in proportion to their directory's evidence.
void AddDirectoryEvidence(const FindOptions& options, const std::map<std::string, double>& base,
                          std::map<std::string, Candidate>& cands) {
  if (options.directory_weight <= 0) return;
  // Every parent of a candidate, with the positive base scores of its candidate children.
  std::map<std::string, std::vector<double>> children;
  std::map<std::string, std::string> parent_of;
  double top = 0;
  for (const auto& [uri, c] : cands) {
    top = std::max(top, c.score);
    // The parent is the URI up to its last slash (a scope root such as strata://resources has none).
    size_t slash = uri.rfind('/');
    if (slash == std::string::npos || slash < Uri::kPrefix.size()) continue;
    std::string parent = uri.substr(0, slash);
    parent_of[uri] = parent;
    std::vector<double>& scores = children[parent];
    auto b = base.find(uri);
    if (b != base.end() && b->second > 0) scores.push_back(b->second);
  }
  std::map<std::string, double> evidence;
  double best = 0;
  for (auto& [dir, scores] : children) {
    std::sort(scores.begin(), scores.end(), std::greater<>());
    double sum = 0;
    for (size_t i = 0; i < scores.size() && i < 3; ++i) sum += scores[i];
    double own = 0;
    if (auto b = base.find(dir); b != base.end()) own = b->second;
    evidence[dir] = std::max(own, sum / 3);
    best = std::max(best, evidence[dir]);
  }
  if (best <= 0 || top <= 0) return;
  for (auto& [uri, c] : cands) {
    auto p = parent_of.find(uri);
    if (p == parent_of.end()) continue;
    auto e = evidence.find(p->second);
    if (e == evidence.end() || e->second <= 0) continue;
    double gain = options.directory_weight * top * e->second / best;
    c.score += gain;
    AddReason(c, "in " + p->second + " +" + Fixed(gain));
  }
}

Result<std::map<std::string, Candidate>> FindOne(ContextStore& store, NodeReader& reader, const std::string& query,
                                                 const FindOptions& options) {
  std::vector<std::string> texts = {query};
  STRATA_ASSIGN_OR_RETURN(std::vector<Vector> embedded, store.EmbedTexts(texts));
  const Vector& qv = embedded[0];
  SearchFilter filter{.under = options.under,
                      .type = options.type,
                      .category = options.category,
                      .current_only = !options.include_superseded,
                      .roots = options.roots};
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
  STRATA_RETURN_IF_ERROR(OpenDirectories(store, qv, options, cands));
  std::map<std::string, double> base;
  for (const auto& [uri, c] : cands) base[uri] = c.score;
  STRATA_RETURN_IF_ERROR(LendToNeighbours(store, reader, options, cands));
  AddDirectoryEvidence(options, base, cands);
  return cands;
}

// The words of some texts (letters and digits; bytes outside ASCII are letters), ASCII lower-cased.
std::set<std::string> LowerWords(std::span<const std::string> texts) {
  std::set<std::string> words;
  for (const std::string& text : texts) {
    for (std::string& w : LowerWordList(text)) words.insert(std::move(w));
  }
  return words;
}

// Whether the query names the speaker: a word of the label of three or more bytes, not a stop word, is a query
// word.
bool NamesSpeaker(const std::set<std::string>& query_words, std::string_view speaker) {
  const std::string label[] = {std::string(speaker)};
  std::set<std::string> words = LowerWords(label);
  return std::any_of(words.begin(), words.end(), [&](const std::string& w) {
    return w.size() >= 3 && !IsStopWord(w) && query_words.contains(w);
  });
}


// How deep step 5 reads, per hit asked for. On LoCoMo, 2 gave recall@10 0.774, 4 gave 0.778, 6 and 10 gave
// 0.779: a long turn or its speaker's turn 20 to 60 places down can still pass the tenth (docs/PERFORMANCE.md).
constexpr size_t kMostReadPerHit = 6;

// Step 5: reads the best nodes, best first, de-duplicating leaves and scoring transcript turns, until none left
// could reach the first `limit` (a final score is at most (1 + speaker_weight) * (1 + long_turn_weight) *
// (1 + answer_kind_weight) times the score so far), and at most kMostReadPerHit * limit of them (where scores are close, the bound alone reads
// far more, for no recall). When none of the first `limit` is a transcript
// turn, no more are read: a store without transcripts pays nothing for this step. Returns the first `limit`,
// best first.
Result<std::vector<Hit>> ReadBest(NodeReader& reader, const std::vector<std::pair<double, std::string>>& ranked,
                                  const std::map<std::string, Candidate>& merged, const std::set<std::string>& query_words,
                                  AnswerKind asked, const FindOptions& options) {
  const double most_gain = (1 + std::max(0.0, options.speaker_weight)) * (1 + std::max(0.0, options.long_turn_weight)) *
                           (1 + (asked == AnswerKind::kNone ? 0.0 : options.answer_kind_weight));
  std::vector<Hit> hits;
  std::vector<double> best_scores;  // A min-heap of the best `limit` final scores.
  std::set<std::string> seen_content;
  bool turns = false;  // Whether a leaf read so far is a transcript turn (else the first `limit` are the hits).
  size_t loaded = 0;  // ranked[0, loaded) are loaded, parsed in `uris` (ranked[0, i) are looked at).
  std::vector<Uri> uris;
  if (options.limit == 0) return hits;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const auto& [score, uri_text] = ranked[i];
    const bool full = best_scores.size() >= options.limit;
    if (full && (!turns || score * most_gain < best_scores.front() || i >= kMostReadPerHit * options.limit)) break;
    if (i == loaded) {
      // The next batch: as many as the best still lack (at first `limit`: a store without transcripts reads
      // those and no more), or once the best are full only those that could still pass them.
      size_t end = std::min(ranked.size(), i + (options.limit - std::min(options.limit, best_scores.size())));
      if (full) {
        end = std::min(ranked.size(), kMostReadPerHit * options.limit);
        while (end > i + 1 && ranked[end - 1].first * most_gain < best_scores.front()) --end;
      }
      end = std::max(end, i + 1);
      for (size_t k = i; k < end; ++k) {
        STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(ranked[k].second));
        uris.push_back(std::move(uri));
      }
      STRATA_RETURN_IF_ERROR(reader.Load(std::span<const Uri>(uris).subspan(i)));
      loaded = end;
    }
    const NodeFacts* node = reader.Get(uri_text);
    if (node == nullptr) continue;  // Removed since it was found.
    const Candidate& c = merged.at(uri_text);
    std::string reason = c.reason;
    double final_score = score;
    if (!node->is_dir) {
      // The same memory stored in two scopes (or found by two queries under two names) is one hit.
      if (!seen_content.insert(node->content_key).second) continue;
      const std::string& speaker = node->speaker;
      turns = turns || !speaker.empty();
      if (options.speaker_weight > 0 && !speaker.empty() && NamesSpeaker(query_words, speaker)) {
        final_score *= 1 + options.speaker_weight;
        reason += "; spoken by " + speaker + ", whom the query names";
      }
      if (options.long_turn_weight > 0 && options.long_turn_words > 0 && !speaker.empty()) {
        // 0 at long_turn_words words or fewer, all of long_turn_weight at twice as many or more.
        double longer = static_cast<double>(node->words) / static_cast<double>(options.long_turn_words) - 1;
        double gain = options.long_turn_weight * std::clamp(longer, 0.0, 1.0);
        if (gain > 0) {
          final_score *= 1 + gain;
          reason += "; a long turn +" + Fixed(gain);
        }
      }
      if (options.answer_kind_weight > 0 && !speaker.empty() && asked != AnswerKind::kNone) {
        if (node->holds_answer) {
          final_score *= 1 + options.answer_kind_weight;
          reason += asked == AnswerKind::kNumber ? "; holds a number, as the query asks" : "; holds a name, as the query asks";
        }
      }
      if (options.question_penalty > 0 && !speaker.empty() && node->asks) {
        final_score *= 1 - std::min(1.0, options.question_penalty);
        reason += "; ends with a question";
      }
    }
    Level level = node->is_dir ? Level::kOverview : c.level >= 0 ? static_cast<Level>(c.level) : Level::kOverview;
    hits.push_back({uris[i], node->is_dir, level, final_score, node->abstract_text, std::move(reason)});
    best_scores.push_back(final_score);
    std::push_heap(best_scores.begin(), best_scores.end(), std::greater<>());
    if (best_scores.size() > options.limit) {
      std::pop_heap(best_scores.begin(), best_scores.end(), std::greater<>());
      best_scores.pop_back();
    }
  }
  std::stable_sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) { return a.score > b.score; });
  if (hits.size() > options.limit) hits.resize(options.limit);
  return hits;
}

}  // namespace

Result<std::vector<Hit>> Find(ContextStore& store, std::span<const std::string> queries, const FindOptions& options) {
  if (queries.empty()) return Status::InvalidArgument("find: no query");
  if (options.roots.size() > SearchFilter::kMaxRoots) {
    return Status::InvalidArgument("find: at most " + std::to_string(SearchFilter::kMaxRoots) + " roots");
  }
  if (!options.under.is_root()) {
    // A scope comes into being with its first write: an empty one is an empty answer. Below a scope root, a
    // path that does not exist is an error (a misspelt directory must not look like "nothing found").
    Result<Node> under = store.Stat(options.under);
    if (!under.ok() && under.status().code() == StatusCode::kNotFound) {
      if (options.under.is_scope_root() || options.under.is_kind_dir()) return std::vector<Hit>{};
      return Status::NotFound("find: nothing is stored at " + options.under.str() + " (the directory to search under)");
    }
    if (!under.ok()) return under.status();
  }
  // What the question asks for is read from the first query (the question, with the session's newest request
  // when a short follow-up is searched with it); every query's words are the query's own.
  const std::set<std::string> query_words = LowerWords(queries);
  const AnswerKind asked =
      queries.empty() || options.answer_kind_weight <= 0 ? AnswerKind::kNone : AnswerKindOf(queries.front());
  NodeReader reader(store, asked, query_words);
  std::map<std::string, Candidate> merged;
  for (const std::string& query : queries) {
    if (query.find_first_not_of(" \t\r\n") == std::string::npos) return Status::InvalidArgument("find: empty query");
    STRATA_ASSIGN_OR_RETURN(auto cands, FindOne(store, reader, query, options));
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
  return ReadBest(reader, ranked, merged, query_words, asked, options);
}

Result<std::vector<Hit>> Find(ContextStore& store, const std::string& query, const FindOptions& options) {
  std::vector<std::string> queries = {query};
  return Find(store, queries, options);
}

}  // namespace strata::memory
