// Transcript turns in stored text, as memory::Find reads them (docs/memory.md, "Finding things"): who speaks
// a turn, and whether it hands the word on with a question. Both read untrusted text and never fail.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

// What kind of answer a question asks for, read from its (English) words: a name or a place ("who", "whose",
// "where", "which city", "what books", "which author": what or which, at most one word, then a noun for a
// named thing), a number ("how many", "how much", "how long", "how old"), or nothing in particular.
enum class AnswerKind { kNone, kName, kNumber };
AnswerKind AnswerKindOf(std::string_view question);

// What a turn holds that could answer such a question, read once per turn (after its speaker's label):
// its names — capitalised words of two or more letters that do not open a sentence, lower-cased, other than
// the words of the speaker's label — and whether it holds a number (digits or a number word).
struct AnswerCues {
  std::vector<std::string> names;
  bool number = false;
};
AnswerCues AnswerCuesOf(std::string_view text);

}  // namespace strata::memory
