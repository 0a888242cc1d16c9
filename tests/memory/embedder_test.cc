// Embedders: the local hashed one, and the HTTP ones against a loopback server
// speaking the OpenAI and Gemini embedding wire formats (batching, index order,
// retries, malformed replies).
#include "strata/memory/embedder.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "llm/loopback_server.h"
#include "test_util.h"

namespace strata::memory {
namespace {

using Json = nlohmann::json;

// Serves embeddings whose first component is the text's length; counts requests
// and batch sizes.
class EmbeddingServer {
 public:
  EmbeddingServer() : http_([this](const httplib::Request &req, httplib::Response &res) { Handle(req, res); }) {}
  std::string url(const std::string &path) const { return http_.url(path); }

  std::atomic<int> requests{0};
  std::atomic<int> largest_batch{0};
  std::atomic<int> fail_first{0};  // Answer this many requests with 429 first.
  std::atomic<bool> malformed{false};
  // When set, the reply's body as it is (set by the test's thread, read by the server's).
  void SetRawReply(std::string body) {
    std::lock_guard lock(raw_mu_);
    raw_reply_ = std::move(body);
  }
  std::vector<Json> bodies;

 private:
  static std::vector<float> VectorFor(const std::string &text) {
    return {static_cast<float>(text.size()), 1.0f, 0.0f, 2.0f};
  }
  void Handle(const httplib::Request &req, httplib::Response &res) {
    ++requests;
    Json body = Json::parse(req.body);
    bodies.push_back(body);
    if (fail_first > 0) {
      --fail_first;
      res.status = 429;
      res.set_header("Retry-After", "0");
      res.set_content(R"({"error":{"message":"slow down"}})", "application/json");
      return;
    }
    if (malformed) {
      res.set_content(R"({"data": "nope"})", "application/json");
      return;
    }
    {
      std::lock_guard lock(raw_mu_);
      if (!raw_reply_.empty()) {
        res.set_content(raw_reply_, "application/json");
        return;
      }
    }
    Json out;
    if (req.path.find(":batchEmbedContents") != std::string::npos) {
      largest_batch = std::max<int>(largest_batch, static_cast<int>(body["requests"].size()));
      for (const Json &r : body["requests"]) {
        out["embeddings"].push_back({{"values", VectorFor(r["content"]["parts"][0]["text"].get<std::string>())}});
      }
    } else {
      const Json &input = body["input"];
      largest_batch = std::max<int>(largest_batch, static_cast<int>(input.size()));
      // Answer in reverse order: clients must place vectors by "index".
      for (size_t i = input.size(); i-- > 0;) {
        out["data"].push_back({{"index", i}, {"embedding", VectorFor(input[i].get<std::string>())}});
      }
    }
    res.set_content(out.dump(), "application/json");
  }

  std::mutex raw_mu_;
  std::string raw_reply_;  // Guarded by raw_mu_.
  testing::HttpTestServer http_;  // Last: stops before the counters its handler touches go away.
};

TEST(LocalEmbedder, SimilarWordingIsCloserThanUnrelatedText) {
  auto e = NewLocalHashedEmbedder(256);
  std::vector<std::string> texts = {"The user prefers dark mode in the editor", "User prefers a dark editor theme",
                                    "Quarterly revenue grew eleven percent", ""};
  auto v = e->Embed(texts);
  ASSERT_OK(v);
  EXPECT_GT(Dot((*v)[0], (*v)[1]), Dot((*v)[0], (*v)[2]) + 0.2f);
  EXPECT_NEAR(Dot((*v)[0], (*v)[0]), 1.0f, 1e-5);
  for (float x : (*v)[3]) EXPECT_EQ(x, 0.0f);  // Nothing to hash: the zero vector.
  // Deterministic across calls and instances (stored vectors depend on it).
  auto again = NewLocalHashedEmbedder(256)->Embed(texts);
  EXPECT_EQ((*again)[0], (*v)[0]);
  EXPECT_EQ(e->model_id(), "local-hash-v1-256");
}

TEST(HttpEmbedder, OpenAIFormatBatchesAndPlacesVectorsByIndex) {
  EmbeddingServer server;
  auto e = NewHttpEmbedder(
      {.model = "text-embedding-3-small", .base_url = server.url("/v1"), .api_key = "k", .max_batch = 3});
  ASSERT_OK(e);
  std::vector<std::string> texts = {"a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg"};
  auto v = (*e)->Embed(texts);
  ASSERT_OK(v);
  ASSERT_EQ(v->size(), texts.size());
  EXPECT_EQ(server.requests, 3);
  EXPECT_EQ(server.largest_batch, 3);
  // Normalised (n, 1, 0, 2): the ratio of the first two components is the text
  // length.
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_NEAR((*v)[i][0] / (*v)[i][1], static_cast<float>(i + 1), 1e-4);
  EXPECT_EQ((*e)->dimension(), 4);
  EXPECT_EQ(server.bodies[0]["model"], "text-embedding-3-small");
  EXPECT_EQ(server.bodies[0]["encoding_format"], "float");
}

TEST(HttpEmbedder, GeminiFormat) {
  EmbeddingServer server;
  auto e = NewHttpEmbedder({.kind = EmbedderKind::kGemini,
                            .model = "gemini-embedding-001",
                            .base_url = server.url("/v1beta"),
                            .dimension = 4});
  ASSERT_OK(e);
  std::vector<std::string> texts = {"xy", "xyz"};
  auto v = (*e)->Embed(texts);
  ASSERT_OK(v);
  EXPECT_NEAR((*v)[1][0] / (*v)[1][1], 3.0f, 1e-4);
  EXPECT_EQ(server.bodies[0]["requests"][0]["model"], "models/gemini-embedding-001");
  EXPECT_EQ(server.bodies[0]["requests"][0]["outputDimensionality"], 4);
}

TEST(HttpEmbedder, RetriesRateLimitsAndReportsBadReplies) {
  EmbeddingServer server;
  server.fail_first = 2;
  auto e = NewHttpEmbedder({.model = "m",
                            .base_url = server.url("/v1"),
                            .retry = {.max_attempts = 3, .initial_backoff = std::chrono::milliseconds(1)}});
  ASSERT_OK(e);
  std::vector<std::string> texts = {"hello"};
  ASSERT_OK((*e)->Embed(texts));
  EXPECT_EQ(server.requests, 3);
  server.malformed = true;
  auto bad = (*e)->Embed(texts);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected \"data\" with 1 items"), std::string::npos) << bad.status().message();
  // A component no float holds (it became inf, and the normalised vector NaN) is a bad reply, named.
  server.malformed = false;
  server.SetRawReply(R"({"data": [{"index": 0, "embedding": [0.5, 1e39, 0.1]}]})");
  auto huge = (*e)->Embed(texts);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("item 0 component 1 (1e+39) is not a finite float"), std::string::npos)
      << huge.status().message();
  server.SetRawReply("");
  EXPECT_EQ(NewHttpEmbedder({.model = "m", .base_url = "ftp://x"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbedderFromSpec("bogus:x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbedderFromSpec("local:8").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*EmbedderFromSpec("local:64"))->dimension(), 64);
}

}  // namespace
}  // namespace strata::memory
