// Transcript turns in stored text, as memory::Find reads them (docs/memory.md, "Finding things"): who speaks
// a turn, and whether it hands the word on with a question. Both read untrusted text and never fail.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace strata::memory {

// A transcript turn's speaker: the text opens with a label of one to four capitalised words (or words that
// begin with a letter outside ASCII), with an optional parenthesised note (a time), and a colon: "Melanie: ...",
// "Dr. Lee (2:01 pm on 8 May): ...". Empty when the text does not open so ("The plan: ...", "https://...").
std::string_view SpeakerOf(std::string_view text);

// Whether a text ends with a question: less a trailing bracketed note ("[shares a photo: ...]", brackets
// inside it included), spaces and closing quotes or parentheses, its last character is '?' or U+FF1F. Such a
// turn hands the word to the next with a question, whatever it said before.
bool EndsWithQuestion(std::string_view text);

// The words of a turn after its speaker's label: runs of letters and digits, each character of a script
// written without spaces (Chinese, Japanese, Korean) one word. A note such as "[shares a photo: a vase]"
// counts: it says what was shown. A long turn tells more: it says what happened and why, where a short one
// reacts ("Take care, Maria!").
size_t TurnWords(std::string_view text);

// What kind of answer a question asks for, read from its (English) words: a name or a place (a question word
// "who", "whose" or "where" anywhere in it, or "what"/"which" followed within two words by a noun for a named
// thing: "which city", "what books", "which author"), a number ("how many", "how much", "how long", "how
// old"), or nothing in particular.
enum class AnswerKind { kNone, kName, kNumber };
AnswerKind AnswerKindOf(std::string_view question);

// Whether a turn holds what a question of `kind` asks for, in its text after the speaker's label. kName: a name,
// a word (letters, digits and bytes outside ASCII, as find splits a query) of two or more characters that opens
// with an ASCII capital, does not open a sentence, and is neither a word of the speaker's label nor one of
// `query_words` (lower-cased in ASCII). kNumber: digits or a number word ("three", "twenty", "several"). kNone
// holds nothing. Stops at the first it finds; linear in the text.
bool HoldsAnswer(std::string_view text, AnswerKind kind, const std::set<std::string>& query_words);

}  // namespace strata::memory
