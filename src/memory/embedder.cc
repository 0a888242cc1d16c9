#include "strata/memory/embedder.h"

#include "strata/json/checked.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "fts_text.h"
#include "strata/memory/hash.h"
#include "strata/llm/chat_error.h"

namespace strata::memory {

void Normalize(Vector& v) {
  double norm = 0;
  for (float x : v) norm += static_cast<double>(x) * x;
  if (norm <= 0) return;
  float inv = static_cast<float>(1.0 / std::sqrt(norm));
  for (float& x : v) x *= inv;
}

float Dot(std::span<const float> a, std::span<const float> b) {
  float sum = 0;
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

namespace {

const std::unordered_set<std::string_view>& StopWords() {
  static const std::unordered_set<std::string_view> kWords = {
      "a",    "an",   "the", "and",  "or",   "but",  "of",   "to",   "in",   "on",   "at",  "for", "with",
      "by",   "from", "is",  "are",  "was",  "were", "be",   "been", "it",   "its",  "this", "that", "as",
      "i",    "you",  "he",  "she",  "we",   "they", "my",   "your", "our",  "their", "do", "does", "did",
      "has",  "have", "had", "not",  "no",   "so",   "if",   "then", "than", "what", "which", "who", "how"};
  return kWords;
}

// Signed feature hashing of word unigrams (weight 1), word bigrams (0.6) and character trigrams of each
// word with boundary marks (0.25 each); term counts are damped (1 + ln tf); the result is normalised.
class LocalHashedEmbedder final : public Embedder {
 public:
  explicit LocalHashedEmbedder(int dimension) : dim_(dimension) {}
  std::string model_id() const override { return "local-hash-v1-" + std::to_string(dim_); }
  int dimension() const override { return dim_; }
  size_t max_batch() const override { return 256; }

  Result<std::vector<Vector>> Embed(std::span<const std::string> texts) override {
    std::vector<Vector> out;
    out.reserve(texts.size());
    for (const std::string& text : texts) out.push_back(EmbedOne(text));
    return out;
  }

 private:
  Vector EmbedOne(std::string_view text) const {
    std::vector<std::string> words;
    std::string word;
    auto flush = [&] {
      if (!word.empty() && !StopWords().contains(word)) words.push_back(word);
      word.clear();
    };
    for (size_t i = 0; i < text.size();) {
      char32_t cp = NextCodePoint(text, &i);
      if (cp < 0x80 && cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
      if (IsCjk(cp)) {
        flush();
        AppendUtf8(&word, cp);
        flush();
      } else if (IsWordChar(cp)) {
        AppendUtf8(&word, cp);
      } else {
        flush();
      }
    }
    flush();
    std::unordered_map<uint64_t, float> features;
    auto add = [&](std::string_view feature, uint64_t seed, float weight) {
      features[Hash64(feature, seed)] += weight;
    };
    for (size_t w = 0; w < words.size(); ++w) {
      add(words[w], 1, 1.0f);
      if (w + 1 < words.size()) add(words[w] + " " + words[w + 1], 2, 0.6f);
      std::string marked = "<" + words[w] + ">";
      if (marked.size() > 4) {
        for (size_t k = 0; k + 3 <= marked.size(); ++k) add(std::string_view(marked).substr(k, 3), 3, 0.25f);
      }
    }
    Vector v(static_cast<size_t>(dim_), 0.0f);
    for (const auto& [hash, weight] : features) {
      // The count is recovered from the weights' sum; damping keeps one repeated word from dominating.
      float value = std::log1p(weight);
      size_t slot = static_cast<size_t>(hash % static_cast<uint64_t>(dim_));
      v[slot] += (hash >> 63) != 0 ? -value : value;
    }
    Normalize(v);
    return v;
  }

  int dim_;
};

using Json = nlohmann::json;

class HttpEmbedder final : public Embedder {
 public:
  explicit HttpEmbedder(EmbedderConfig config) : config_(std::move(config)) {
    if (!config_.transport) config_.transport = llm::CurlTransport();
    while (!config_.base_url.empty() && config_.base_url.back() == '/') config_.base_url.pop_back();
    dim_ = config_.dimension;
  }

  std::string model_id() const override {
    std::lock_guard lock(mu_);
    return std::string(config_.kind == EmbedderKind::kGemini ? "gemini:" : "openai:") + config_.model + ":" +
           std::to_string(dim_);
  }
  int dimension() const override {
    std::lock_guard lock(mu_);
    return dim_;
  }
  size_t max_batch() const override { return std::max<size_t>(1, config_.max_batch); }

  Result<std::vector<Vector>> Embed(std::span<const std::string> texts) override {
    std::vector<Vector> out;
    for (size_t start = 0; start < texts.size(); start += max_batch()) {
      auto batch = texts.subspan(start, std::min(max_batch(), texts.size() - start));
      STRATA_ASSIGN_OR_RETURN(std::vector<Vector> vectors, EmbedBatch(batch));
      for (Vector& v : vectors) out.push_back(std::move(v));
    }
    return out;
  }

 private:
  Result<std::vector<Vector>> EmbedBatch(std::span<const std::string> texts) {
    llm::HttpRequest http{.method = "POST", .headers = {{"Content-Type", "application/json"}}};
    Json body;
    if (config_.kind == EmbedderKind::kGemini) {
      http.url = config_.base_url + "/models/" + config_.model + ":batchEmbedContents";
      if (!config_.api_key.empty()) http.headers.emplace_back("x-goog-api-key", config_.api_key);
      body["requests"] = Json::array();
      for (const std::string& t : texts) {
        Json r = {{"model", "models/" + config_.model}, {"content", {{"parts", {{{"text", t}}}}}}};
        if (config_.dimension > 0) r["outputDimensionality"] = config_.dimension;
        body["requests"].push_back(std::move(r));
      }
    } else {
      http.url = config_.base_url + "/embeddings";
      if (!config_.api_key.empty()) http.headers.emplace_back("Authorization", "Bearer " + config_.api_key);
      body = {{"model", config_.model}, {"input", texts}, {"encoding_format", "float"}};
      if (config_.dimension > 0) body["dimensions"] = config_.dimension;
    }
    http.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
    STRATA_ASSIGN_OR_RETURN(auto response,
                            llm::SendWithRetry(*config_.transport, http, config_.http, config_.retry, nullptr));
    STRATA_ASSIGN_OR_RETURN(std::string text, llm::ReadAll(*response, 256 << 20));
    return Decode(text, texts.size());
  }

  Result<std::vector<Vector>> Decode(const std::string& text, size_t expected) {
    auto bad = [&](std::string what) {
      return llm::InvalidResponseError("embeddings response from " + config_.base_url + ": " + what);
    };
    Json doc = json::ParseOrDiscard<Json>(text);
    if (doc.is_discarded()) return bad(json::DescribeSyntaxError(text));
    if (!doc.is_object()) return bad("not a JSON object");
    std::vector<Vector> out(expected);
    auto read_vector = [&](const Json& values, size_t index) -> Status {
      if (!values.is_array() || values.empty()) return bad("item " + std::to_string(index) + " has no vector");
      Vector v;
      v.reserve(values.size());
      for (const Json& x : values) {
        if (!x.is_number()) return bad("item " + std::to_string(index) + " has a non-number component");
        // A component no float holds became inf, and the normalised vector NaN: every ranking it entered
        // compared NaN scores.
        const double d = x.get<double>();
        if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
          return bad("item " + std::to_string(index) + " component " + std::to_string(v.size()) + " (" + x.dump() +
                     ") is not a finite float");
        }
        v.push_back(static_cast<float>(d));
      }
      Normalize(v);
      out[index] = std::move(v);
      return Status::Ok();
    };
    if (config_.kind == EmbedderKind::kGemini) {
      const Json* list = doc.contains("embeddings") ? &doc["embeddings"] : nullptr;
      if (list == nullptr || !list->is_array() || list->size() != expected) {
        return bad("expected \"embeddings\" with " + std::to_string(expected) + " items");
      }
      for (size_t i = 0; i < expected; ++i) {
        const Json* values = json::Field((*list)[i], "values");
        STRATA_RETURN_IF_ERROR(read_vector(values != nullptr ? *values : Json(), i));
      }
    } else {
      const Json* list = doc.contains("data") ? &doc["data"] : nullptr;
      if (list == nullptr || !list->is_array() || list->size() != expected) {
        return bad("expected \"data\" with " + std::to_string(expected) + " items");
      }
      for (size_t i = 0; i < expected; ++i) {
        const Json& item = (*list)[i];
        const Json* at = json::Field(item, "index");
        size_t index = at != nullptr && at->is_number_unsigned() ? at->get<size_t>() : i;
        if (index >= expected || !out[index].empty()) return bad("bad or repeated index " + std::to_string(index));
        const Json* embedding = json::Field(item, "embedding");
        STRATA_RETURN_IF_ERROR(read_vector(embedding != nullptr ? *embedding : Json(), index));
      }
    }
    std::lock_guard lock(mu_);
    for (const Vector& v : out) {
      if (dim_ == 0) dim_ = static_cast<int>(v.size());
      if (static_cast<int>(v.size()) != dim_) {
        return bad("vector of " + std::to_string(v.size()) + " dimensions, expected " + std::to_string(dim_));
      }
    }
    return out;
  }

  EmbedderConfig config_;
  mutable std::mutex mu_;
  int dim_ = 0;  // Guarded by mu_: learned from the first response when not configured.
};

}  // namespace

std::unique_ptr<Embedder> NewLocalHashedEmbedder(int dimension) {
  return std::make_unique<LocalHashedEmbedder>(std::max(16, dimension));
}

Result<std::unique_ptr<Embedder>> NewHttpEmbedder(EmbedderConfig config) {
  if (config.model.empty()) return Status::InvalidArgument("embedder: no model given");
  if (!config.base_url.starts_with("http://") && !config.base_url.starts_with("https://")) {
    return Status::InvalidArgument("embedder: base URL \"" + config.base_url + "\" must start with http:// or https://");
  }
  if (config.dimension < 0) return Status::InvalidArgument("embedder: negative dimension");
  return std::unique_ptr<Embedder>(new HttpEmbedder(std::move(config)));
}

Result<std::unique_ptr<Embedder>> EmbedderFromSpec(std::string_view spec) {
  std::string_view kind = spec.substr(0, spec.find(':'));
  std::string_view rest = spec.find(':') == std::string_view::npos ? "" : spec.substr(spec.find(':') + 1);
  auto env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr && *v != '\0' ? v : fallback);
  };
  if (kind == "local") {
    int dim = 384;
    if (!rest.empty()) {
      char* end = nullptr;
      std::string digits(rest);
      long v = std::strtol(digits.c_str(), &end, 10);
      if (end == digits.c_str() || *end != '\0' || v < 16 || v > 65536) {
        return Status::InvalidArgument("embedder spec \"" + std::string(spec) + "\": local:DIM needs 16..65536");
      }
      dim = static_cast<int>(v);
    }
    return NewLocalHashedEmbedder(dim);
  }
  EmbedderConfig config{.model = std::string(rest)};
  if (kind == "openai") {
    config.base_url = env("STRATA_EMBED_BASE_URL", "https://api.openai.com/v1");
    config.api_key = env("OPENAI_API_KEY", "");
  } else if (kind == "ollama") {
    config.base_url = env("STRATA_EMBED_BASE_URL", "http://localhost:11434/v1");
  } else if (kind == "gemini") {
    config.kind = EmbedderKind::kGemini;
    config.base_url = env("STRATA_EMBED_BASE_URL", "https://generativelanguage.googleapis.com/v1beta");
    config.api_key = env("GEMINI_API_KEY", "");
  } else {
    return Status::InvalidArgument("embedder spec \"" + std::string(spec) +
                                   "\": expected local[:DIM], openai:MODEL, ollama:MODEL or gemini:MODEL");
  }
  if (config.model.empty()) return Status::InvalidArgument("embedder spec \"" + std::string(spec) + "\": no model");
  return NewHttpEmbedder(std::move(config));
}

}  // namespace strata::memory
