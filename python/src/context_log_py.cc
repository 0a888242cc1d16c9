// strata.ContextLog: kimi-cli's context.jsonl (log/context_log.h) under the names kimi-cli's Context uses,
// synchronous; and the token functions (count_tokens, encode, decode).
#include <pybind11/stl.h>

#include <chrono>
#include <mutex>

#include "bindings.h"
#include "convert.h"
#include "strata/log/context_log.h"
#include "strata/message/message_json.h"
#include "strata/message/token_estimator.h"
#include "strata/tokenizer/encoding.h"
#include "strata/tokenizer/registry.h"

namespace strata::python {

namespace {

// The log and the lock that serialises it (a ContextLog is used by one thread at a time; Python threads
// sharing a strata.ContextLog take turns). Shared with the history views handed out.
struct LogState {
  std::mutex mu;
  std::unique_ptr<ContextLog> log;  // Guarded by mu.
  std::optional<bool> restored;     // What Restore() returned, once it ran.
};

// Runs `f(log)` without the interpreter lock, under the log's lock.
template <typename F>
auto Locked(LogState& state, F&& f) {
  py::gil_scoped_release release;
  std::lock_guard lock(state.mu);
  return f(*state.log);
}

// A live, read-only view of the history: a sequence of message dicts, converted as they are read.
class HistoryView {
 public:
  explicit HistoryView(std::shared_ptr<LogState> state) : state_(std::move(state)) {}

  size_t size() {
    return Locked(*state_, [](ContextLog& log) { return log.history().size(); });
  }

  py::dict At(int64_t index) {
    std::optional<Message> m = Locked(*state_, [&](ContextLog& log) -> std::optional<Message> {
      int64_t n = static_cast<int64_t>(log.history().size());
      int64_t i = index < 0 ? index + n : index;
      if (i < 0 || i >= n) return std::nullopt;
      return log.history()[static_cast<size_t>(i)];
    });
    if (!m) throw py::index_error("history index " + std::to_string(index) + " out of range");
    return MessageToPy(*m);
  }

  py::list Slice(const py::slice& slice) {
    std::vector<Message> picked = Locked(*state_, [&](ContextLog& log) {
      size_t start = 0, stop = 0, step = 0, length = 0;
      std::vector<Message> out;
      if (!slice.compute(log.history().size(), &start, &stop, &step, &length)) return out;
      for (size_t k = 0, i = start; k < length; ++k, i += step) out.push_back(log.history()[i]);
      return out;
    });
    return MessagesToPy(picked);
  }

  py::list ToList() {
    std::vector<Message> all = Locked(*state_, [](ContextLog& log) { return log.history(); });
    return MessagesToPy(all);
  }

 private:
  std::shared_ptr<LogState> state_;
};

class PyContextLog {
 public:
  PyContextLog(const std::string& path, bool restore, const std::string& durability, const std::string& estimator)
      : state_(std::make_shared<LogState>()) {
    ContextLogOptions o;
    o.durability.policy = Check(ParseDurability(durability));
    if (!estimator.empty()) o.estimator = Check(tokenizer::FindCounter(estimator));
    state_->log = ContextLog::Open(path, o);
    if (restore) Restore();
  }

  bool Restore() {
    if (state_->restored) return *state_->restored;  // Already done (the constructor restores by default).
    bool had = Check(Locked(*state_, [](ContextLog& log) { return log.Restore(); }));
    state_->restored = had;
    return had;
  }

  void Append(py::handle messages) {
    std::vector<Message> parsed = MessagesFromPy(messages, "message");
    Check(Locked(*state_, [&](ContextLog& log) {
      return parsed.size() == 1 ? log.Append(std::move(parsed[0])) : log.Append(std::move(parsed));
    }));
  }

  int64_t Checkpoint(bool user_message) {
    return Check(Locked(*state_, [&](ContextLog& log) { return log.Checkpoint(user_message); }));
  }
  void RevertTo(int64_t id) {
    Check(Locked(*state_, [&](ContextLog& log) { return log.RevertTo(id); }));
  }
  void Clear() {
    Check(Locked(*state_, [](ContextLog& log) { return log.Clear(); }));
  }
  void WriteSystemPrompt(const std::string& prompt) {
    Check(Locked(*state_, [&](ContextLog& log) { return log.WriteSystemPrompt(prompt); }));
  }
  void UpdateUsage(int64_t tokens) {
    if (tokens < 0) Raise(Status::InvalidArgument("a token count is 0 or more"));
    Check(Locked(*state_, [&](ContextLog& log) { return log.UpdateTokenCount(tokens); }));
  }
  void Sync() {
    Check(Locked(*state_, [](ContextLog& log) { return log.Sync(); }));
  }
  void Close() {
    Check(Locked(*state_, [](ContextLog& log) { return log.Close(); }));
  }

  // append() done `n` times in C++ (the message parsed once, copied into each append): the baseline of
  // bench/python_bench.py. Returns nanoseconds per append.
  double CppLoop(const std::string& message_json, int n) {
    if (n < 1) Raise(Status::InvalidArgument("_cpp_loop: n > 0"));
    Message m = Check(ParseMessage(message_json));
    return Check(Locked(*state_, [&](ContextLog& log) -> Result<double> {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) STRATA_RETURN_IF_ERROR(log.Append(Message(m)));
      return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / n;
    }));
  }

  HistoryView history() { return HistoryView(state_); }
  int64_t token_count() {
    return Locked(*state_, [](ContextLog& log) { return log.token_count(); });
  }
  int64_t token_count_with_pending() {
    return Locked(*state_, [](ContextLog& log) { return log.token_count_with_pending(); });
  }
  int64_t n_checkpoints() {
    return Locked(*state_, [](ContextLog& log) { return log.n_checkpoints(); });
  }
  std::optional<std::string> system_prompt() {
    return Locked(*state_, [](ContextLog& log) { return log.system_prompt(); });
  }
  std::string path() {
    return Locked(*state_, [](ContextLog& log) { return log.path(); });
  }
  py::dict RestoreReport() {
    strata::RestoreReport r = Locked(*state_, [](ContextLog& log) { return log.restore_report(); });
    py::list damage;
    for (const Damage& d : r.scan.damage) {
      py::dict item;
      item["line"] = d.line;
      item["offset"] = d.offset;
      item["length"] = d.length;
      item["reason"] = d.reason;
      damage.append(item);
    }
    py::dict out;
    out["bytes"] = r.scan.size;
    out["lines"] = r.scan.lines;
    out["records"] = r.scan.records;
    out["damage"] = damage;
    out["torn_tail"] = r.scan.torn_tail.has_value();
    out["unknown_records"] = r.unknown_records;
    return out;
  }

 private:
  std::shared_ptr<LogState> state_;
};

std::shared_ptr<const tokenizer::Encoding> EncodingArg(const std::string& name) {
  return Check(NoGil([&] { return tokenizer::EncodingFor(name); }));
}

}  // namespace

void BindContextLog(py::module_& m) {
  // No __iter__: Python iterates through __getitem__ until IndexError, so a history that grows while it is
  // read is read to its new end.
  py::class_<HistoryView>(m, "History", "A context log's messages, oldest first: a live read-only sequence of dicts.")
      .def("__len__", &HistoryView::size)
      .def("__getitem__", &HistoryView::At, py::arg("index"))
      .def("__getitem__", &HistoryView::Slice, py::arg("slice"))
      .def("__eq__", [](HistoryView& h, py::handle other) -> py::object {
        if (!py::isinstance<py::sequence>(other) || PyUnicode_Check(other.ptr())) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::bool_(h.ToList().equal(py::list(py::reinterpret_borrow<py::sequence>(other))));
      })
      .def("to_list", &HistoryView::ToList, "The messages as a list of dicts (a copy).")
      .def("__repr__", [](HistoryView& h) { return "<strata.History of " + std::to_string(h.size()) + " messages>"; });

  py::class_<PyContextLog>(m, "ContextLog", R"doc(
kimi-cli's context.jsonl: an append-only conversation log with token-usage marks, checkpoints, revert, clear
and a system prompt, byte-compatible with kimi-cli and kosong both ways; crash-safe (a torn last line is cut
off and kept beside the file, damaged lines are skipped and reported, never glued to).

    log = strata.ContextLog("context.jsonl")        # restores what the file holds
    log.checkpoint()
    log.append({"role": "user", "content": "hello"})
    log.update_usage(1234)
    log.history[-1]                                  # {"role": "user", "content": "hello"}

durability: "always" (fsync every append, the default), "batch" (group commits within 10 ms) or "none"
(the operating system decides, as kimi-cli does). estimator: how token_count_with_pending counts the
messages after the last usage mark: "o200k_base" (exact, the default, as `strata context show` counts),
"cl100k_base", or "chars" (kimi-cli's characters / 4, for the figures kimi-cli itself shows).

One writer per file: a second ContextLog or process on the same file gets UnavailableError.
)doc")
      .def(py::init<const std::string&, bool, const std::string&, const std::string&>(), py::arg("path"),
           py::kw_only(), py::arg("restore") = true, py::arg("durability") = "always", py::arg("estimator") = "o200k_base")
      .def("restore", &PyContextLog::Restore,
           "Reads the file into memory (done by the constructor unless restore=False); returns whether it had "
           "content.")
      .def("append", &PyContextLog::Append, py::arg("message"),
           "Appends one message (a dict in OpenAI/kosong shape) or a list of them, in one write.")
      .def("append_message", &PyContextLog::Append, py::arg("message"), "kimi-cli's name for append().")
      .def("checkpoint", &PyContextLog::Checkpoint, py::arg("user_message") = false,
           "Writes a checkpoint; with user_message, also the user message <system>CHECKPOINT n</system>. Returns "
           "its id.")
      .def("revert_to", &PyContextLog::RevertTo, py::arg("checkpoint_id"),
           "Drops checkpoint `checkpoint_id` and everything after it; the old file is kept as <stem>_N.jsonl.")
      .def("clear", &PyContextLog::Clear, "Empties the context; the old file is kept as <stem>_N.jsonl.")
      .def("write_system_prompt", &PyContextLog::WriteSystemPrompt, py::arg("prompt"),
           "Makes `prompt` the file's first record (replacing one already there).")
      .def("update_usage", &PyContextLog::UpdateUsage, py::arg("token_count"),
           "Records the provider-reported token count of the whole context.")
      .def("update_token_count", &PyContextLog::UpdateUsage, py::arg("token_count"), "kimi-cli's name for update_usage().")
      .def("sync", &PyContextLog::Sync, "Makes everything written durable now.")
      .def("_cpp_loop", &PyContextLog::CppLoop, py::arg("message_json"), py::arg("n"))
      .def("close", &PyContextLog::Close, "Syncs and releases the file's writer lock.")
      .def("__enter__", [](PyContextLog& l) -> PyContextLog& { return l; }, py::return_value_policy::reference)
      .def("__exit__", [](PyContextLog& l, py::handle, py::handle, py::handle) { l.Close(); })
      .def_property_readonly("history", &PyContextLog::history, "The messages, oldest first (a live sequence of dicts).")
      .def_property_readonly("token_count", &PyContextLog::token_count, "The last recorded usage (0 if none).")
      .def_property_readonly("token_count_with_pending", &PyContextLog::token_count_with_pending,
                             "token_count plus the estimate of the messages appended after it.")
      .def_property_readonly("n_checkpoints", &PyContextLog::n_checkpoints, "The id the next checkpoint gets.")
      .def_property_readonly("system_prompt", &PyContextLog::system_prompt)
      .def_property_readonly("path", &PyContextLog::path)
      .def_property_readonly("file_backend", [](PyContextLog& l) {
        return py::module_::import("pathlib").attr("Path")(l.path());
      }, "kimi-cli's name: the file, as a pathlib.Path.")
      .def_property_readonly("restore_report", &PyContextLog::RestoreReport,
                             "What restore found: bytes, lines, records, damage [{line, offset, length, reason}], "
                             "torn_tail.");
}

void BindTokens(py::module_& m) {
  m.def(
      "count_tokens",
      [](py::handle what, const std::string& encoding) -> int64_t {
        Check(tokenizer::ValidateCounterName(encoding));
        std::string warning;
        int64_t tokens = 0;
        if (PyUnicode_Check(what.ptr())) {
          std::string text = what.cast<std::string>();
          tokens = NoGil([&] { return tokenizer::CountText(encoding, text, &warning); });
        } else {
          std::vector<Message> messages = MessagesFromPy(what, "messages");
          tokens = NoGil([&] { return tokenizer::CounterFor(encoding, &warning).CountMessages(messages); });
        }
        // Without the vocabulary the count is characters / 4, said as the server's "warning" says it.
        if (!warning.empty() && PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) {
          throw py::error_already_set();
        }
        return tokens;
      },
      py::arg("text_or_messages"), py::arg("encoding") = "o200k_base", R"doc(
Exact tiktoken-compatible token count: of a text, or of messages (a dict or a list of dicts) as a chat
request counts them (per-message overhead included). encoding: "o200k_base", "cl100k_base" or "chars".
Without the encoding's vocabulary installed the count is characters / 4, with a RuntimeWarning saying so
(the server's answer carries the same words as its "warning").
)doc");
  m.def(
      "encode",
      [](const std::string& text, const std::string& encoding) {
        auto enc = EncodingArg(encoding);
        return NoGil([&] { return enc->Encode(text); });
      },
      py::arg("text"), py::arg("encoding") = "o200k_base", "The token ids of `text` (special tokens as plain text).");
  m.def(
      "decode",
      [](const std::vector<tokenizer::Token>& tokens, const std::string& encoding) {
        auto enc = EncodingArg(encoding);
        std::string bytes = Check(NoGil([&] { return enc->Decode(tokens); }));
        // Tokens that cut a character in two decode to U+FFFD, as tiktoken's decode() does.
        PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
        if (text == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::str>(text);
      },
      py::arg("tokens"), py::arg("encoding") = "o200k_base",
      "The text of token ids; an unknown id raises InvalidArgumentError.");
}

}  // namespace strata::python
