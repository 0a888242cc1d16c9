// The synthetic store corpus of the store benchmarks (memory_bench.cc, scale_bench.cc): N leaves in 100
// topic directories (each directory's abstract names its topic's 8 words). A leaf holds 3 of its topic's
// words and 30 filler words from a 5000-word vocabulary; every 50th leaf is a labelled fact that also holds
// two key words made of random syllables, unique to it.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "strata/memory/uri.h"

namespace strata::bench {

struct StoreFact {
  std::string uri, key1, key2;
  int topic;
};

struct StoreCorpus {
  static constexpr int kTopics = 100;
  std::vector<std::pair<memory::Uri, std::string>> leaves;
  std::vector<StoreFact> facts;

  // The k-th (0-7) word of topic t.
  static std::string TopicWord(int t, int k) {
    static const char* kSyll[] = {"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po"};
    return std::string(kSyll[t % 10]) + kSyll[(t / 10) % 10] + kSyll[k % 10] + "ium";
  }
  static std::string TopicUri(int t) { return "strata://resources/topic" + std::to_string(t); }
  static std::string TopicAbstract(int t) {
    std::string words;
    for (int k = 0; k < 8; ++k) words += TopicWord(t, k) + " ";
    return "Topic " + std::to_string(t) + ": " + words;
  }
  // The query that asks for a fact with both its key words as written and a topic word.
  static std::string ExactQuery(const StoreFact& f) { return f.key1 + " " + f.key2 + " " + TopicWord(f.topic, 2); }

  // Generates leaves [first, first + n) of the corpus of seed `rng` (call with first = 0, 1000, ... in
  // order on one generator to stream a large corpus).
  static StoreCorpus Make(std::mt19937& rng, int first, int n) {
    static const char* kKeySyll[] = {"bra", "cle", "dro", "fen", "gla", "hus", "jor", "kev", "lum", "mar",
                                     "nox", "pel", "quo", "rid", "sto", "tav", "urk", "vel", "wix", "yor"};
    auto key_word = [&] {
      std::string w;
      for (int k = 0; k < 3; ++k) w += kKeySyll[rng() % 20];
      return w;
    };
    StoreCorpus out;
    for (int i = first; i < first + n; ++i) {
      int t = static_cast<int>(rng() % kTopics);
      std::string text;
      for (int k = 0; k < 3; ++k) text += TopicWord(t, static_cast<int>(rng() % 8)) + " ";
      for (int k = 0; k < 30; ++k) text += "w" + std::to_string(rng() % 5000u) + " ";
      std::string uri = TopicUri(t) + "/n" + std::to_string(i);
      if (i % 50 == 0) {
        StoreFact f{uri, key_word(), key_word(), t};
        text += f.key1 + " " + f.key2;
        out.facts.push_back(std::move(f));
      }
      out.leaves.emplace_back(*memory::Uri::Parse(uri), text);
    }
    return out;
  }
};

}  // namespace strata::bench
