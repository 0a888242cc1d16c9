// Transcript turns in stored text, as memory::Find reads them (docs/memory.md, "Finding things"): who speaks
// a turn, and whether it hands the word on with a question. Both read untrusted text and never fail.
#pragma once

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

}  // namespace strata::memory
