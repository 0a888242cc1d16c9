// Text preparation shared by the full-text index and the local embedder.
//
// FTS5's unicode61 tokenizer splits on spaces and punctuation, so text in scripts written without spaces
// (Chinese, Japanese, Korean) would become one token per sentence. FtsText() puts spaces around each such
// character before indexing; queries search CJK runs as bigram phrases.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "strata/json/json_writer.h"

namespace strata::memory {

// Decodes one UTF-8 code point at s[*i] (advancing *i); invalid bytes decode as U+FFFD.
inline char32_t NextCodePoint(std::string_view s, size_t* i) {
  auto c = static_cast<unsigned char>(s[*i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + static_cast<size_t>(len) > s.size()) {
    ++*i;
    return 0xfffd;
  }
  char32_t cp = len == 1 ? c : c & (0x7f >> len);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[*i + k]) & 0x3f);
  *i += static_cast<size_t>(len);
  return cp;
}

// Ideographs, kana and hangul: scripts written without spaces.
inline bool IsCjk(char32_t cp) {
  return (cp >= 0x3040 && cp <= 0x30ff) || (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x4e00 && cp <= 0x9fff) ||
         (cp >= 0xac00 && cp <= 0xd7af) || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x20000 && cp <= 0x2ffff);
}

// Letters and digits (ASCII alphanumerics, and any other code point outside the punctuation blocks).
inline bool IsWordChar(char32_t cp) {
  if (cp < 0x80) return std::isalnum(static_cast<int>(cp)) != 0;
  if ((cp >= 0x80 && cp <= 0xbf) || cp == 0xd7 || cp == 0xf7 || (cp >= 0x2000 && cp <= 0x2bff) ||
      (cp >= 0x3000 && cp <= 0x303f) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff0f) ||
      (cp >= 0xff1a && cp <= 0xff20) || (cp >= 0xff3b && cp <= 0xff40) || (cp >= 0xff5b && cp <= 0xff65)) {
    return false;
  }
  return cp != 0xfffd;
}

using json::AppendUtf8;

// Returns `text` with a space on each side of every CJK character (the indexed form of a column).
inline std::string FtsText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    char32_t cp = NextCodePoint(text, &i);
    if (IsCjk(cp)) {
      out += ' ';
      out.append(text.substr(start, i - start));
      out += ' ';
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

// Splits a query into search terms: words, and bigrams ("x y", searched as phrases) of CJK runs. Lower-cased
// (ASCII), de-duplicated, at most 32.
inline std::vector<std::string> FtsTerms(std::string_view query) {
  std::vector<std::string> terms;
  std::string word;
  std::vector<std::string> cjk_run;
  auto add = [&](std::string term) {
    for (char& c : term) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!term.empty() && terms.size() < 32 && std::find(terms.begin(), terms.end(), term) == terms.end()) {
      terms.push_back(std::move(term));
    }
  };
  auto flush_word = [&] {
    add(word);
    word.clear();
  };
  auto flush_cjk = [&] {
    if (cjk_run.size() == 1) add(cjk_run[0]);
    for (size_t k = 0; k + 1 < cjk_run.size(); ++k) add(cjk_run[k] + " " + cjk_run[k + 1]);
    cjk_run.clear();
  };
  for (size_t i = 0; i < query.size();) {
    size_t start = i;
    char32_t cp = NextCodePoint(query, &i);
    if (IsCjk(cp)) {
      flush_word();
      cjk_run.emplace_back(query.substr(start, i - start));
    } else {
      flush_cjk();
      if (IsWordChar(cp)) {
        word.append(query.substr(start, i - start));
      } else {
        flush_word();
      }
    }
  }
  flush_word();
  flush_cjk();
  return terms;
}

// English function words: PostgreSQL's `english` stop list (the Snowball one) and the pieces of contractions
// ("didn't" is "didn" and "t"), sorted. Questions are made of them ("what did", "where has"): searched for,
// they decide the top ranks instead of the words that carry the question.
inline bool IsStopWord(std::string_view word) {
  static constexpr std::string_view kWords[] = {
      "a",        "about",   "above",   "after",   "again",      "against", "all",     "am",     "an",
      "and",      "any",     "are",     "aren",    "as",         "at",      "be",      "because", "been",
      "before",   "being",   "below",   "between", "both",       "but",     "by",      "can",    "could",
      "couldn",   "d",       "did",     "didn",    "do",         "does",    "doesn",   "doing",  "don",
      "down",     "during",  "each",    "few",     "for",        "from",    "further", "had",    "hadn",
      "has",      "hasn",    "have",    "haven",   "having",     "he",      "her",     "here",   "hers",
      "herself",  "him",     "himself", "his",     "how",        "i",       "if",      "in",     "into",
      "is",       "isn",     "it",      "its",     "itself",     "just",    "ll",      "m",      "me",
      "might",    "more",    "most",    "must",    "my",         "myself",  "no",      "nor",    "not",
      "now",      "of",      "off",     "on",      "once",       "only",    "or",      "other",  "ought",
      "our",      "ours",    "ourselves", "out",   "over",       "own",     "re",      "s",      "same",
      "shall",    "she",     "should",  "shouldn", "so",         "some",    "such",    "t",      "than",
      "that",     "the",     "their",   "theirs",  "them",       "themselves", "then", "there",  "these",
      "they",     "this",    "those",   "through", "to",         "too",     "under",   "until",  "up",
      "ve",       "very",    "was",     "wasn",    "we",         "were",    "weren",   "what",   "when",
      "where",    "which",   "while",   "who",     "whom",       "why",     "will",    "with",   "won",
      "would",    "wouldn",  "you",     "your",    "yours",      "yourself", "yourselves"};
  return std::binary_search(std::begin(kWords), std::end(kWords), word);
}

// The terms a query is searched by: FtsTerms without stop words, unless nothing else is left (a query of
// function words alone still finds what holds them).
inline std::vector<std::string> QueryTerms(std::string_view query) {
  std::vector<std::string> terms = FtsTerms(query);
  std::vector<std::string> kept;
  for (const std::string& t : terms) {
    if (!IsStopWord(t)) kept.push_back(t);
  }
  return kept.empty() ? terms : kept;
}

// True if the lower-cased indexed text `fts_text` contains `term` as a word; an approximation of the
// tokenizer's match used to explain hits.
inline bool FtsContainsTerm(std::string_view fts_text, std::string_view term) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); };
  for (size_t pos = fts_text.find(term); pos != std::string::npos; pos = fts_text.find(term, pos + 1)) {
    bool left = pos == 0 || !alnum(fts_text[pos - 1]);
    size_t end = pos + term.size();
    bool right = end >= fts_text.size() || !alnum(fts_text[end]);
    if (left && right) return true;
  }
  return false;
}

}  // namespace strata::memory
