#include "strata/window/compaction.h"

#include <algorithm>
#include <cmath>

#include "strata/llm/generate.h"
#include "strata/window/assembler.h"

namespace strata::window {
namespace {

constexpr std::string_view kToolPlaceholderPrefix = "[tool output pruned: ";
constexpr std::string_view kThinkingPlaceholder = "[thinking pruned]";

constexpr std::string_view kSummarizerSystem =
    "You compress the history of a conversation between a user and an AI agent into a summary. The agent "
    "will continue the conversation from your summary alone, without the original messages, so the "
    "summary must carry everything it needs: the user's goals, requests and constraints; decisions made "
    "and why; facts learned (names, numbers, dates, file paths, identifiers, commands, error messages, "
    "results of tool calls); what was done, what is in progress and what comes next; and anything the "
    "user asked to remember. Be concise: drop greetings, filler and repetition, but never drop a fact. "
    "Write plain prose or short bullet points in the language of the conversation. Answer with the "
    "summary only.";

// The fixed text of the three kinds of summary request (the conversation or summaries go inside).
constexpr std::string_view kMapFrame = "Summarize this part of the conversation (part 1000 of 1000).";
constexpr std::string_view kUpdateFrame =
    "Here is the summary of the conversation so far:\n\n<summary>\n\n</summary>\n\nWrite the updated summary: "
    "the summary above plus what happened since, below.";
constexpr std::string_view kReduceFrame =
    "Merge these summaries of consecutive parts of one conversation, in order, into one summary. Keep every fact, "
    "decision and open task; remove repetition.";
constexpr int64_t kTagTokens = 16;  // <conversation>…</conversation>, <summary part="n">…</summary>, separators.

std::string Focus(const CompactionOptions& options) {
  if (options.instruction.empty()) return "";
  return "\n\nFocus: " + options.instruction;
}

bool IsCheckpointMarker(const Message& m) {
  if (m.role != Role::kUser || m.content.size() != 1) return false;
  const auto* t = std::get_if<TextPart>(&m.content[0]);
  return t != nullptr && t->text.starts_with("<system>CHECKPOINT ") && t->text.ends_with("</system>");
}

// A user turn starts at a user message that is neither a checkpoint marker nor a summary.
bool StartsTurn(const Message& m) { return m.role == Role::kUser && !IsCheckpointMarker(m) && !SummaryOf(m); }

// The message as the summarizer reads it.
std::string Render(const Message& m) {
  std::string out;
  switch (m.role) {
    case Role::kSystem: out = "[system]"; break;
    case Role::kUser: out = "[user]"; break;
    case Role::kAssistant: out = "[assistant]"; break;
    case Role::kTool: out = "[tool result" + (m.tool_call_id ? " " + *m.tool_call_id : std::string()) + "]"; break;
  }
  for (const ContentPart& part : m.content) {
    if (const auto* t = std::get_if<TextPart>(&part)) {
      out += " " + t->text;
    } else if (const auto* media = std::get_if<MediaPart>(&part)) {
      out += media->kind == MediaKind::kImage ? " [image]" : media->kind == MediaKind::kAudio ? " [audio]" : " [video]";
    }  // Thinking is the model's scratch work: not summarised.
  }
  if (m.tool_calls) {
    for (const ToolCall& call : *m.tool_calls) {
      out += "\n  -> calls " + call.function.name + "(" + call.function.arguments.value_or("") + ") [" + call.id + "]";
    }
  }
  return out;
}

int64_t CountText(const MessageTokenCounter& counter, const std::string& text) {
  Message m = Message::User(text);
  return counter.CountMessages({&m, 1});
}

// Shortens `text` by cutting its middle until it counts at most `budget` tokens.
std::string FitText(const MessageTokenCounter& counter, std::string text, int64_t budget) {
  int64_t tokens = CountText(counter, text);
  while (tokens > budget && text.size() > 64) {
    double keep = std::max(0.1, 0.9 * static_cast<double>(budget) / static_cast<double>(tokens));
    size_t keep_bytes = static_cast<size_t>(static_cast<double>(text.size()) * keep);
    size_t head = keep_bytes / 2;
    size_t tail = keep_bytes - head;
    // Cut at UTF-8 boundaries.
    while (head > 0 && (static_cast<unsigned char>(text[head]) & 0xC0) == 0x80) --head;
    size_t tail_start = text.size() - tail;
    while (tail_start < text.size() && (static_cast<unsigned char>(text[tail_start]) & 0xC0) == 0x80) ++tail_start;
    size_t omitted = tail_start - head;
    text = text.substr(0, head) + "\n[... " + std::to_string(omitted) + " bytes omitted ...]\n" + text.substr(tail_start);
    tokens = CountText(counter, text);
  }
  return text;
}

class Summarizer {
 public:
  Summarizer(llm::ChatProvider& provider, const CompactionOptions& options, const MessageTokenCounter& counter)
      : provider_(provider), options_(options), counter_(counter) {
    int64_t frame = 0;
    for (std::string_view f : {kMapFrame, kUpdateFrame, kReduceFrame}) {
      frame = std::max(frame, CountText(counter, std::string(f) + Focus(options)));
    }
    int64_t overhead = CountText(counter, std::string(kSummarizerSystem)) + frame + kTagTokens;
    budget_ = options.compaction_window - options.reserve_for_summary - overhead;
  }

  int64_t budget() const { return budget_; }
  int calls() const { return calls_; }

  // Cuts the rendered messages into chunks that each fit one request.
  std::vector<std::string> Chunk(std::vector<std::string> pieces) const {
    std::vector<std::string> chunks;
    std::string current;
    int64_t current_tokens = 0;
    // Each piece is counted as a message of its own plus one token: never less than its share of the
    // joined text, whatever the counter.
    auto cost = [&](const std::string& piece) { return CountText(counter_, piece + "\n\n") + 1; };
    for (std::string& piece : pieces) {
      int64_t tokens = cost(piece);
      if (tokens > budget_) {
        piece = FitText(counter_, std::move(piece), budget_ - 8);
        tokens = cost(piece);
      }
      if (!current.empty() && current_tokens + tokens > budget_) {
        chunks.push_back(std::move(current));
        current.clear();
        current_tokens = 0;
      }
      current += piece + "\n\n";
      current_tokens += tokens;
    }
    if (!current.empty()) chunks.push_back(std::move(current));
    return chunks;
  }

  Result<std::string> Call(std::string prompt) {
    Message user = Message::User(std::move(prompt));
    ++calls_;
    STRATA_ASSIGN_OR_RETURN(llm::GenerateResult r,
                            llm::Generate(provider_, kSummarizerSystem, {}, {&user, 1}, {}, options_.generate));
    std::string text = r.message.ExtractText();
    if (text.empty()) return Status::Unavailable("the summary model answered with no text");
    return text;
  }

  Result<std::string> SummarizeChunk(const std::string& chunk, size_t i, size_t n) {
    std::string where = n > 1 ? " (part " + std::to_string(i + 1) + " of " + std::to_string(n) + ")" : "";
    return Call("Summarize this part of the conversation" + where + "." + Focus(options_) +
                "\n\n<conversation>\n" + chunk + "</conversation>");
  }

  Result<std::string> Update(const std::string& previous, const std::string& chunk) {
    // kUpdateFrame, with the previous summary inside its <summary> element.
    std::string frame(kUpdateFrame);
    frame.insert(frame.find("\n</summary>"), previous);
    return Call(frame + Focus(options_) + "\n\n<conversation>\n" + chunk + "</conversation>");
  }

  // Merges consecutive partial summaries into one, in rounds while they do not fit one request.
  Result<std::string> Reduce(std::vector<std::string> parts) {
    for (int round = 0; parts.size() > 1; ++round) {
      std::vector<std::string> merged;
      size_t i = 0;
      while (i < parts.size()) {
        // Take as many parts as fit (at least two, shortened if they must be, so every round shrinks).
        std::vector<std::string> group;
        int64_t tokens = 0;
        while (i < parts.size()) {
          int64_t t = CountText(counter_, parts[i]) + kTagTokens;
          if (group.size() >= 2 && tokens + t > budget_) break;
          if (t > budget_ / 2) {
            parts[i] = FitText(counter_, std::move(parts[i]), budget_ / 2 - kTagTokens);
            t = CountText(counter_, parts[i]) + kTagTokens;
          }
          if (group.size() == 1 && tokens + t > budget_) {
            group[0] = FitText(counter_, std::move(group[0]), budget_ - t - kTagTokens);
            tokens = CountText(counter_, group[0]) + kTagTokens;
          }
          group.push_back(std::move(parts[i++]));
          tokens += t;
        }
        if (group.size() == 1) {
          merged.push_back(std::move(group[0]));
          continue;
        }
        std::string prompt = std::string(kReduceFrame) + Focus(options_) + "\n";
        for (size_t k = 0; k < group.size(); ++k) {
          prompt += "\n<summary part=\"" + std::to_string(k + 1) + "\">\n" + group[k] + "\n</summary>\n";
        }
        STRATA_ASSIGN_OR_RETURN(std::string m, Call(std::move(prompt)));
        merged.push_back(std::move(m));
      }
      parts = std::move(merged);
      if (round > 32) return Status::Internal("compaction: partial summaries do not converge");
    }
    return parts.empty() ? std::string() : std::move(parts[0]);
  }

 private:
  llm::ChatProvider& provider_;
  const CompactionOptions& options_;
  const MessageTokenCounter& counter_;
  int64_t budget_ = 0;
  int calls_ = 0;
};

// Returns where the kept tail starts: after the last `keep_recent_turns` user turns, at a unit boundary,
// and so that the tail counts at most `max_kept_fraction` of the window (but at least the newest unit).
size_t SplitPoint(std::span<const Message> history, size_t begin, const CompactionOptions& options,
                  const MessageTokenCounter& counter) {
  if (options.keep_recent_turns == 0) return history.size();
  HistoryIndex index(&counter);
  index.Sync(history);
  const std::vector<HistoryUnit>& units = index.units();
  int64_t cap = static_cast<int64_t>(options.max_kept_fraction * static_cast<double>(options.compaction_window));
  size_t split = history.size();
  size_t turns = 0;
  int64_t kept = 0;
  for (auto it = units.rbegin(); it != units.rend() && it->begin >= begin; ++it) {
    if (split != history.size() && kept + it->tokens > cap) return split;  // The tail is full: cut here.
    kept += it->tokens;
    split = it->begin;
    if (StartsTurn(history[it->begin]) && ++turns >= options.keep_recent_turns) return split;
  }
  return begin;  // Fewer turns than the ones to keep: nothing to compact.
}

int64_t Count(const MessageTokenCounter& counter, std::span<const Message> messages) {
  return counter.CountMessages(messages);
}

}  // namespace

std::optional<std::string> ShouldCompact(int64_t context_tokens, int64_t max_context_tokens,
                                         const CompactionTrigger& trigger) {
  if (max_context_tokens <= 0) return std::nullopt;
  auto threshold = static_cast<int64_t>(std::ceil(trigger.ratio * static_cast<double>(max_context_tokens)));
  if (trigger.ratio > 0 && context_tokens >= threshold) {
    return std::to_string(context_tokens) + " tokens >= " + std::to_string(std::lround(trigger.ratio * 100)) +
           "% of the " + std::to_string(max_context_tokens) + "-token window";
  }
  if (trigger.reserved_headroom > 0 && context_tokens + trigger.reserved_headroom >= max_context_tokens) {
    return std::to_string(context_tokens) + " tokens leave less than the reserved " +
           std::to_string(trigger.reserved_headroom) + " of the " + std::to_string(max_context_tokens) +
           "-token window";
  }
  return std::nullopt;
}

PruneStats Prune(std::vector<Message>* history, const PruneOptions& options) {
  PruneStats stats;
  size_t end = history->size() > options.keep_recent ? history->size() - options.keep_recent : 0;
  for (size_t i = 0; i < end; ++i) {
    Message& m = (*history)[i];
    if (options.tool_results && m.role == Role::kTool) {
      std::string text = m.ExtractText();
      int64_t chars = CountCodePoints(text);
      bool already = m.content.size() == 1 && text.starts_with(kToolPlaceholderPrefix);
      if (!already && chars > static_cast<int64_t>(options.min_tool_result_chars)) {
        m.content.clear();
        m.content.push_back(TextPart{std::string(kToolPlaceholderPrefix) + std::to_string(chars) + " characters]"});
        stats.tool_results++;
        stats.chars_removed += chars;
      }
    }
    if (options.thinking) {
      for (ContentPart& part : m.content) {
        auto* think = std::get_if<ThinkPart>(&part);
        if (think == nullptr || think->think == kThinkingPlaceholder) continue;
        stats.chars_removed += CountCodePoints(think->think);
        *think = ThinkPart{std::string(kThinkingPlaceholder), std::nullopt};
        stats.thinking++;
      }
    }
  }
  return stats;
}

Message MakeSummaryMessage(std::string summary) {
  Message m;
  m.role = Role::kUser;
  m.content.push_back(TextPart{std::string(kSummaryMarker)});
  m.content.push_back(TextPart{std::move(summary)});
  return m;
}

std::optional<std::string> SummaryOf(const Message& message) {
  if (message.role != Role::kUser || message.content.size() < 2) return std::nullopt;
  const auto* marker = std::get_if<TextPart>(&message.content[0]);
  if (marker == nullptr || marker->text != kSummaryMarker) return std::nullopt;
  std::string summary;
  for (size_t i = 1; i < message.content.size(); ++i) {
    if (const auto* t = std::get_if<TextPart>(&message.content[i])) summary += t->text;
  }
  return summary;
}

Result<CompactionResult> Compact(llm::ChatProvider& provider, std::span<const Message> history,
                                 const CompactionOptions& options) {
  const MessageTokenCounter& counter = options.counter ? *options.counter : *DefaultTokenEstimator();
  CompactionResult result;
  result.tokens_before = Count(counter, history);
  std::optional<std::string> previous = history.empty() ? std::nullopt : SummaryOf(history[0]);
  size_t begin = previous ? 1 : 0;
  size_t split = SplitPoint(history, begin, options, counter);
  if (split <= begin) {  // Nothing older than the turns to keep.
    result.messages.assign(history.begin(), history.end());
    result.kept = history.size();
    result.summary = previous.value_or("");
    result.tokens_after = result.tokens_before;
    return result;
  }

  Summarizer summarizer(provider, options, counter);
  if (summarizer.budget() < 256) {
    return Status::InvalidArgument("compaction_window (" + std::to_string(options.compaction_window) +
                                   ") leaves no room for a summary request after reserve_for_summary (" +
                                   std::to_string(options.reserve_for_summary) + ")");
  }
  std::vector<std::string> pieces;
  for (size_t i = begin; i < split; ++i) pieces.push_back(Render(history[i]));
  std::vector<std::string> chunks = summarizer.Chunk(std::move(pieces));
  result.chunks = static_cast<int>(chunks.size());
  result.incremental = previous.has_value();

  auto summarize = [&]() -> Result<std::string> {
    if (chunks.size() == 1 && previous &&
        CountText(counter, *previous) + CountText(counter, chunks[0]) <= summarizer.budget()) {
      return summarizer.Update(*previous, chunks[0]);
    }
    std::vector<std::string> parts;
    if (previous) parts.push_back(*previous);
    for (size_t i = 0; i < chunks.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(std::string part, summarizer.SummarizeChunk(chunks[i], i, chunks.size()));
      parts.push_back(std::move(part));
    }
    return summarizer.Reduce(std::move(parts));
  };
  Result<std::string> summary = summarize();
  result.llm_calls = summarizer.calls();
  if (!summary.ok()) {
    if (summary.status().code() == StatusCode::kCancelled || !options.prune_on_failure) return summary.status();
    result.pruned_fallback = true;
    result.llm_error = summary.status();
    result.messages.assign(history.begin(), history.end());
    result.prune_stats = Prune(&result.messages, options.prune);
    result.kept = result.messages.size();
    result.summary = previous.value_or("");
    result.tokens_after = Count(counter, result.messages);
    return result;
  }
  result.summary = std::move(*summary);
  result.messages.push_back(MakeSummaryMessage(result.summary));
  result.messages.insert(result.messages.end(), history.begin() + static_cast<ptrdiff_t>(split), history.end());
  result.compacted = split - begin;
  result.kept = history.size() - split;
  result.tokens_after = Count(counter, result.messages);
  return result;
}

Result<std::string> WriteCompaction(ContextLog* log, const CompactionResult& result, int64_t token_count) {
  return log->Rewrite(log->system_prompt(), result.messages, token_count, /*checkpoint=*/true);
}

Result<std::string> Trim(ContextLog* log, size_t keep_recent) {
  const std::vector<Message>& history = log->history();
  CharRatioEstimator unused;
  HistoryIndex index(&unused);
  index.Sync(history);
  size_t want = history.size() > keep_recent ? history.size() - keep_recent : 0;
  size_t cut = history.size();
  for (const HistoryUnit& u : index.units()) {
    if (u.begin >= want) {
      cut = u.begin;
      break;
    }
  }
  std::vector<Message> kept(history.begin() + static_cast<ptrdiff_t>(cut), history.end());
  return log->Rewrite(log->system_prompt(), kept, std::nullopt, /*checkpoint=*/true);
}

}  // namespace strata::window
