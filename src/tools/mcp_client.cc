#include "strata/tools/mcp_client.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "strata/json/checked.h"
#include "strata/llm/sse.h"
#include "strata/util/ascii.h"

extern char** environ;

namespace strata::tools {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kClientVersion = "0.1.0";
// Newest first: what we ask for, then what we accept when the server answers with another revision.
constexpr std::array<std::string_view, 4> kProtocolVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                               "2024-11-05"};
constexpr size_t kStderrTailLines = 20;
constexpr size_t kMaxTools = 10'000;  // More from one server is refused: no model can use them all.
// Writes that are not the caller's own request (answers to the server, cancellations) wait this long.
constexpr milliseconds kHousekeepingWrite{1000};

// Never throws: invalid UTF-8 is replaced, not an exception.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Parses a server's message; JSON nested deeper than kMaxJsonDepth is refused (copies and dumps recurse).
Json ParseJson(std::string_view text) { return json::ParseOrDiscard<Json>(text); }

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string Seconds(milliseconds d) {
  std::string text = std::to_string(d.count() / 1000);
  if (d.count() % 1000 != 0) text += "." + std::to_string(d.count() % 1000 / 100);
  return text + " s";
}

// At most `limit` bytes of untrusted text for an error message or a log line: cut on a character
// boundary, invalid UTF-8 replaced, control characters (terminal escapes among them) shown as spaces.
std::string Snippet(std::string_view s, size_t limit = 300) {
  size_t cut = std::min(limit, s.size());
  while (cut > 0 && cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  std::string out = json::ReplaceInvalidUtf8(s.substr(0, cut));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  if (cut < s.size()) out += "...";
  return out;
}

// A JSON-RPC error object as a Status, by what the caller does next.
Status RpcError(const Json& error, const std::string& what) {
  int64_t code = json::IntOr(error, "code", 0);
  std::string message = Snippet(json::StringOr(error, "message", "(no message)"), 2000);
  std::string text = what + " failed: " + message + " (JSON-RPC error " + std::to_string(code) + ")";
  if (code == -32601) return Status::NotFound(text);
  if (code == -32602 || code == -32600 || code == -32700) return Status::InvalidArgument(text);
  return Status::Unavailable(text);
}

// The "result" of a JSON-RPC answer, or its "error" as a status. A null "error" beside a result (some
// servers send one) counts as none.
Result<Json> ResultOf(Json& answer, const std::string& method) {
  if (const Json* error = json::Field(answer, "error"); error != nullptr && !error->is_null()) {
    return RpcError(*error, method);
  }
  auto it = answer.find("result");
  if (it == answer.end()) return Status::Unavailable(method + ": the answer has neither \"result\" nor \"error\"");
  return std::move(*it);
}

// A channel carries JSON-RPC messages to one server and matches answers to requests.
class Channel {
 public:
  virtual ~Channel() = default;
  // Sends the request and returns its "result" (or the "error" as a status). `cancellable` = false for
  // initialize, which the protocol forbids to cancel.
  virtual Result<Json> Call(const std::string& method, Json params, milliseconds timeout, const Canceller* cancel,
                            bool cancellable) = 0;
  virtual Status Notify(const std::string& method, Json params) = 0;
  virtual void SetProtocolVersion(const std::string&) {}
  // Whether the server forgot the session since the last call (HTTP 404): the caller initializes again.
  virtual bool TakeSessionExpired() { return false; }
};

// The answer to a request the server made of us: ping is answered, everything else refused.
std::optional<Json> AnswerServerRequest(const Json& message) {
  const Json* id = json::Field(message, "id");
  if (id == nullptr || id->is_null()) return std::nullopt;  // A notification: nothing to answer.
  if (!id->is_string() && !id->is_number()) return std::nullopt;  // Not a valid id: nothing to answer to.
  std::string method = json::StringOr(message, "method");
  if (method == "ping") return Json{{"jsonrpc", "2.0"}, {"id", *id}, {"result", Json::object()}};
  return Json{{"jsonrpc", "2.0"},
              {"id", *id},
              {"error", {{"code", -32601}, {"message", "the Strata MCP client does not support " + Snippet(method, 100)}}}};
}

// ---- stdio: a child process, newline-delimited JSON-RPC ----

// Writes `data` to the non-blocking `fd` until done, the deadline, `cancel` or `stop`; sets `*written` to
// the bytes sent. A closed pipe is an error, not a SIGPIPE that ends the process.
Status WriteWithin(int fd, std::string_view data, Clock::time_point deadline, const Canceller* cancel,
                   const std::atomic<bool>& stop, size_t* written) {
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  Status result;
  *written = 0;
  while (*written < data.size()) {
    ssize_t n = ::write(fd, data.data() + *written, data.size() - *written);
    if (n > 0) {
      *written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      result = Status::Unavailable(std::string("write failed: ") + std::strerror(errno));
      break;
    }
    // The pipe is full: the server is not reading. Wait for room in slices, watching the deadline.
    if (stop.load()) {
      result = Status::Unavailable("the client is closing");
      break;
    }
    if (cancel != nullptr && cancel->cancelled()) {
      result = Status::Cancelled("cancelled while the server was not reading its input");
      break;
    }
    if (Clock::now() >= deadline) {
      result = Status::DeadlineExceeded("the server stopped reading its input");
      break;
    }
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 100);
  }
  // Consume a SIGPIPE this thread raised while it was blocked, so it is not delivered later.
  timespec zero{0, 0};
  while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  return result;
}

class StdioChannel final : public Channel {
 public:
  static Result<std::unique_ptr<StdioChannel>> Start(const McpServerConfig& config, const McpClientOptions& options) {
    auto channel = std::unique_ptr<StdioChannel>(new StdioChannel(config, options));
    STRATA_RETURN_IF_ERROR(channel->Spawn());
    return channel;
  }

  ~StdioChannel() override { Shutdown(); }

  Result<Json> Call(const std::string& method, Json params, milliseconds timeout, const Canceller* cancel,
                    bool cancellable) override {
    if (cancel != nullptr && cancel->cancelled()) return Status::Cancelled(method + " was cancelled");
    auto deadline = Clock::now() + timeout;
    int64_t id;
    {
      std::lock_guard lock(mu_);
      if (closed_) return Status::Unavailable(closed_reason_);
      id = next_id_++;
      waiting_[id];
    }
    Json request{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
    Status sent = Send(request, deadline, cancellable ? cancel : nullptr);
    if (!sent.ok()) {
      std::unique_lock lock(mu_);
      waiting_.erase(id);
      if (sent.code() == StatusCode::kUnavailable) {
        // A broken pipe: the server died. Its exit status and last words arrive with the reader's EOF.
        cv_.wait_for(lock, milliseconds(1500), [this] { return closed_; });
        if (closed_) return Status::Unavailable(closed_reason_);
      }
      return Status(sent.code(), "sending " + method + ": " + sent.message());
    }
    ScopedCancelCallback wake(cancellable ? cancel : nullptr, [this] {
      std::lock_guard lock(mu_);
      cv_.notify_all();
    });
    std::unique_lock lock(mu_);
    while (true) {
      auto it = waiting_.find(id);
      if (it->second.has_value()) {
        Json answer = std::move(*it->second);
        waiting_.erase(it);
        return ResultOf(answer, method);
      }
      if (closed_) {
        waiting_.erase(it);
        return Status::Unavailable(closed_reason_);
      }
      bool cancelled = cancellable && cancel != nullptr && cancel->cancelled();
      if (cancelled || Clock::now() >= deadline) {
        waiting_.erase(it);
        std::string unreadable = last_unreadable_;
        lock.unlock();
        if (cancellable) {
          std::string reason = cancelled ? "cancelled by the client" : "timed out";
          (void)Send(Json{{"jsonrpc", "2.0"},
                          {"method", "notifications/cancelled"},
                          {"params", {{"requestId", id}, {"reason", reason}}}},
                     Clock::now() + kHousekeepingWrite, nullptr);
        }
        if (cancelled) return Status::Cancelled(method + " was cancelled");
        return Status::DeadlineExceeded(method + " got no answer within " + Seconds(timeout) +
                                        (unreadable.empty() ? "" : " (it wrote a line that is not JSON-RPC: " +
                                                                       unreadable + ")"));
      }
      cv_.wait_until(lock, std::min(deadline, Clock::now() + milliseconds(200)));
    }
  }

  Status Notify(const std::string& method, Json params) override {
    Json message{{"jsonrpc", "2.0"}, {"method", method}};
    if (!params.is_null()) message["params"] = std::move(params);
    return Send(message, Clock::now() + kHousekeepingWrite, nullptr);
  }

 private:
  StdioChannel(const McpServerConfig& config, const McpClientOptions& options) : config_(config), options_(options) {}

  // Writes one message. A line cut short breaks the framing for good: the server is then stopped.
  Status Send(const Json& message, Clock::time_point deadline, const Canceller* cancel) {
    std::string line = Dump(message);
    line.push_back('\n');
    std::lock_guard lock(write_mu_);
    if (to_child_ < 0) return Status::Unavailable("the server's input is closed");
    size_t written = 0;
    Status s = WriteWithin(to_child_, line, deadline, cancel, closing_, &written);
    if (!s.ok() && written > 0) {
      Kill();
      ::close(to_child_);
      to_child_ = -1;
    }
    return s;
  }

  Status Spawn() {
    int in_pipe[2], out_pipe[2], err_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
      ::close(in_pipe[0]);
      ::close(in_pipe[1]);
      return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
    }
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
      return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
    }
    // Our end of the server's input never blocks: a server that stops reading cannot hang us.
    ::fcntl(in_pipe[1], F_SETFL, ::fcntl(in_pipe[1], F_GETFL) | O_NONBLOCK);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    if (!config_.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, config_.cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group, so the terminal's Ctrl-C (which cancels a turn) does not kill the server;
    // default signal handling and an empty mask whatever ours are (an ignored SIGPIPE would be inherited).
    sigset_t defaults, empty;
    sigemptyset(&defaults);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
    sigemptyset(&empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

    std::vector<std::string> argv_storage{config_.command};
    argv_storage.insert(argv_storage.end(), config_.args.begin(), config_.args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_storage;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      std::string_view key = entry.substr(0, entry.find('='));
      bool overridden = false;
      for (const auto& [k, v] : config_.env) overridden = overridden || k == key;
      if (!overridden) env_storage.emplace_back(entry);
    }
    for (const auto& [k, v] : config_.env) env_storage.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (std::string& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);

    int rc = posix_spawnp(&pid_, config_.command.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (rc != 0) {
      for (int fd : {in_pipe[1], out_pipe[0], err_pipe[0]}) ::close(fd);
      pid_ = -1;
      return Status::Unavailable("cannot start " + Quote(Snippet(config_.command)) +
                                 (config_.cwd.empty() ? "" : " in " + Snippet(config_.cwd)) + ": " + std::strerror(rc));
    }
    group_ = pid_;
    to_child_ = in_pipe[1];
    from_child_ = out_pipe[0];
    errors_from_child_ = err_pipe[0];
    reader_ = std::thread([this] { ReadLoop(); });
    error_reader_ = std::thread([this] { StderrLoop(); });
    return Status::Ok();
  }

  // Waits until `fd` has input or its writer closed it; false once the client is stopping.
  bool Readable(int fd) {
    while (!stopping_.load()) {
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, 100);
      if (r > 0 || (r < 0 && errno != EINTR)) return true;
    }
    return false;
  }

  // Reads the server's output line by line; each line is one JSON-RPC message.
  void ReadLoop() {
    std::string buffer;
    char chunk[65536];
    std::string why;
    while (true) {
      if (!Readable(from_child_)) {
        why = ": the client stopped it";
        break;
      }
      ssize_t n = ::read(from_child_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = n == 0 ? "" : std::string(": read failed: ") + std::strerror(errno);
        break;
      }
      buffer.append(chunk, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
        Dispatch(std::string_view(buffer).substr(start, nl - start));
      }
      buffer.erase(0, start);
      if (buffer.size() > options_.max_message_bytes) {
        why = ": it sent a message of more than " + std::to_string(options_.max_message_bytes) + " bytes";
        Kill();
        break;
      }
    }
    CloseWith(why);
  }

  void Dispatch(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) return;
    Json message = ParseJson(line);
    if (message.is_discarded() || !message.is_object()) {
      // Not ours to fail a request over (servers that log to stdout by mistake are common), but named
      // should a request then time out, and quoted should the server die.
      std::string note = message.is_discarded() && json::FindTooDeep(line) != std::string_view::npos
                             ? "JSON nested deeper than " + std::to_string(json::kMaxJsonDepth) + " levels"
                             : Snippet(line, 200);
      RememberStderr("(stdout, not JSON-RPC) " + note);
      std::lock_guard lock(mu_);
      last_unreadable_ = note;
      return;
    }
    if (json::Field(message, "method") != nullptr) {
      if (auto answer = AnswerServerRequest(message)) (void)Send(*answer, Clock::now() + kHousekeepingWrite, nullptr);
      return;
    }
    const Json* id = json::Field(message, "id");
    if (id == nullptr || !id->is_number_integer()) return;  // Not an answer to any request of ours.
    std::lock_guard lock(mu_);
    auto it = waiting_.find(id->get<int64_t>());
    if (it == waiting_.end()) return;  // Cancelled or timed out meanwhile.
    it->second = std::move(message);
    cv_.notify_all();
  }

  void StderrLoop() {
    std::string buffer;
    char chunk[4096];
    while (Readable(errors_from_child_)) {
      ssize_t n = ::read(errors_from_child_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string line = Snippet(std::string_view(buffer).substr(start, nl - start), 500);
        if (options_.on_stderr) options_.on_stderr(config_.name, line);
        RememberStderr(std::move(line));
      }
      buffer.erase(0, start);
      if (buffer.size() > 65536) buffer.erase(0, buffer.size() - 4096);  // A line without end: keep its tail.
    }
    if (!buffer.empty()) RememberStderr(Snippet(buffer, 500));
    std::lock_guard lock(mu_);
    stderr_done_ = true;
    cv_.notify_all();
  }

  void RememberStderr(std::string line) {
    std::lock_guard lock(mu_);
    stderr_tail_.push_back(std::move(line));
    if (stderr_tail_.size() > kStderrTailLines) stderr_tail_.pop_front();
  }

  // Marks the channel closed (the server's output ended) and wakes every waiting request.
  void CloseWith(const std::string& why) {
    std::string exit;
    if (!stopping_.load()) {
      exit = ExitDescription();
      // Give the stderr reader a moment to collect the server's last words before they are quoted.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, milliseconds(300), [this] { return stderr_done_; });
    }
    std::lock_guard lock(mu_);
    closed_ = true;
    closed_reason_ = "the server closed its output" + why + exit;
    if (!stderr_tail_.empty()) {
      closed_reason_ += "; its last output:";
      for (const std::string& l : stderr_tail_) closed_reason_ += "\n  " + l;
    }
    cv_.notify_all();
  }

  // Waits up to a second for the child to exit and describes how it did ("" if it is still running).
  std::string ExitDescription() {
    for (int i = 0; i < 100 && !Reap(false); ++i) std::this_thread::sleep_for(milliseconds(10));
    std::lock_guard lock(reap_mu_);
    return exit_text_;
  }

  // Collects the child's exit status if it has exited (waits if `block`) and describes it in exit_text_.
  // Returns whether there is no child left to wait for.
  bool Reap(bool block) {
    std::lock_guard lock(reap_mu_);
    if (pid_ <= 0) return true;
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {  // ECHILD: reaped elsewhere (a program with SIGCHLD ignored): gone, how is unknown.
      pid_ = -1;
      exit_text_ = " (it exited)";
      return true;
    }
    if (r != pid_) return false;
    pid_ = -1;
    if (WIFEXITED(status)) {
      exit_text_ = " (it exited with status " + std::to_string(WEXITSTATUS(status)) + ")";
    } else if (WIFSIGNALED(status)) {
      exit_text_ = " (it was killed by signal " + std::to_string(WTERMSIG(status)) + ")";
    } else {
      exit_text_ = " (it ended)";
    }
    return true;
  }

  void Kill() { Signal(SIGKILL); }

  // Signals the server and its process group (its own children go too, e.g. those of npx; a server that
  // left the group is still reached by its pid).
  void Signal(int sig) {
    std::lock_guard lock(reap_mu_);
    if (group_ > 0) ::kill(-group_, sig);
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // Closes the server's input (the stdio way to end a session), then escalates if it does not exit.
  void Shutdown() {
    closing_ = true;  // A writer waiting for room gives up, so the lock below is free at once.
    {
      std::lock_guard lock(write_mu_);
      if (to_child_ >= 0) ::close(to_child_);
      to_child_ = -1;
    }
    auto wait_exit = [this](milliseconds limit) {
      auto end = Clock::now() + limit;
      while (Clock::now() < end) {
        if (Reap(false)) return true;
        std::this_thread::sleep_for(milliseconds(10));
      }
      return Reap(false);
    };
    if (!wait_exit(milliseconds(2000))) {
      Signal(SIGTERM);
      if (!wait_exit(milliseconds(2000))) {
        Signal(SIGKILL);
        wait_exit(milliseconds(5000));  // SIGKILL cannot be refused; the bound only guards against the odd.
      }
    }
    // The server is gone, but a process it started may still hold the pipes: the readers stop on the flag
    // rather than wait for an end of file that may never come.
    stopping_ = true;
    if (reader_.joinable()) reader_.join();
    if (error_reader_.joinable()) error_reader_.join();
    if (from_child_ >= 0) ::close(from_child_);
    if (errors_from_child_ >= 0) ::close(errors_from_child_);
  }

  const McpServerConfig config_;
  const McpClientOptions options_;
  std::mutex reap_mu_;
  pid_t pid_ = -1;          // Guarded by reap_mu_; -1 once reaped.
  pid_t group_ = -1;        // Guarded by reap_mu_: the server's process group (its pid).
  std::string exit_text_;   // Guarded by reap_mu_.
  std::atomic<bool> closing_{false};   // The client is being destroyed: writers stop waiting.
  std::atomic<bool> stopping_{false};  // The server is gone: readers stop.
  std::mutex write_mu_;
  int to_child_ = -1;       // Guarded by write_mu_; non-blocking.
  int from_child_ = -1;
  int errors_from_child_ = -1;
  std::thread reader_;
  std::thread error_reader_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, std::optional<Json>> waiting_;  // Guarded by mu_: requests in flight and their answers.
  int64_t next_id_ = 1;                             // Guarded by mu_.
  bool closed_ = false;                             // Guarded by mu_.
  std::string closed_reason_;                       // Guarded by mu_.
  std::string last_unreadable_;                     // Guarded by mu_: the last line that was not JSON-RPC.
  std::deque<std::string> stderr_tail_;             // Guarded by mu_.
  bool stderr_done_ = false;                        // Guarded by mu_.
};

// ---- Streamable HTTP: every message a POST; the answer JSON or an event stream ----

class HttpChannel final : public Channel {
 public:
  HttpChannel(const McpServerConfig& config, const McpClientOptions& options)
      : config_(config), options_(options), http_(options.http ? options.http : llm::CurlTransport()) {}

  ~HttpChannel() override {
    std::string session = session_id();
    if (session.empty()) return;
    // Ends the session on the server (best effort, briefly).
    llm::HttpRequest request{.method = "DELETE", .url = config_.url, .headers = BaseHeaders(), .body = ""};
    llm::HttpOptions opts{.connect_timeout = milliseconds(2000), .idle_timeout = milliseconds(2000),
                          .total_timeout = milliseconds(3000)};
    auto response = http_->Send(request, opts, nullptr);
    if (response.ok()) (void)llm::ReadAll(**response, 4096);
  }

  void SetProtocolVersion(const std::string& version) override {
    std::lock_guard lock(mu_);
    protocol_version_ = version;
  }

  bool TakeSessionExpired() override { return session_expired_.exchange(false); }

  Result<Json> Call(const std::string& method, Json params, milliseconds timeout, const Canceller* cancel,
                    bool cancellable) override {
    if (cancel != nullptr && cancel->cancelled()) return Status::Cancelled(method + " was cancelled");
    int64_t id;
    {
      std::lock_guard lock(mu_);
      id = next_id_++;
    }
    if (method == "initialize") {
      std::lock_guard lock(mu_);
      session_id_.clear();  // A new session: the server names it in its answer.
    }
    Json request{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
    Result<Json> answer = Post(request, method, id, Clock::now() + timeout, timeout, cancellable ? cancel : nullptr);
    if (!answer.ok()) {
      StatusCode code = answer.status().code();
      if (cancellable && (code == StatusCode::kCancelled || code == StatusCode::kDeadlineExceeded)) {
        (void)Post(Json{{"jsonrpc", "2.0"},
                        {"method", "notifications/cancelled"},
                        {"params", {{"requestId", id},
                                    {"reason", code == StatusCode::kCancelled ? "cancelled by the client" : "timed out"}}}},
                   "notifications/cancelled", std::nullopt, Clock::now() + milliseconds(2000), milliseconds(2000),
                   nullptr);
      }
      return answer.status();
    }
    return ResultOf(*answer, method);
  }

  Status Notify(const std::string& method, Json params) override {
    Json message{{"jsonrpc", "2.0"}, {"method", method}};
    if (!params.is_null()) message["params"] = std::move(params);
    return Post(message, method, std::nullopt, Clock::now() + milliseconds(10'000), milliseconds(10'000), nullptr)
        .status();
  }

 private:
  std::string session_id() {
    std::lock_guard lock(mu_);
    return session_id_;
  }

  llm::HttpHeaders BaseHeaders() {
    llm::HttpHeaders headers = config_.headers;
    std::lock_guard lock(mu_);
    if (!session_id_.empty()) headers.emplace_back("Mcp-Session-Id", session_id_);
    if (!protocol_version_.empty()) headers.emplace_back("MCP-Protocol-Version", protocol_version_);
    return headers;
  }

  // A session id is visible ASCII (0x21-0x7E); anything else is not echoed back as a header.
  static bool ValidSessionId(std::string_view id) {
    if (id.empty() || id.size() > 1024) return false;
    for (char c : id) {
      if (c < 0x21 || c > 0x7E) return false;
    }
    return true;
  }

  static llm::HttpOptions Options(Clock::time_point deadline, milliseconds timeout) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    left = std::max(left, milliseconds(1));
    return {.connect_timeout = std::min(left, milliseconds(10'000)), .idle_timeout = std::min(left, timeout),
            .total_timeout = left};
  }

  // POSTs `message`; for a request (`id` set) returns the JSON-RPC answer carrying that id, for a
  // notification an empty object once the server accepted it.
  Result<Json> Post(const Json& message, const std::string& method, std::optional<int64_t> id,
                    Clock::time_point deadline, milliseconds timeout, const Canceller* cancel) {
    llm::HttpHeaders headers = BaseHeaders();
    headers.emplace_back("Content-Type", "application/json");
    headers.emplace_back("Accept", "application/json, text/event-stream");
    llm::HttpRequest request{.method = "POST", .url = config_.url, .headers = std::move(headers), .body = Dump(message)};
    auto sent = http_->Send(request, Options(deadline, timeout), cancel);
    if (!sent.ok()) return Transport(sent.status(), method, timeout);
    llm::HttpResponse& response = **sent;
    int status = response.status();
    if (std::string session(response.header("Mcp-Session-Id")); !session.empty() && ValidSessionId(session)) {
      std::lock_guard lock(mu_);
      session_id_ = session;
    }
    if (status == 404 && !session_id().empty() && method != "initialize") {
      session_expired_ = true;
      return Status::Unavailable(method + ": the server no longer knows this session (HTTP 404)");
    }
    if (status < 200 || status >= 300) {
      auto body = llm::ReadAll(response, 4096);
      std::string text = body.ok() ? Snippet(*body) : "";
      std::string what = method + ": HTTP " + std::to_string(status) + (text.empty() ? "" : ": " + text);
      if (status == 401 || status == 403) return Status::PermissionDenied(what);
      if (status == 400 || status == 422) return Status::InvalidArgument(what);
      return Status::Unavailable(what);
    }
    if (!id) return Json::object();  // 202 Accepted (or any 2xx) for a notification.
    std::string type = AsciiLower(response.header("Content-Type"));
    if (type.find("text/event-stream") != std::string::npos) {
      return ReadStream(response, method, *id, deadline, timeout, cancel);
    }
    auto body = llm::ReadAll(response, options_.max_message_bytes + 1);
    if (!body.ok()) return Transport(body.status(), method, timeout);
    if (body->size() > options_.max_message_bytes) {
      return Status::ResourceExhausted(method + ": the answer exceeds " + std::to_string(options_.max_message_bytes) +
                                       " bytes");
    }
    if (body->empty()) return Status::Unavailable(method + ": HTTP " + std::to_string(status) + " with an empty body");
    Json parsed = ParseJson(*body);
    if (parsed.is_discarded()) return Status::Unavailable(method + ": the answer is not JSON: " + Snippet(*body));
    // A batch (2025-03-26) may carry our answer among others.
    if (parsed.is_array()) {
      for (Json& m : parsed) {
        if (IsAnswerTo(m, *id)) return std::move(m);
      }
    } else if (IsAnswerTo(parsed, *id)) {
      return parsed;
    }
    return Status::Unavailable(method + ": the answer carries no response to request " + std::to_string(*id) + ": " +
                               Snippet(*body));
  }

  static bool IsAnswerTo(const Json& m, int64_t id) {
    const Json* got = json::Field(m, "id");
    return got != nullptr && got->is_number_integer() && got->get<int64_t>() == id &&
           json::Field(m, "method") == nullptr;
  }

  // Reads events until the one answering `id`; answers the server's own requests on the way. A server may
  // end the stream early once it has named an event (2025-11-25): the rest is then fetched with a GET
  // carrying Last-Event-ID, after the delay it asked for, until the answer or the deadline.
  Result<Json> ReadStream(llm::HttpResponse& first, const std::string& method, int64_t id, Clock::time_point deadline,
                          milliseconds timeout, const Canceller* cancel) {
    std::unique_ptr<llm::HttpResponse> resumed;
    llm::HttpResponse* response = &first;
    std::optional<Json> answer;
    std::string last_event_id;
    std::optional<int64_t> retry_ms;
    size_t event_bytes = 0;
    for (int attempt = 0;; ++attempt) {
      llm::SseParser parser;
      std::vector<Json> replies;  // Answers owed to the server's own requests met in the stream.
      std::string problem;
      size_t pending = 0;  // Bytes since the last complete event: bounded, or an endless event eats memory.
      auto on_event = [&](const llm::SseEvent& event) {
        pending = 0;
        if (!event.last_event_id.empty()) last_event_id = event.last_event_id;
        if (event.retry_ms) retry_ms = event.retry_ms;
        if (answer || event.data.empty()) return;
        Json m = ParseJson(event.data);
        if (m.is_discarded() || !m.is_object()) return;  // Not a JSON-RPC message: ignored.
        if (IsAnswerTo(m, id)) {
          answer = std::move(m);
        } else if (json::Field(m, "method") != nullptr && replies.size() < 8) {
          if (auto reply = AnswerServerRequest(m)) replies.push_back(std::move(*reply));
        }
      };
      std::string chunk;
      while (!answer && problem.empty()) {
        auto more = response->Read(&chunk);
        if (!more.ok()) return Transport(more.status(), method, timeout);
        if (!*more) break;
        event_bytes += chunk.size();
        pending += chunk.size();
        parser.Feed(chunk, on_event);
        if (pending > options_.max_message_bytes) {
          problem = "an event exceeds " + std::to_string(options_.max_message_bytes) + " bytes";
        }
        FlushReplies(&replies, deadline);
      }
      if (!answer && problem.empty()) parser.Finish(on_event, /*dispatch_incomplete=*/true);
      FlushReplies(&replies, deadline);
      if (!problem.empty()) return Status::ResourceExhausted(method + ": " + problem);
      if (answer) return std::move(*answer);
      if (last_event_id.empty() || attempt >= 100 || Clock::now() >= deadline) break;
      // Resume (SEP-1699 polling): wait as asked, within the deadline, then GET from the last event.
      auto wait = milliseconds(std::clamp<int64_t>(retry_ms.value_or(1000), 0, 30'000));
      if (Clock::now() + wait >= deadline) break;
      if (cancel != nullptr ? cancel->SleepFor(wait) : (std::this_thread::sleep_for(wait), false)) {
        return Status::Cancelled(method + " was cancelled");
      }
      llm::HttpHeaders headers = BaseHeaders();
      headers.emplace_back("Accept", "text/event-stream");
      headers.emplace_back("Last-Event-ID", last_event_id);
      auto sent = http_->Send({.method = "GET", .url = config_.url, .headers = std::move(headers), .body = ""},
                              Options(deadline, timeout), cancel);
      if (!sent.ok()) return Transport(sent.status(), method, timeout);
      if ((*sent)->status() < 200 || (*sent)->status() >= 300) {
        return Status::Unavailable(method + ": resuming the event stream from event " + Snippet(last_event_id, 60) +
                                   " failed: HTTP " + std::to_string((*sent)->status()));
      }
      resumed = std::move(*sent);
      response = resumed.get();
    }
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded(method + " got no answer within " + Seconds(timeout));
    }
    return Status::Unavailable(method + ": the event stream ended after " + std::to_string(event_bytes) +
                               " bytes without an answer");
  }

  void FlushReplies(std::vector<Json>* replies, Clock::time_point deadline) {
    for (const Json& r : *replies) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left <= milliseconds(0)) break;
      (void)Post(r, "reply", std::nullopt, Clock::now() + std::min(left, milliseconds(2000)), milliseconds(2000),
                 nullptr);
    }
    replies->clear();
  }

  Status Transport(const Status& s, const std::string& method, milliseconds timeout) {
    if (s.code() == StatusCode::kDeadlineExceeded) {
      return Status::DeadlineExceeded(method + " got no answer within " + Seconds(timeout) + " (" + s.message() + ")");
    }
    if (s.code() == StatusCode::kCancelled) return Status::Cancelled(method + " was cancelled");
    return Status(s.code(), method + ": " + s.message());
  }

  const McpServerConfig config_;
  const McpClientOptions options_;
  std::shared_ptr<llm::HttpTransport> http_;
  std::atomic<bool> session_expired_{false};
  std::mutex mu_;
  std::string session_id_;        // Guarded by mu_.
  std::string protocol_version_;  // Guarded by mu_.
  int64_t next_id_ = 1;           // Guarded by mu_.
};

// ---- Tool results ----

std::string DataUrl(std::string_view mime, std::string_view data) {
  return "data:" + std::string(mime) + ";base64," + std::string(data);
}

bool IsBase64(std::string_view data) {
  if (data.empty()) return false;
  for (char c : data) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=' || c == '\n' || c == '\r')) {
      return false;
    }
  }
  return true;
}

// Media a provider accepts inline; anything else is described in text, so that a tool result can never
// make every later request of the conversation fail.
bool AcceptedMedia(MediaKind kind, std::string_view mime) {
  static constexpr std::string_view kImages[] = {"image/png", "image/jpeg", "image/gif", "image/webp"};
  static constexpr std::string_view kAudio[] = {"audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3"};
  for (std::string_view m : kind == MediaKind::kImage ? std::span<const std::string_view>(kImages)
                                                      : std::span<const std::string_view>(kAudio)) {
    if (mime == m) return true;
  }
  return false;
}

ContentPart Media(MediaKind kind, const std::string& mime, const std::string& data, std::string_view what) {
  std::string lower = AsciiLower(mime);
  if (AcceptedMedia(kind, lower) && IsBase64(data)) return MediaPart{kind, DataUrl(lower, data), std::nullopt};
  return TextPart{"[" + std::string(what) + " (" + (mime.empty() ? std::string("no type") : Snippet(mime, 60)) + ", " +
                  std::to_string(data.size() * 3 / 4) + " bytes) not shown: " +
                  (IsBase64(data) ? "a type models do not take" : "its data is not base64") + "]"};
}

// Converts one content block of a tools/call result into a message part.
ContentPart ConvertBlock(const Json& block) {
  std::string type = json::StringOr(block, "type");
  if (type == "text") return TextPart{json::StringOr(block, "text")};
  if (type == "image" || type == "audio") {
    return Media(type == "image" ? MediaKind::kImage : MediaKind::kAudio, json::StringOr(block, "mimeType"),
                 json::StringOr(block, "data"), type);
  }
  if (type == "resource") {
    const Json* resource = json::Field(block, "resource");
    std::string uri = resource ? json::StringOr(*resource, "uri") : "";
    std::string mime = resource ? json::StringOr(*resource, "mimeType") : "";
    if (resource != nullptr && json::Field(*resource, "text") != nullptr) {
      return TextPart{json::StringOr(*resource, "text")};
    }
    std::string blob = resource ? json::StringOr(*resource, "blob") : "";
    std::string lower = AsciiLower(mime);
    if (lower.rfind("image/", 0) == 0) return Media(MediaKind::kImage, mime, blob, "resource " + uri);
    if (lower.rfind("audio/", 0) == 0) return Media(MediaKind::kAudio, mime, blob, "resource " + uri);
    return TextPart{"[resource " + uri + (mime.empty() ? "" : " (" + mime + ")") + ": " +
                    std::to_string(blob.size() * 3 / 4) + " bytes of binary content]"};
  }
  if (type == "resource_link") {
    std::string text = "[resource link: " + json::StringOr(block, "uri");
    if (std::string name = json::StringOr(block, "name"); !name.empty()) text += " (" + name + ")";
    if (std::string d = json::StringOr(block, "description"); !d.empty()) text += " — " + d;
    return TextPart{text + "]"};
  }
  return TextPart{Dump(block)};  // A block type of a newer revision: the model still sees it.
}

Result<ToolOutput> ConvertCallResult(const Json& result) {
  if (!result.is_object()) {
    return Status::Unavailable("tools/call: the result is " + std::string(json::TypeName(result)) + ", not an object");
  }
  ToolOutput out;
  out.is_error = json::BoolOr(result, "isError", false);
  const Json* content = json::Field(result, "content");
  if (content != nullptr && !content->is_null() && !content->is_array()) {
    return Status::Unavailable("tools/call: \"content\" is " + std::string(json::TypeName(*content)) + ", not an array");
  }
  if (content != nullptr && content->is_array()) {
    for (const Json& block : *content) out.content.push_back(ConvertBlock(block));
  }
  if (out.content.empty()) {
    if (const Json* structured = json::Field(result, "structuredContent")) {
      out.content.push_back(TextPart{Dump(*structured)});
    } else {
      out.content.push_back(TextPart{"(the tool returned no content)"});
    }
  }
  return out;
}

bool ProviderSafeName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

// A name every provider accepts (^[a-zA-Z0-9_-]{1,64}$).
std::string SafeName(std::string_view name) {
  std::string out;
  for (char c : name) out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_');
  if (out.empty()) out = "tool";
  if (out.size() > 64) out.resize(64);
  return out;
}

class McpTool final : public Tool {
 public:
  McpTool(std::shared_ptr<McpClient> client, std::string remote_name, llm::ToolDeclaration declaration)
      : client_(std::move(client)), remote_name_(std::move(remote_name)), declaration_(std::move(declaration)) {}

  const llm::ToolDeclaration& declaration() const override { return declaration_; }

  ToolOutput Call(std::string_view arguments, const Canceller& cancel) override {
    auto out = client_->CallTool(remote_name_, arguments, &cancel);
    if (!out.ok()) return ToolOutput::Error("Error: " + out.status().message());
    return std::move(*out);
  }

 private:
  std::shared_ptr<McpClient> client_;
  std::string remote_name_;
  llm::ToolDeclaration declaration_;
};

Result<std::vector<std::pair<std::string, std::string>>> StringMap(const Json& j, std::string_view where) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!j.is_object()) {
    return Status::InvalidArgument(std::string(where) + " must be an object of strings, not " + std::string(json::TypeName(j)));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) {
      return Status::InvalidArgument(std::string(where) + "." + it.key() + " must be a string, not " +
                                     std::string(json::TypeName(it.value())));
    }
    out.emplace_back(it.key(), it.value().get<std::string>());
  }
  return out;
}

}  // namespace

Result<std::vector<McpServerConfig>> ParseMcpServers(std::string_view text, std::string_view where) {
  Json root = ParseJson(text);
  std::string w(where);
  if (root.is_discarded()) return Status::InvalidArgument(w + ": MCP configuration is not valid JSON");
  if (!root.is_object()) {
    return Status::InvalidArgument(w + ": MCP configuration must be an object, not " + std::string(json::TypeName(root)));
  }
  const Json* servers = &root;
  if (const Json* inner = json::Field(root, "mcpServers")) {
    if (!inner->is_object()) {
      return Status::InvalidArgument(w + ": \"mcpServers\" must be an object, not " + std::string(json::TypeName(*inner)));
    }
    servers = inner;
    w += ": mcpServers";
  }
  std::vector<McpServerConfig> out;
  for (auto it = servers->begin(); it != servers->end(); ++it) {
    std::string at = w + "." + it.key();
    const Json& s = it.value();
    if (!s.is_object()) return Status::InvalidArgument(at + " must be an object, not " + std::string(json::TypeName(s)));
    McpServerConfig c;
    c.name = it.key();
    if (c.name.empty()) return Status::InvalidArgument(w + ": a server has an empty name");
    auto string_member = [&](const char* key, std::string* target) -> Status {
      const Json* f = json::Field(s, key);
      if (f == nullptr || f->is_null()) return Status::Ok();
      if (!f->is_string()) {
        return Status::InvalidArgument(at + "." + key + " must be a string, not " + std::string(json::TypeName(*f)));
      }
      *target = f->get<std::string>();
      return Status::Ok();
    };
    STRATA_RETURN_IF_ERROR(string_member("command", &c.command));
    STRATA_RETURN_IF_ERROR(string_member("url", &c.url));
    STRATA_RETURN_IF_ERROR(string_member("cwd", &c.cwd));
    // Clients spell the transport "transport" or "type".
    for (const char* key : {"transport", "type"}) {
      std::string transport;
      STRATA_RETURN_IF_ERROR(string_member(key, &transport));
      std::string lower = AsciiLower(transport);
      if (!lower.empty() && lower != "stdio" && lower != "http" && lower != "streamable-http" &&
          lower != "streamable_http" && lower != "streamablehttp") {
        return Status::InvalidArgument(at + "." + key + " " + Quote(transport) +
                                       " is not supported (stdio or http: Streamable HTTP; the older SSE transport is not)");
      }
    }
    if (c.command.empty() == c.url.empty()) {
      return Status::InvalidArgument(at + " needs exactly one of \"command\" (a program to start) and \"url\"");
    }
    if (!c.url.empty() && c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0) {
      return Status::InvalidArgument(at + ".url must be an http:// or https:// URL, not " + Quote(c.url));
    }
    if (const Json* args = json::Field(s, "args"); args != nullptr && !args->is_null()) {
      if (!args->is_array()) {
        return Status::InvalidArgument(at + ".args must be an array of strings, not " + std::string(json::TypeName(*args)));
      }
      for (size_t i = 0; i < args->size(); ++i) {
        if (!(*args)[i].is_string()) {
          return Status::InvalidArgument(at + ".args[" + std::to_string(i) + "] must be a string, not " +
                                         std::string(json::TypeName((*args)[i])));
        }
        c.args.push_back((*args)[i].get<std::string>());
      }
    }
    if (const Json* env = json::Field(s, "env"); env != nullptr && !env->is_null()) {
      STRATA_ASSIGN_OR_RETURN(c.env, StringMap(*env, at + ".env"));
    }
    if (const Json* headers = json::Field(s, "headers"); headers != nullptr && !headers->is_null()) {
      STRATA_ASSIGN_OR_RETURN(c.headers, StringMap(*headers, at + ".headers"));
    }
    if (const Json* timeout = json::Field(s, "timeout"); timeout != nullptr && !timeout->is_null()) {
      if (!timeout->is_number() || !(timeout->get<double>() >= 0.001) || timeout->get<double>() > 86400) {
        return Status::InvalidArgument(at + ".timeout must be a number of seconds in [0.001, 86400]");
      }
      c.timeout = milliseconds(static_cast<int64_t>(timeout->get<double>() * 1000));
    }
    out.push_back(std::move(c));
  }
  return out;
}

struct McpClient::Impl {
  McpServerConfig config;
  std::unique_ptr<Channel> channel;
  std::mutex mu;  // Guards the fields below (a lost HTTP session is re-initialized while other calls run).
  std::string server_name, server_version, protocol_version, instructions;
  bool has_tools = true;

  std::string Prefix() const { return "MCP server " + Quote(config.name) + ": "; }

  std::string Get(std::string Impl::*field) {
    std::lock_guard lock(mu);
    return this->*field;
  }

  Status Named(const Status& s) const { return Status(s.code(), Prefix() + s.message()); }

  // The handshake: initialize, then notifications/initialized.
  Status Initialize() {
    Json params{{"protocolVersion", std::string(kProtocolVersions[0])},
                {"capabilities", Json::object()},
                {"clientInfo", {{"name", "strata"}, {"version", std::string(kClientVersion)}}}};
    auto result = channel->Call("initialize", std::move(params), config.timeout, nullptr, /*cancellable=*/false);
    if (!result.ok()) return Named(result.status());
    if (!result->is_object()) {
      return Status::Unavailable(Prefix() + "initialize: the result is " + std::string(json::TypeName(*result)) +
                                 ", not an object");
    }
    std::string version = json::StringOr(*result, "protocolVersion");
    bool known = false;
    for (std::string_view v : kProtocolVersions) known = known || v == version;
    if (!known) {
      return Status::FailedPrecondition(Prefix() + "speaks protocol revision " +
                                        Quote(version.empty() ? "(none given)" : Snippet(version, 40)) +
                                        ", which this client does not (it speaks 2024-11-05 to 2025-11-25)");
    }
    {
      std::lock_guard lock(mu);
      protocol_version = version;
      if (const Json* info = json::Field(*result, "serverInfo")) {
        server_name = json::StringOr(*info, "name");
        server_version = json::StringOr(*info, "version");
      }
      instructions = json::StringOr(*result, "instructions");
      const Json* capabilities = json::Field(*result, "capabilities");
      has_tools = capabilities == nullptr || json::Field(*capabilities, "tools") != nullptr;
    }
    channel->SetProtocolVersion(version);
    Status notified = channel->Notify("notifications/initialized", Json());
    return notified.ok() ? notified : Named(notified);
  }

  // One request. A server that lost the HTTP session (restarted, say) is initialized again and asked once
  // more: it never saw the request, so asking again is safe.
  Result<Json> Call(const std::string& method, const Json& params, const Canceller* cancel) {
    auto result = channel->Call(method, params, config.timeout, cancel, /*cancellable=*/true);
    if (!result.ok() && channel->TakeSessionExpired()) {
      Status again = Initialize();
      if (!again.ok()) return Status(again.code(), again.message() + " (initializing again after the session was lost)");
      result = channel->Call(method, params, config.timeout, cancel, /*cancellable=*/true);
    }
    if (!result.ok()) return Named(result.status());
    return result;
  }
};

McpClient::McpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
McpClient::~McpClient() = default;

Result<std::unique_ptr<McpClient>> McpClient::Connect(const McpServerConfig& config, McpClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (config.name.empty()) return Status::InvalidArgument("MCP server: the name is empty");
  if (config.command.empty() == config.url.empty()) {
    return Status::InvalidArgument(impl->Prefix() + "needs exactly one of a command and a URL");
  }
  if (config.timeout.count() <= 0) return Status::InvalidArgument(impl->Prefix() + "the timeout must be positive");
  if (!config.url.empty() && config.url.rfind("http://", 0) != 0 && config.url.rfind("https://", 0) != 0) {
    return Status::InvalidArgument(impl->Prefix() + "the URL must be http:// or https://, not " + Quote(Snippet(config.url)));
  }
  if (!config.command.empty()) {
    auto channel = StdioChannel::Start(config, options);
    if (!channel.ok()) return impl->Named(channel.status());
    impl->channel = std::move(*channel);
  } else {
    impl->channel = std::make_unique<HttpChannel>(config, options);
  }
  STRATA_RETURN_IF_ERROR(impl->Initialize());
  return std::unique_ptr<McpClient>(new McpClient(std::move(impl)));
}

const std::string& McpClient::name() const { return impl_->config.name; }
std::string McpClient::server_name() const { return impl_->Get(&Impl::server_name); }
std::string McpClient::server_version() const { return impl_->Get(&Impl::server_version); }
std::string McpClient::protocol_version() const { return impl_->Get(&Impl::protocol_version); }
std::string McpClient::instructions() const { return impl_->Get(&Impl::instructions); }

Result<std::vector<McpToolInfo>> McpClient::ListTools(const Canceller* cancel, std::vector<std::string>* warnings) {
  std::vector<McpToolInfo> out;
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->has_tools) return out;  // It declared no tools capability: nothing to ask for.
  }
  std::string cursor;
  for (int page = 0; page < 1000; ++page) {
    Json params = Json::object();
    if (!cursor.empty()) params["cursor"] = cursor;
    STRATA_ASSIGN_OR_RETURN(Json result, impl_->Call("tools/list", std::move(params), cancel));
    const Json* tools = json::Field(result, "tools");
    if (tools == nullptr || !tools->is_array()) {
      return Status::Unavailable(impl_->Prefix() + "tools/list: \"tools\" is " +
                                 (tools ? std::string(json::TypeName(*tools)) : std::string("missing")) +
                                 ", not an array");
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      McpToolInfo info;
      info.name = json::StringOr(t, "name");
      if (info.name.empty()) {  // One bad entry does not cost the others.
        if (warnings != nullptr) warnings->push_back("tools/list: tools[" + std::to_string(i) + "] has no name; left out");
        continue;
      }
      if (out.size() == kMaxTools) {
        return Status::ResourceExhausted(impl_->Prefix() + "tools/list: more than " + std::to_string(kMaxTools) + " tools");
      }
      info.title = json::StringOr(t, "title");
      info.description = json::StringOr(t, "description");
      const Json* schema = json::Field(t, "inputSchema");
      info.input_schema = schema != nullptr && schema->is_object() ? Dump(*schema) : R"({"type":"object"})";
      out.push_back(std::move(info));
    }
    cursor = json::StringOr(result, "nextCursor");
    if (cursor.empty()) return out;
  }
  return Status::Unavailable(impl_->Prefix() + "tools/list: more than 1000 pages");
}

Result<ToolOutput> McpClient::CallTool(std::string_view tool, std::string_view arguments, const Canceller* cancel) {
  Json args = arguments.empty() ? Json::object() : ParseJson(arguments);
  if (args.is_discarded() || !args.is_object()) {
    return Status::InvalidArgument(impl_->Prefix() + "the arguments of " + Quote(tool) + " must be a JSON object");
  }
  STRATA_ASSIGN_OR_RETURN(Json result,
                          impl_->Call("tools/call", Json{{"name", std::string(tool)}, {"arguments", std::move(args)}},
                                      cancel));
  auto out = ConvertCallResult(result);
  if (!out.ok()) return impl_->Named(out.status());
  return out;
}

Result<std::vector<std::string>> AddMcpTools(std::shared_ptr<McpClient> client, Toolset* toolset,
                                             std::vector<std::string>* warnings) {
  std::vector<std::string> listing;
  STRATA_ASSIGN_OR_RETURN(std::vector<McpToolInfo> tools, client->ListTools(nullptr, &listing));
  std::vector<std::string> added;
  auto warn = [&](std::string text) {
    if (warnings != nullptr) warnings->push_back("MCP server " + Quote(client->name()) + ": " + std::move(text));
  };
  for (std::string& w : listing) warn(std::move(w));
  for (McpToolInfo& info : tools) {
    std::string name = SafeName(info.name);
    if (toolset->Find(name) != nullptr) name = SafeName(client->name() + "__" + info.name);
    if (toolset->Find(name) != nullptr) {
      warn("tool " + Quote(Snippet(info.name, 80)) + " left out: the name " + Quote(name) + " is taken");
      continue;
    }
    if (name != info.name) {
      warn("tool " + Quote(Snippet(info.name, 80)) + " is offered to the model as " + Quote(name) +
           (ProviderSafeName(info.name) ? " (the name was taken)" : " (providers accept only [A-Za-z0-9_-], 64 at most)"));
    }
    std::string description = info.description.empty() ? info.title : info.description;
    llm::ToolDeclaration declaration{name, description, info.input_schema};
    Status s = toolset->Add(std::make_shared<McpTool>(client, info.name, std::move(declaration)));
    if (!s.ok()) {
      warn("tool " + Quote(Snippet(info.name, 80)) + " left out: " + s.message());
      continue;
    }
    added.push_back(name);
  }
  return added;
}

}  // namespace strata::tools
