// Retrieval over a context store: hybrid lexical + vector evidence, then the context of each hit.
//
//   1. Evidence. For each query, full-text (BM25; stop words are not searched for) and vector (cosine) candidate
//      lists over the whole subtree, fused into one base score in [0, 1] (FindOptions::fusion):
//        relative score (default): (1 - w) * bm25 / top_bm25 + w * cosine, where every candidate's cosine is
//          computed exactly even when the vector list did not reach it. It keeps the margins that rank fusion
//          throws away: a node matching two rare query words far outscores nodes matching one common word.
//        reciprocal rank: sum over lists of 1 / (rrf_k + rank), normalised so 1.0 means "first in both lists".
//      Directories are candidates like any node; the best `beam` of those matched by their own layers (L0/L1)
//      are opened, and their children join with their own cosine (w * cosine): a note that shares no word with
//      the query can still be found through the directory that does. A directory of more than
//      children_per_directory children is not opened (its children compete in the global lists).
//   2. Neighbours. The answer to a question often sits next to the words of the question: in the reply to it,
//      or one turn further. Each of the best `context_candidates` leaves moves the leaves written just before
//      and after it in its directory (ContextStore::Neighbours) part of the way from their own score toward its
//      own: by neighbour_weight of the difference, halved per further step, up to neighbour_span. A leaf keeps
//      the best such move; none passes its lender, and a neighbour's own evidence is not added to the loan
//      (where every leaf matches a little, that would let the neighbours of a strong hit bury another).
//      A question and its reply are one exchange (step_over_questions): a transcript turn (step 5) that ends
//      with a question and lies between the lender and a neighbour is not counted as a step, and after a lender
//      that ends with a question the leaves up to the first that is not one, its reply, move reply_weight of
//      the way (at most all of it). The best 10 lenders with neighbours are read for this, their neighbours
//      only when the lender is a turn.
//   3. Directories. A leaf in a directory whose contents match the query is more likely to be the answer: each
//      directory's evidence is the best of its own base score and the mean of its three best children's, and a
//      candidate gains directory_weight * (best score so far) * (its directory's evidence / the best
//      directory's). Only candidates gain: a directory's evidence never brings in a leaf without any.
//   4. Results from all queries are merged: one hit per URI (best score, reasons joined), and leaves with
//      identical content keep only the best-scored copy.
//   5. Turns. A leaf that reads as a transcript turn opens with its speaker's label ("Melanie: ...",
//      "Melanie (8 May, 2023): ...", src/memory/turns.h): its "I" and "my" are that person. When the query names
//      the speaker, the turn is about them, and its score gains speaker_weight of itself. A turn that ends
//      with a question seldom holds the answer, and loses question_penalty of its score. A long turn tells
//      more than a short reaction: one of more than long_turn_words words (after its label) gains up to
//      long_turn_weight of its score, all of it at twice as many. A question that asks for a name or a place
//      ("who", "where", "which city", "what books") or a number ("how many") is answered by a turn that holds
//      one — a capitalised word not opening a sentence, other than the speaker's and the query's own words,
//      or a number — and such a turn gains answer_kind_weight of its score (turns.h: AnswerKindOf of the first
//      query, HoldsAnswer). The best
//      nodes are read for this: past `limit` only when one read is a turn, only those that could still reach
//      the first `limit`, at most 6 * limit reads.
// The weights were chosen on LoCoMo's development conversations and the synthetic set (docs/PERFORMANCE.md,
// "Retrieval"); each step's reason is in Hit::reason.
//
// A missing `under` below a scope root is kNotFound naming it (a misspelt directory is an error, not an empty
// answer); a scope root that has nothing yet is an empty answer (scopes come into being with their first write).
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
  // When not empty: only below one of these as well (SearchFilter::roots), ranked together.
  std::vector<Uri> roots;
  size_t limit = 10;
  std::optional<ContextType> type;
  std::optional<std::string> category;
  bool include_superseded = false;   // Also return memories superseded by newer ones (metadata "valid_to").
  bool include_directories = false;  // Return directories as hits too (they are always used as evidence).
  size_t lexical_candidates = 150;   // Length of the global full-text list.
  size_t vector_candidates = 50;     // Length of the global vector list.
  Fusion fusion = Fusion::kRelativeScore;
  double vector_weight = 0.5;  // w in relative-score fusion.
  double rrf_k = 60;           // Reciprocal-rank fusion constant.
  size_t beam = 4;                      // Directories matched by their own layers that are opened.
  size_t children_per_directory = 200;  // A directory with more children is not opened.
  double neighbour_weight = 0.5;        // How far a leaf beside a better one moves toward its score.
  int neighbour_span = 2;               // Leaves on each side (the move halves per further step).
  bool step_over_questions = true;      // Questions are not steps; a question's reply moves further.
  double reply_weight = 0.7;            // How far the reply to a lender that ends with a question moves.
  size_t context_candidates = 30;       // The best leaves whose neighbours are looked up.
  double directory_weight = 0.4;        // Share of the best score a directory's evidence adds to its children.
  double speaker_weight = 0.2;          // Step 5: gain of a turn whose speaker the query names.
  double question_penalty = 0.15;       // Step 5: loss of a leaf that ends with a question.
  double long_turn_weight = 0.2;        // Step 5: the most a long turn gains (at 2 * long_turn_words words).
  size_t long_turn_words = 20;          // Step 5: a turn of this many words or fewer gains nothing.
  double answer_kind_weight = 0.3;      // Step 5: gain of a turn holding the kind of answer the query asks for.
};

struct Hit {
  Uri uri = Uri::Root();
  bool is_dir = false;
  Level level = Level::kOverview;  // The layer the match came from (what to load first).
  double score = 0;
  std::string abstract_text;       // L0, for display.
  std::string reason;              // e.g. "lexical #2: cache (abstract); cosine 0.612; beside .../turn-4 +0.21".
  int64_t tokens = 0;              // The abstract's tokens, as Engine::Find counts them (0: not counted).
};

// Finds the best `limit` hits for any of `queries` below `options.under`, best first.
Result<std::vector<Hit>> Find(ContextStore& store, std::span<const std::string> queries, const FindOptions& options);
Result<std::vector<Hit>> Find(ContextStore& store, const std::string& query, const FindOptions& options);

}  // namespace strata::memory
