// A driver for fuzz targets built without libFuzzer: runs every seed file, then `iterations` random
// mutations of them (deterministic seed), so the targets' invariants are checked in every test run.
// Usage: <target>_replay CORPUS_DIR [ITERATIONS]   (STRATA_FUZZ_REPLAY_ITERATIONS overrides ITERATIONS)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Mutate(std::string s, const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  static const char* kTokens[] = {"\n", "\"", "{", "}", "[", "]", ",", ":", "null", "\\u00e9", "\xe4\xb8",
                                  "\"role\":\"_checkpoint\"", "\"type\":\"text\"", "\"tool_calls\":[", "\xff",
                                  "'s", "  ", "\r\n", "\xe4\xbd\xa0", "\xf0\x9f\x98\x80", "\xcc\x81", "123"};
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits; ++i) {
    size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 6) {
      case 0: if (!s.empty() && pos < s.size()) s[pos] = static_cast<char>(s[pos] ^ (1u << (rng() % 8))); break;
      case 1: s.resize(pos); break;
      case 2: if (pos < s.size()) s.erase(pos, 1 + rng() % 8); break;
      case 3: s.insert(pos, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]); break;
      case 4: { const std::string& other = seeds[rng() % seeds.size()]; s.insert(pos, other.substr(0, rng() % (other.size() + 1))); break; }
      case 5: s.insert(pos, 1, static_cast<char>(rng() % 256)); break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [ITERATIONS]\n", argv[0]);
    return 2;
  }
  long iterations = argc > 2 ? std::stol(argv[2]) : 10000;
  if (const char* env = std::getenv("STRATA_FUZZ_REPLAY_ITERATIONS")) iterations = std::stol(env);
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    seeds.push_back(ss.str());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds in %s\n", argv[1]);
    return 2;
  }
  for (const std::string& seed : seeds) Run(seed);
  std::mt19937_64 rng(20261122);
  for (long i = 0; i < iterations; ++i) Run(Mutate(seeds[rng() % seeds.size()], seeds, rng));
  std::printf("%zu seeds and %ld mutations ran without a failed invariant\n", seeds.size(), iterations);
  return 0;
}
