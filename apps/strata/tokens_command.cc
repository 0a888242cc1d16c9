// `strata tokens encode|count|decode`: the tokenizer on files or stdin.
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli_util.h"
#include "commands.h"
#include "strata/json/json_writer.h"
#include "strata/tokenizer/encoding.h"
#include "strata/tokenizer/registry.h"

namespace strata::cli {
namespace {

struct TokensArgs {
  std::string encoding = "o200k_base";
  std::string input = "-";
  bool special = false;
  int threads = 0;  // 0: every core.

  tokenizer::Encoding::Parallel parallel() const {
    int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return {.threads = n};
  }
};

Result<std::string> ReadInput(const std::string& input) {
  if (input == "-") return ReadStdin();
  std::ifstream in(input, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + input);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <typename Fn>
int Run(const TokensArgs& args, Fn fn) {
  auto encoding = tokenizer::Encoding::Load(args.encoding);
  if (!encoding.ok()) return Fail(encoding.status());
  auto text = ReadInput(args.input);
  if (!text.ok()) return Fail(text.status());
  return fn(**encoding, *text);
}

}  // namespace

void AddTokensCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TokensArgs>();
  CLI::App* tokens = app.add_subcommand("tokens", "Tokenise text with tiktoken-compatible encodings");
  tokens->require_subcommand(1);
  // `count` also takes "chars" (kimi-cli's characters / 4), as every other front end's count does; it
  // neither encodes nor decodes.
  auto add = [&](const char* name, const char* help, bool counts = false) {
    CLI::App* sub = tokens->add_subcommand(name, help);
    std::vector<std::string> names = {"cl100k_base", "o200k_base"};
    if (counts) names.push_back("chars");
    sub->add_option("--encoding", args->encoding, counts ? "cl100k_base, o200k_base or chars" : "cl100k_base or o200k_base")
        ->check(CLI::IsMember(names))
        ->capture_default_str();
    sub->add_option("FILE", args->input, "Input file, or - for stdin (the default)");
    sub->add_option("--threads", args->threads,
                    "Threads for long inputs (cut at piece boundaries; the ids are the same); 0 = every core")
        ->check(CLI::Range(0, 256))
        ->capture_default_str();
    return sub;
  };
  CLI::App* encode = add("encode", "Print the token ids of the text as a JSON array (ordinary encoding)");
  encode->add_flag("--special", args->special, "Recognise special tokens such as <|endoftext|>");
  encode->callback([=] {
    *exit_code = Run(*args, [&](const tokenizer::Encoding& e, const std::string& text) {
      std::vector<tokenizer::Token> ids;
      if (args->special) {
        ids = e.EncodeWithSpecialTokens(text);
      } else {
        e.EncodeTo(text, &ids, args->parallel());
      }
      std::string out = "[";
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) out += ',';
        out += std::to_string(ids[i]);
      }
      out += "]\n";
      std::cout << out;
      return 0;
    });
  });
  // Without the vocabulary `count` prints characters / 4 with the warning the other front ends give (HTTP
  // and MCP carry it, Python warns); encode and decode have nothing to fall back on and fail.
  add("count", "Print the number of tokens of the text", /*counts=*/true)->callback([=] {
    auto text = ReadInput(args->input);
    if (!text.ok()) {
      *exit_code = Fail(text.status());
      return;
    }
    if (args->encoding != "chars") {
      auto encoding = tokenizer::EncodingFor(args->encoding);
      if (encoding.ok()) {
        std::cout << (*encoding)->Count(*text, args->parallel()) << "\n";
        *exit_code = 0;
        return;
      }
      if (encoding.status().code() != StatusCode::kUnavailable) {
        *exit_code = Fail(encoding.status());
        return;
      }
    }
    std::string warning;
    std::cout << tokenizer::CountText(args->encoding, *text, &warning) << "\n";
    if (!warning.empty()) Warn(warning);
    *exit_code = 0;
  });
  add("decode", "Read a JSON array of token ids and print the text")->callback([=] {
    *exit_code = Run(*args, [&](const tokenizer::Encoding& e, const std::string& text) {
      std::vector<tokenizer::Token> ids;
      size_t i = 0;
      auto skip = [&] { while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i; };
      skip();
      if (i >= text.size() || text[i] != '[') return Fail(Status::InvalidArgument("expected a JSON array of token ids at byte " + std::to_string(i)));
      ++i;
      skip();
      while (i < text.size() && text[i] != ']') {
        size_t start = i;
        uint64_t v = 0;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v < (1ull << 32)) v = v * 10 + static_cast<uint64_t>(text[i++] - '0');
        if (i == start || v >= (1ull << 32)) {
          return Fail(Status::InvalidArgument("expected a token id (non-negative integer) at byte " + std::to_string(start)));
        }
        ids.push_back(static_cast<tokenizer::Token>(v));
        skip();
        if (i < text.size() && text[i] == ',') {
          ++i;
          skip();
          if (i < text.size() && text[i] == ']') {
            return Fail(Status::InvalidArgument("expected a token id after ',' at byte " + std::to_string(i)));
          }
        } else if (i < text.size() && text[i] != ']') {
          return Fail(Status::InvalidArgument("expected ',' or ']' at byte " + std::to_string(i)));
        }
      }
      if (i >= text.size()) return Fail(Status::InvalidArgument("unterminated JSON array of token ids"));
      ++i;
      skip();
      if (i < text.size()) return Fail(Status::InvalidArgument("unexpected text after the array at byte " + std::to_string(i)));
      auto decoded = e.Decode(ids);
      if (!decoded.ok()) return Fail(decoded.status());
      std::cout << *decoded;
      return 0;
    });
  });
}

}  // namespace strata::cli
