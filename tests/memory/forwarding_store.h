// A ContextStore that passes every call to another one: a test derives from it and overrides the calls it
// counts or makes fail.
#ifndef STRATA_TESTS_MEMORY_FORWARDING_STORE_H_
#define STRATA_TESTS_MEMORY_FORWARDING_STORE_H_

#include "strata/memory/store.h"

namespace strata::testing {

class ForwardingStore : public memory::ContextStore {
 public:
  explicit ForwardingStore(memory::ContextStore& inner) : inner_(inner) {}

  Result<memory::Node> Stat(const memory::Uri& uri) override { return inner_.Stat(uri); }
  Result<std::vector<std::optional<memory::Node>>> StatMany(std::span<const memory::Uri> uris) override {
    return inner_.StatMany(uris);
  }
  Status Write(const memory::Uri& uri, std::string_view content, const memory::WriteOptions& options) override {
    return inner_.Write(uri, content, options);
  }
  Status WriteBatch(const std::vector<std::pair<memory::Uri, std::string>>& leaves,
                    const std::vector<memory::WriteOptions>& options) override {
    return inner_.WriteBatch(leaves, options);
  }
  Status Mkdir(const memory::Uri& uri, const memory::WriteOptions& options) override {
    return inner_.Mkdir(uri, options);
  }
  Result<std::string> Read(const memory::Uri& uri, memory::Level level) override { return inner_.Read(uri, level); }
  Result<std::vector<memory::Node>> List(const memory::Uri& dir, const memory::ListOptions& options) override {
    return inner_.List(dir, options);
  }
  Result<std::vector<memory::Node>> Glob(std::string_view pattern, const memory::Uri& under) override {
    return inner_.Glob(pattern, under);
  }
  Result<std::vector<memory::GrepMatch>> Grep(std::string_view needle, const memory::Uri& under, bool ignore_case,
                                              size_t limit) override {
    return inner_.Grep(needle, under, ignore_case, limit);
  }
  Status Move(const memory::Uri& from, const memory::Uri& to) override { return inner_.Move(from, to); }
  Result<int64_t> Remove(const memory::Uri& uri, bool recursive) override { return inner_.Remove(uri, recursive); }
  Status Link(const memory::Uri& from, const memory::Uri& to, std::string_view reason) override {
    return inner_.Link(from, to, reason);
  }
  Status Unlink(const memory::Uri& from, const memory::Uri& to) override { return inner_.Unlink(from, to); }
  Result<std::vector<memory::Relation>> Relations(const memory::Uri& uri) override { return inner_.Relations(uri); }
  Result<std::vector<memory::ScoredUri>> Lexical(std::string_view query, const memory::SearchFilter& filter,
                                                 size_t limit) override {
    return inner_.Lexical(query, filter, limit);
  }
  Result<std::vector<memory::ScoredUri>> VectorNeighbours(const memory::Vector& query,
                                                          const memory::SearchFilter& filter, size_t limit) override {
    return inner_.VectorNeighbours(query, filter, limit);
  }
  Result<std::vector<float>> Similarities(const memory::Vector& query, std::span<const memory::Uri> uris) override {
    return inner_.Similarities(query, uris);
  }
  Result<int64_t> Count(const memory::SearchFilter& filter, int64_t cap) override { return inner_.Count(filter, cap); }
  Result<std::vector<std::vector<memory::Neighbour>>> Neighbours(std::span<const memory::Uri> leaves, int span,
                                                                 const memory::SearchFilter& filter) override {
    return inner_.Neighbours(leaves, span, filter);
  }
  Result<std::vector<memory::Vector>> EmbedTexts(std::span<const std::string> texts) override {
    return inner_.EmbedTexts(texts);
  }
  std::shared_ptr<memory::Embedder> embedder() const override { return inner_.embedder(); }
  Result<std::vector<std::string>> Check() override { return inner_.Check(); }
  Status Reindex() override { return inner_.Reindex(); }
  Status Flush() override { return inner_.Flush(); }
  Result<Stats> GetStats() override { return inner_.GetStats(); }

 protected:
  memory::ContextStore& inner_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_MEMORY_FORWARDING_STORE_H_
