// Embedders: text → unit-length float vectors, behind one interface.
//
//   LocalHashedEmbedder   needs no network: signed feature hashing of word unigrams/bigrams and character
//                         trigrams. It measures shared wording, not meaning: "car" and "automobile" are unrelated
//                         to it. The default, so that retrieval works offline; configure a model for semantics.
//   OpenAI-compatible     POST {base_url}/embeddings (OpenAI, Ollama, vLLM, LM Studio, ...).
//   Gemini                POST {base_url}/models/{model}:batchEmbedContents.
//
// Callers (the store) batch texts up to max_batch() and cache vectors by a hash of (model_id, text);
// embedders themselves keep no cache. HTTP embedders retry like the chat providers (llm::RetryPolicy).
//
// Thread safety: Embed() may be called from several threads at once.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/llm/http.h"
#include "strata/llm/provider.h"
#include "strata/util/status.h"

namespace strata::memory {

using Vector = std::vector<float>;

class Embedder {
 public:
  virtual ~Embedder() = default;
  // Identifies the vector space: vectors from different model ids are never compared ("local-hash-v1-384",
  // "openai:text-embedding-3-small:1536").
  virtual std::string model_id() const = 0;
  virtual int dimension() const = 0;
  // The largest batch one Embed() call should receive.
  virtual size_t max_batch() const = 0;
  // Returns one unit-length vector of dimension() floats per text, in order.
  virtual Result<std::vector<Vector>> Embed(std::span<const std::string> texts) = 0;
};

// The offline default. `dimension` >= 16.
std::unique_ptr<Embedder> NewLocalHashedEmbedder(int dimension = 384);

enum class EmbedderKind { kOpenAI, kGemini };

struct EmbedderConfig {
  EmbedderKind kind = EmbedderKind::kOpenAI;
  std::string model;        // e.g. "text-embedding-3-small", "nomic-embed-text", "gemini-embedding-001".
  std::string base_url;     // e.g. "https://api.openai.com/v1", "http://localhost:11434/v1".
  std::string api_key;      // Bearer token (OpenAI) or x-goog-api-key (Gemini); may be empty for local servers.
  int dimension = 0;        // Requested output size (`dimensions` / `outputDimensionality`); 0 = the model's own,
                            // learned from the first response.
  size_t max_batch = 64;    // Texts per request.
  llm::HttpOptions http;
  llm::RetryPolicy retry;
  std::shared_ptr<llm::HttpTransport> transport;  // Defaults to llm::CurlTransport().
};

// Fails with kInvalidArgument when the model or base URL is missing.
Result<std::unique_ptr<Embedder>> NewHttpEmbedder(EmbedderConfig config);

// Parses "local", "local:DIM", "openai:MODEL", "ollama:MODEL", "gemini:MODEL" (keys from OPENAI_API_KEY /
// GEMINI_API_KEY, base URLs overridable with STRATA_EMBED_BASE_URL) into an embedder.
Result<std::unique_ptr<Embedder>> EmbedderFromSpec(std::string_view spec);

// Scales `v` to unit length (a zero vector stays zero).
void Normalize(Vector& v);
// Returns the dot product (cosine similarity for unit vectors).
float Dot(std::span<const float> a, std::span<const float> b);

}  // namespace strata::memory
