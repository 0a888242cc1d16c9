// The peer of the server benchmark (bench/run_server_bench.sh): a minimal cpp-httplib server, the same HTTP
// library and thread pool size as `strata serve`, whose handlers do nothing. It answers every GET and POST
// with a fixed JSON envelope (the transport's own limit), and POST /v1/chat/completions like an
// OpenAI-compatible upstream (a fixed completion, or six streamed chunks when the body asks for a stream),
// so it also serves as the fake upstream behind Strata's proxy.
//   strata_http_baseline PORT
#include <httplib.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: strata_http_baseline PORT\n"), 2;
  int port = std::atoi(argv[1]);
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(16); };
  server.set_tcp_nodelay(true);
  const std::string envelope = R"({"status":"ok","result":{}})";
  server.Get(".*", [&](const httplib::Request&, httplib::Response& res) { res.set_content(envelope, "application/json"); });
  server.Post("/v1/chat/completions", [](const httplib::Request& req, httplib::Response& res) {
    if (req.body.find("\"stream\":true") == std::string::npos) {
      res.set_content(R"({"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello there."}}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}})",
                      "application/json");
      return;
    }
    std::string body;
    auto chunk = [&](const std::string& delta, const char* finish) {
      body += R"(data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":)" +
              delta + R"(,"finish_reason":)" + finish + "}]}\n\n";
    };
    chunk(R"({"role":"assistant","content":""})", "null");
    for (const char* word : {"Hello", " there", ", how", " can I help?"}) chunk(std::string(R"({"content":")") + word + "\"}", "null");
    chunk("{}", R"("stop")");
    body += "data: [DONE]\n\n";
    res.set_content(body, "text/event-stream");
  });
  server.Post(".*", [&](const httplib::Request&, httplib::Response& res) { res.set_content(envelope, "application/json"); });
  if (!server.listen("127.0.0.1", port)) return std::fprintf(stderr, "cannot listen on %d\n", port), 1;
  return 0;
}
