// strata.Conversation: the agent turn loop (engine/conversation.h) over a context log, with a provider
// from the same settings as the CLI's and tools that are Python callables.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <limits>

#include "bindings.h"
#include "convert.h"
#include "strata/engine/conversation.h"
#include "strata/engine/provider_config.h"
#include "strata/message/message_json.h"
#include "strata/tokenizer/registry.h"
#include "strata/tools/tool.h"

namespace strata::python {

namespace {

// A tool whose body is a Python callable, called with the model's arguments as keyword arguments. It runs
// on the turn's tool thread and takes the interpreter lock for the call.
tools::ToolOutput CallPython(const py::object& fn, std::string_view arguments) {
  py::gil_scoped_acquire gil;
  try {
    py::object args = FromJsonText(arguments);
    py::object result = fn(**py::reinterpret_borrow<py::dict>(args));
    if (result.is_none()) return tools::ToolOutput::Text("");
    // Shown to the model as it is, a lone surrogate as "?" (a cast of one threw past this catch).
    if (PyUnicode_Check(result.ptr())) return tools::ToolOutput::Text(LossyText(result));
    std::string text;
    if (AppendJson(result, "the tool's result", &text).ok()) return tools::ToolOutput::Text(text);
    return tools::ToolOutput::Text(LossyText(result));
  } catch (py::error_already_set& e) {
    // The model reads what went wrong, as with any failing tool; the turn goes on.
    std::string type = e.type() ? LossyText(e.type().attr("__name__")) : "Exception";
    std::string what = e.value() ? LossyText(e.value()) : "";
    return tools::ToolOutput::Error("Error: " + type + (what.empty() ? "" : ": " + what));
  }
}

// Destroyed in reverse order, with the interpreter lock held (by the Python object's deallocation): the
// conversation before the tools (whose functions hold Python callables) and the provider it borrows.
struct ConversationState {
  std::unique_ptr<llm::ChatProvider> provider;
  tools::Toolset tools;
  std::unique_ptr<Conversation> conversation;
};

py::object TurnResultRecord(const TurnResult& r, const std::vector<std::string>& warnings) {
  py::dict out;
  out["messages"] = MessagesToPy(r.messages);
  out["steps"] = r.steps;
  // Why the last reply ended, in the provider's words ("length": cut at the token limit), and what the turn
  // warned of (strata chat prints these): a cut reply must not pass for a whole one in Python either.
  out["stop_reason"] = r.stop_reason;
  py::list told;
  for (const std::string& w : warnings) told.append(w);
  out["warnings"] = told;
  out["stopped_at_max_steps"] = r.stopped_at_max_steps;
  if (r.usage) {
    py::dict u;
    u["input_tokens"] = r.usage->input();
    u["output_tokens"] = r.usage->output;
    u["input_cache_read"] = r.usage->input_cache_read;
    u["input_cache_creation"] = r.usage->input_cache_creation;
    out["usage"] = u;
  } else {
    out["usage"] = py::none();
  }
  out["compacted"] = r.compaction.has_value() && !r.compaction->nothing_to_do;
  // The reply's text, for the common case of printing it.
  std::string text;
  for (const Message& m : r.messages) {
    if (m.role == Role::kAssistant) text = m.ExtractText("");
  }
  out["text"] = text;
  return py::module_::import("strata.types").attr("Record")(out);
}

class PyConversation {
 public:
  PyConversation(const std::string& path, py::dict settings_kw, py::iterable tools, ConversationOptions options)
      : state_(std::make_shared<ConversationState>()) {
    ProviderSettings settings;
    for (auto [key, value] : settings_kw) {
      std::string k = py::str(key);
      if (value.is_none()) continue;
      std::string v = k == "provider_options" && !PyUnicode_Check(value.ptr()) ? ToJsonText(value, k) : py::str(value).cast<std::string>();
      if (k == "provider") settings.provider = v;
      else if (k == "model") settings.model = v;
      else if (k == "base_url") settings.base_url = v;
      else if (k == "api_key_env") settings.api_key_env = v;
      else if (k == "provider_options") settings.options = v;
      else if (k == "config_file") settings.config_file = v;
      else if (k == "script") settings.script = v;
      else if (k == "record") settings.record = v;
      else if (k == "replay") settings.replay = v;
    }
    for (py::handle t : tools) AddTool(t);
    state_->provider = Check(NoGil([&]() -> Result<std::unique_ptr<llm::ChatProvider>> {
      STRATA_ASSIGN_OR_RETURN(ConfigFile config, LoadConfigFile(settings.config_file));
      if (options.system_prompt.empty()) options.system_prompt = config.system_prompt;
      return MakeProvider(settings, config);
    }));
    state_->conversation = Check(NoGil([&] {
      return Conversation::Open(path, *state_->provider, tokenizer::CounterFor(tokenizer::kDefaultEncoding),
                                options, &state_->tools);
    }));
  }

  py::object Send(py::handle user, py::object on_text) {
    Message message = PyUnicode_Check(user.ptr()) ? Message::User(user.cast<std::string>()) : MessageFromPy(user, "message");
    TurnCallbacks callbacks;
    std::vector<std::string> warnings;  // Written on the turn's thread, read after it.
    callbacks.on_warning = [&warnings](const std::string& w) { warnings.push_back(w); };
    if (!on_text.is_none()) {
      callbacks.on_part = [on_text](const StreamedPart& part) {
        const auto* content = std::get_if<ContentPart>(&part);
        const auto* text = content ? std::get_if<TextPart>(content) : nullptr;
        if (text == nullptr) return;
        py::gil_scoped_acquire gil;
        try {
          on_text(text->text);
        } catch (py::error_already_set& e) {
          e.discard_as_unraisable("strata.Conversation on_text");
        }
      };
    }
    TurnResult result = Check(NoGil([&] { return state_->conversation->Turn(std::move(message), callbacks); }));
    return TurnResultRecord(result, warnings);
  }

  std::optional<int64_t> Undo() {
    return Check(NoGil([&] { return state_->conversation->Undo(); }));
  }
  void Clear() {
    Check(NoGil([&] { return state_->conversation->Clear(); }));
  }
  py::object Compact(const std::string& focus) {
    CompactionReport r = Check(NoGil([&] { return state_->conversation->Compact(focus); }));
    py::dict out;
    out["why"] = r.why;
    out["nothing_to_do"] = r.nothing_to_do;
    out["compacted"] = r.compacted;
    out["kept"] = r.kept;
    out["tokens_before"] = r.tokens_before;
    out["tokens_after"] = r.tokens_after;
    out["pruned_fallback"] = r.pruned_fallback;
    out["rotation"] = r.rotation;
    return py::module_::import("strata.types").attr("Record")(out);
  }
  py::list History() {
    std::vector<Message> h = NoGil([&] { return state_->conversation->log().history(); });
    return MessagesToPy(h);
  }
  void Cancel() { state_->conversation->Cancel(); }
  void Close() {
    Check(NoGil([&] { return state_->conversation->Close(); }));
  }

 private:
  void AddTool(py::handle t) {
    // A strata.Tool (name, description, parameters, fn) or any callable (described from its signature by
    // strata.tool.describe).
    py::object spec = py::module_::import("strata.tool").attr("describe")(t);
    llm::ToolDeclaration d;
    d.name = TextArg(spec.attr("name"), "a tool's name");
    d.description = TextArg(spec.attr("description"), "tool " + d.name + "'s description");
    d.parameters = ToJsonText(spec.attr("parameters"), "tool " + d.name + " parameters");
    py::object fn = spec.attr("fn");
    Check(state_->tools.Add(tools::MakeTool(
        d, [fn](std::string_view arguments, const Canceller&) { return CallPython(fn, arguments); })));
  }

  std::shared_ptr<ConversationState> state_;
};

}  // namespace

void BindConversation(py::module_& m) {
  py::class_<PyConversation>(m, "Conversation", R"doc(
A chat with a model over a context log (kimi-cli's context.jsonl): each send() checkpoints, appends the
user message, and runs steps until the model stops calling tools; the log is assembled within max_context
tokens and compacted when it fills. Tools are Python callables (see strata.tool).

    def weather(city: str) -> str:
        "The weather in a city."
        return "sunny"

    chat = strata.Conversation("chat.jsonl", provider="openai", model="gpt-4o-mini", tools=[weather])
    print(chat.send("Weather in Paris?").text)

Provider settings are the CLI's: provider (openai, kimi, deepseek, ollama, vllm, anthropic, gemini,
openai-responses, scripted), model, base_url, api_key_env, provider_options (a dict), config_file,
script (scripted replies), record / replay.
)doc")
      .def(py::init([](const std::string& path, py::iterable tools, const std::string& system_prompt,
                       const py::object& max_steps, const py::object& max_context, const py::object& reserve_for_reply,
                       const py::object& compact_ratio, py::kwargs settings) {
             // Read as the CLI reads --max-steps, --max-context, --reserve and --compact-ratio: -1 steps ran
             // none, a negative reserve turned the headroom check off, and a NaN ratio reached a cast.
             ConversationOptions o;
             o.system_prompt = system_prompt;
             const int64_t steps = IntArg(max_steps, "max_steps");
             if (steps < 1 || steps > std::numeric_limits<int>::max()) {
               Raise(Status::InvalidArgument("\"max_steps\" must be from 1 to " +
                                             std::to_string(std::numeric_limits<int>::max()) + ", not " +
                                             std::to_string(steps)));
             }
             o.max_steps = static_cast<int>(steps);
             o.max_context = CountArg(max_context, "max_context");
             o.reserve_for_reply = CountArg(reserve_for_reply, "reserve_for_reply");
             o.compact_ratio = RealArg(compact_ratio, "compact_ratio", 0.1, 1.0);
             static const char* kKnown[] = {"provider", "model", "base_url", "api_key_env", "provider_options",
                                            "config_file", "script", "record", "replay"};
             for (auto [key, value] : settings) {
               std::string k = py::str(key);
               if (std::find(std::begin(kKnown), std::end(kKnown), k) == std::end(kKnown)) {
                 Raise(Status::InvalidArgument("Conversation() got an unknown option " + k));
               }
             }
             return std::make_unique<PyConversation>(path, settings, tools, o);
           }),
           py::arg("path"), py::kw_only(), py::arg("tools") = py::tuple(), py::arg("system_prompt") = "",
           py::arg("max_steps") = py::int_(20), py::arg("max_context") = py::int_(0),
           py::arg("reserve_for_reply") = py::int_(4096), py::arg("compact_ratio") = py::float_(0.85))
      .def("send", &PyConversation::Send, py::arg("message"), py::kw_only(), py::arg("on_text") = py::none(), R"doc(
One user turn: `message` is text or a message dict. Returns a record with `text` (the final reply's
text), `messages` (everything the turn appended after the user message), `steps`, `usage`,
`stopped_at_max_steps`, `compacted`, `stop_reason` (the provider's, e.g. \"length\" for a reply cut at the token limit) and `warnings`. on_text(str) receives the reply's text as it streams.
)doc")
      .def("undo", &PyConversation::Undo, "Reverts the last turn; returns its checkpoint id (None when there is none).")
      .def("clear", &PyConversation::Clear, "Forgets the conversation (the old log is kept as a rotation).")
      .def("compact", &PyConversation::Compact, py::arg("focus") = "", "Summarises the older conversation now.")
      .def_property_readonly("history", &PyConversation::History, "The log's messages (a list of dicts).")
      .def("cancel", &PyConversation::Cancel, "Cancels the generation in progress (from another thread).")
      .def("close", &PyConversation::Close)
      .def("__enter__", [](PyConversation& c) -> PyConversation& { return c; }, py::return_value_policy::reference)
      .def("__exit__", [](PyConversation& c, py::handle, py::handle, py::handle) { c.Close(); });
}

}  // namespace strata::python
