// `strata serve`: the engine as an HTTP service (include/strata/server/server.h). SIGTERM and SIGINT stop
// it gracefully: no new connections, requests in flight answered, the phase-2 worker stopped between jobs.
#include <pthread.h>

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli_util.h"
#include "commands.h"
#include "provider_flags.h"
#include "strata/server/mcp.h"
#include "strata/server/server.h"

namespace strata::cli {
namespace {

struct ServeArgs {
  std::string data = "strata-data";
  std::string listen = "127.0.0.1:8420";
  std::string embedder;  // Empty: the store's own (EngineOptions::embedder).
  std::string root_key_file;
  std::vector<std::string> prompt_dirs;
  ProviderSettings provider;
  int threads = 64;
  int64_t max_body_mb = 8;
  int64_t window = 128'000;
  int64_t commit_after_tokens = 24'000;
  int64_t commit_after_turns = 40;
  int64_t commit_after_idle_s = 600;
  int64_t job_lease_s = 600;
  bool read_only = false;
};

Status RunServe(const ServeArgs& a) {
  // The signals are taken by a thread of their own (sigwait), never by a handler in the middle of a request.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::ServerOptions options{.listen = a.listen};
  options.http.threads = a.threads;
  options.max_streams = std::max(1, a.threads * 3 / 4);
  options.http.max_body_bytes = static_cast<size_t>(a.max_body_mb) << 20;
  options.upstream_context_tokens = a.window;
  if (!a.root_key_file.empty()) {
    std::ifstream in(a.root_key_file);
    if (!in) return Status::NotFound("cannot read the root key file " + a.root_key_file);
    std::getline(in, options.root_key);
    while (!options.root_key.empty() && (options.root_key.back() == '\r' || options.root_key.back() == ' ')) {
      options.root_key.pop_back();
    }
  }
  EngineOptions engine{.data_dir = a.data,
                       .embedder = a.embedder,
                       .provider = a.provider,
                       .on_model_retry = WarnRetry,
                       .prompt_dirs = a.prompt_dirs,
                       .read_only = a.read_only};
  engine.queue.lease = std::chrono::seconds(a.job_lease_s);
  engine.commit_policy = {.after_tokens = a.commit_after_tokens,
                          .after_turns = a.commit_after_turns,
                          .after_idle = std::chrono::seconds(a.commit_after_idle_s)};
  STRATA_ASSIGN_OR_RETURN(auto server, server::Server::Open(std::move(engine), options));
  STRATA_ASSIGN_OR_RETURN(int port, server->Bind());
  std::string host = a.listen.substr(0, a.listen.rfind(':'));
  std::string address = "http://" + (host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host) +
                        ":" + std::to_string(port) + "/";
  std::cerr << "strata: serving " << a.data << (a.read_only ? " read-only" : "") << " on " << address
            << " (health: /health, API: /api/v1)" << std::endl;
  std::cerr << "strata: the viewer: open " << address << " in a browser" << std::endl;
  std::thread watcher([&server, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::cerr << "strata: stopping (" << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << "): answering requests in flight"
              << std::endl;
    server->Shutdown();
  });
  Status served = server->Serve();
  // Serve returned (stopped by a signal, or failed): wake the watcher if it still waits.
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  std::cerr << "strata: stopped" << std::endl;
  return served;
}

struct McpArgs {
  std::string data = "strata-data";
  std::string user = "default";
  std::string embedder;  // Empty: the store's own (EngineOptions::embedder).
  std::vector<std::string> prompt_dirs;
  ProviderSettings provider;
  bool read_only = false;
};

// `strata mcp`: MCP over stdin/stdout, with a phase-2 worker for the commits its tools start.
Status RunMcp(const McpArgs& a) {
  STRATA_ASSIGN_OR_RETURN(auto engine, Engine::Open({.data_dir = a.data,
                                                      .embedder = a.embedder,
                                                      .provider = a.provider,
                                                      .on_model_retry = WarnRetry,
                                                      .prompt_dirs = a.prompt_dirs,
                                                      .read_only = a.read_only}));
  std::cerr << "strata: MCP on stdio for user " << a.user << " over " << a.data << (a.read_only ? " (read-only)" : "")
            << std::endl;
  Canceller stop;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread worker([&] {
    std::unique_lock lock(mu);
    while (!done && !a.read_only) {  // Read-only data runs no phase 2.
      lock.unlock();
      Result<WorkReport> report = engine->Work(&stop);
      if (!report.ok() && report.status().code() != StatusCode::kCancelled &&
          report.status().code() != StatusCode::kUnavailable) {
        std::cerr << "strata mcp: phase 2: " << report.status().ToString() << std::endl;
      }
      lock.lock();
      cv.wait_for(lock, std::chrono::seconds(2), [&] { return done; });
    }
  });
  Status served = server::ServeMcpStdio(engine.get(), {.user = a.user}, stdin, stdout);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  stop.Cancel();
  cv.notify_all();
  worker.join();
  return served;
}

}  // namespace

void AddMcpCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<McpArgs>();
  CLI::App* cmd = app.add_subcommand("mcp", "Serve the engine over MCP on stdio (for Claude Code, kimi-cli, Cursor ...)");
  cmd->add_option("--data", a->data, "Data directory or postgres:// URL (default ./strata-data)");
  cmd->add_option("--user", a->user, "Whose memories the tools reach (default: default)");
  cmd->add_flag("--read-only", a->read_only,
                "Only read the data (a read-only volume works): the tools that write are not offered");
  cmd->add_option("--embedder", a->embedder, kEmbedderHelp);
  cmd->add_option("--prompts", a->prompt_dirs, "Template directories that override the shipped ones (by id)");
  AddProviderFlags(cmd, &a->provider);
  cmd->callback([a, exit_code] {
    Status s = RunMcp(*a);
    *exit_code = s.ok() ? 0 : Fail(s);
  });
}

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the engine over HTTP: the API, keys, a phase-2 worker");
  cmd->add_option("--data", a->data, "Data directory or postgres:// URL (default ./strata-data)");
  cmd->add_option("--listen", a->listen, "HOST:PORT (default 127.0.0.1:8420; port 0 picks a free one)");
  cmd->add_option("--embedder", a->embedder, kEmbedderHelp);
  cmd->add_option("--root-key-file", a->root_key_file,
                  "File whose first line is the root key (default: $STRATA_ROOT_KEY; none: loopback only, no keys)");
  cmd->add_option("--prompts", a->prompt_dirs, "Template directories that override the shipped ones (by id)");
  cmd->add_option("--threads", a->threads, "Requests served at once (default 64; at most 3/4 of them streams)")->check(CLI::Range(2, 1024));
  cmd->add_option("--max-body-mb", a->max_body_mb, "Largest request body in MiB (default 8)")->check(CLI::Range(1, 1024));
  cmd->add_option("--window", a->window,
                  "The upstream model's context window in tokens, for sessions on the model endpoints (default 128000)")
      ->check(CLI::Range(int64_t{256}, int64_t{100'000'000}));
  cmd->add_option("--commit-after-tokens", a->commit_after_tokens,
                  "Commit a proxied session once its uncommitted messages reach this many tokens (default 24000; 0: never)")
      ->check(NonNegative());
  cmd->add_option("--commit-after-turns", a->commit_after_turns, "... or this many user turns (default 40; 0: never)")
      ->check(NonNegative());
  cmd->add_option("--commit-after-idle", a->commit_after_idle_s,
                  "... or once it has been idle this many seconds (default 600; 0: never)")
      ->check(NonNegative());
  cmd->add_option("--job-lease", a->job_lease_s,
                  "Seconds a phase-2 job stays claimed by this instance; then (it died) another takes it over "
                  "(default 600)")
      ->check(CLI::Range(int64_t{1}, int64_t{86'400}));
  cmd->add_flag("--read-only", a->read_only,
                "Only read the data (a read-only volume works): every change is refused, no phase 2 runs");
  AddProviderFlags(cmd, &a->provider);
  cmd->callback([a, exit_code] {
    Status s = RunServe(*a);
    *exit_code = s.ok() ? 0 : Fail(s);
  });
}

}  // namespace strata::cli
