// Documents and code as resources (ingest/ingest.h): ignore rules, each kind cut at its structure, the
// tree mirrored in the store with only what changed written, and find answering from each kind's chunks.
// The fixtures are written here; the PDF is made by groff (Debian's gropdf).
#include "strata/ingest/ingest.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <thread>
#include <utility>
#include <nlohmann/json.hpp>

#include "ingest/ingest_internal.h"
#include "memory/forwarding_store.h"
#include "strata/engine/engine.h"
#include "strata/llm/scripted.h"
#include "strata/memory/sqlite_store.h"
#include "session/pipeline_stage.h"
#include "strata/session/owner_locks.h"
#include "strata/tokenizer/registry.h"
#include "test_util.h"

namespace strata::ingest {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

int64_t Tokens(const std::string& text) { return tokenizer::CountText(tokenizer::kDefaultEncoding, text); }

std::vector<std::string> Names(const Extracted& e) {
  std::vector<std::string> out;
  for (const Chunk& c : e.chunks) out.push_back(c.name);
  return out;
}

// A two-page PDF made by groff -ms -Tpdf: "The quokka lives on Rottnest Island." on page 1, the lighthouse on 2.
std::string MakePdf(const std::string& dir) {
  std::string src = dir + "/manual.ms", pdf = dir + "/manual.pdf";
  testing::WriteFileOrDie(src, ".TL\nField Guide\n.PP\nThe quokka lives on Rottnest Island and is active at night.\n"
                               ".bp\n.PP\nThe Wadjemup lighthouse was first lit in 1849.\n");
  std::string cmd = "groff -ms -Tpdf " + src + " > " + pdf + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "groff -Tpdf (Debian's groff package, scripts/lib.sh) must be installed";
  return pdf;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(IngestIgnore, GitignorePatterns) {
  using internal::GlobMatch;
  EXPECT_TRUE(GlobMatch("*.log", "debug.log"));
  EXPECT_FALSE(GlobMatch("*.log", "logs/debug.log"));  // '*' stays within a segment.
  EXPECT_TRUE(GlobMatch("**/*.log", "logs/deep/debug.log"));
  EXPECT_TRUE(GlobMatch("**/*.log", "debug.log"));
  EXPECT_TRUE(GlobMatch("build/**", "build/a/b.o"));
  EXPECT_TRUE(GlobMatch("a/**/b", "a/x/y/b"));
  EXPECT_TRUE(GlobMatch("a/**/b", "a/b"));
  EXPECT_TRUE(GlobMatch("file[0-9].txt", "file7.txt"));
  EXPECT_FALSE(GlobMatch("file[!0-9].txt", "file7.txt"));
  EXPECT_TRUE(GlobMatch("?.md", "a.md"));
  EXPECT_FALSE(GlobMatch("?.md", "ab.md"));

  internal::IgnoreRules rules;
  rules.AddFile("# comment\n*.log\n!keep.log\nbuild/\n/top.txt\n", "");
  rules.AddFile("secret*\n", "docs");
  EXPECT_TRUE(rules.Ignored("a.log", false));
  EXPECT_TRUE(rules.Ignored("deep/x/a.log", false));
  EXPECT_FALSE(rules.Ignored("keep.log", false));       // Re-included by the later rule.
  EXPECT_TRUE(rules.Ignored("build", true));
  EXPECT_FALSE(rules.Ignored("build", false));          // "build/" matches directories only.
  EXPECT_TRUE(rules.Ignored("top.txt", false));
  EXPECT_FALSE(rules.Ignored("sub/top.txt", false));    // Anchored to its file's directory.
  EXPECT_TRUE(rules.Ignored("docs/secret.md", false));  // docs/.gitignore applies below docs.
  EXPECT_FALSE(rules.Ignored("secret.md", false));
}

TEST(IngestExtract, MarkdownIsCutAtHeadingsWithinTheBudget) {
  std::string md = "# Guide\n\nIntro to the guide.\n\n## Install\n\nRun the installer.\n\n```sh\nmake\n\nmake install\n```\n\n"
                   "### On Debian\n\nUse apt.\n\n## Use\n\n";
  for (int i = 0; i < 40; ++i) md += "Sentence number " + std::to_string(i) + " about using the tool well. ";
  md += "\n";
  auto e = Extract(FileKind::kMarkdown, "guide.md", md, {.chunk_tokens = 64});
  ASSERT_OK(e);
  EXPECT_EQ(e->title, "Guide");
  ASSERT_GE(e->chunks.size(), 4u);
  EXPECT_EQ(e->chunks[0].name, "Guide");
  EXPECT_EQ(e->chunks[1].name.rfind("Guide > Install", 0), 0u) << e->chunks[1].name;
  // A level-2 heading always starts a chunk; the fenced block stays whole.
  EXPECT_EQ(e->chunks[1].text.rfind("## Install", 0), 0u) << e->chunks[1].text;
  EXPECT_NE(e->chunks[1].text.find("make\n\nmake install"), std::string::npos);
  for (const Chunk& c : e->chunks) {
    EXPECT_LE(Tokens(c.text), 64) << c.text;
    ASSERT_GE(c.begin, 0);
    // Each chunk's range points at its text in the file (a chunk cut from one long paragraph: its first line).
    EXPECT_EQ(md.substr(c.begin, std::min<int64_t>(c.end - c.begin, 10)), c.text.substr(0, std::min<size_t>(c.text.size(), 10)));
  }
  EXPECT_EQ(e->chunks.back().name, "Guide > Use");
}

TEST(IngestExtract, CodeIsCutAtTopLevelDefinitionsWithTheirComments) {
  std::string py = "import os\n\n\n# Reads the config.\n@cache\ndef parse_config(path):\n    return open(path).read()\n\n"
                   "class Server:\n    def run(self):\n        pass\n";
  auto e = Extract(FileKind::kCode, "app/server.py", py, {.chunk_tokens = 64});
  ASSERT_OK(e);
  EXPECT_EQ(Names(*e), (std::vector<std::string>{"", "def parse_config", "class Server"}));
  EXPECT_EQ(e->chunks[1].text.rfind("# Reads the config.\n@cache\ndef parse_config", 0), 0u) << e->chunks[1].text;
  std::string cc = "#include <x>\n\nnamespace a {\n\n// Adds.\nint Add(int x, int y) {\n  return x + y;\n}\n\n"
                   "class Parser {\n public:\n  void Run();\n};\n\n}  // namespace a\n";
  auto c = Extract(FileKind::kCode, "a.cc", cc, {.chunk_tokens = 64});
  ASSERT_OK(c);
  std::vector<std::string> names = Names(*c);
  EXPECT_NE(std::find(names.begin(), names.end(), "function Add"), names.end()) << ::testing::PrintToString(names);
  EXPECT_NE(std::find(names.begin(), names.end(), "class Parser"), names.end()) << ::testing::PrintToString(names);
  auto go = Extract(FileKind::kCode, "main.go", "package main\n\nfunc (s *S) Serve() {\n}\n\ntype S struct{}\n", {.chunk_tokens = 16});
  ASSERT_OK(go);
  EXPECT_EQ(Names(*go), (std::vector<std::string>{"", "func Serve", "type S"}));
}

TEST(IngestExtract, JsonYamlAndCsvKeepTheirStructure) {
  auto j = Extract(FileKind::kJson, "s.json", R"({"server": {"port": 8420}, "users": ["ann", "bo"]})", {.chunk_tokens = 16});
  ASSERT_OK(j);
  EXPECT_EQ(Names(*j), (std::vector<std::string>{"server", "users"}));
  EXPECT_NE(j->chunks[0].text.find("\"port\": 8420"), std::string::npos) << j->chunks[0].text;
  // Small top-level keys share a chunk; a new document ("---") starts one.
  auto y = Extract(FileKind::kYaml, "c.yaml", "# top\nserver:\n  port: 8420\nusers:\n  - ann\n---\nother: 1\n", {.chunk_tokens = 64});
  ASSERT_OK(y);
  EXPECT_EQ(Names(*y), (std::vector<std::string>{"server … users", "other"}));
  std::string csv = "city,country,population\n";
  for (int i = 0; i < 30; ++i) csv += "City" + std::to_string(i) + ",Land,\"" + std::to_string(1000 * i) + "\"\n";
  auto c = Extract(FileKind::kCsv, "t.csv", csv, {.chunk_tokens = 48});
  ASSERT_OK(c);
  ASSERT_GE(c->chunks.size(), 3u);
  for (const Chunk& ch : c->chunks) {
    EXPECT_EQ(ch.text.rfind("city,country,population\n", 0), 0u) << ch.text;  // The header heads every chunk.
    EXPECT_LE(Tokens(ch.text), 48);
  }
  EXPECT_EQ(c->chunks[0].name, "row 2 … row " + std::to_string(1 + std::count(c->chunks[0].text.begin(), c->chunks[0].text.end(), '\n')));
}

TEST(IngestExtract, HtmlDropsScriptsAndKeepsHeadings) {
  std::string html = "<!DOCTYPE html><html><head><title>Release notes</title><style>.x{color:red}</style>"
                     "<script>var secret = 'tracking';</script></head><body><nav>Home</nav>"
                     "<h1>Strata 2.0</h1><p>The <b>import</b> command\n   reads chat exports.</p>"
                     "<h2>Fixes</h2><ul><li>One</li><li>Two</li></ul><script>alert(1)</script>"
                     "<pre>  keep   spacing</pre><p>Unclosed <i>tags";
  auto e = Extract(FileKind::kHtml, "notes.html", html, {.chunk_tokens = 512});
  ASSERT_OK(e);
  EXPECT_EQ(e->title, "Release notes");
  std::string all;
  for (const Chunk& c : e->chunks) all += c.text + "\n";
  EXPECT_EQ(all.find("tracking"), std::string::npos) << all;
  EXPECT_EQ(all.find("alert"), std::string::npos) << all;
  EXPECT_EQ(all.find("color:red"), std::string::npos) << all;
  EXPECT_NE(all.find("The import command reads chat exports."), std::string::npos) << all;
  EXPECT_NE(all.find("- One"), std::string::npos) << all;
  EXPECT_NE(all.find("  keep   spacing"), std::string::npos) << all;
  EXPECT_NE(all.find("Unclosed tags"), std::string::npos) << all;
  EXPECT_EQ(e->chunks.back().name, "Strata 2.0 > Fixes");
  EXPECT_FALSE(Extract(FileKind::kHtml, "empty.html", "<html><script>x</script></html>", {}).ok());
}

// Old HTML leaves inline tags open, and each nests a level: libxml2 stopped reading 256 elements deep and the
// walk skipped what lay below 400, so the rest of the page was lost without a word.
TEST(IngestExtract, HtmlNestedDeeplyIsReadToTheEnd) {
  std::string soup = "<html><head><title>Soup</title></head><body>";
  for (int i = 0; i < 400; ++i) soup += "<font size=2>para " + std::to_string(i) + " text here<br>\n";
  soup += "<p>THE END</p></body></html>";
  std::string nested = "<html><body><p>before</p>";
  for (int i = 0; i < 100'000; ++i) nested += "<div>";
  nested += "deep text";
  for (int i = 0; i < 100'000; ++i) nested += "</div>";
  nested += "<p>after</p></body></html>";
  // Nested deep inside an element the walk skips (an svg), and a text node over libxml2's 10 MB: the parser
  // halted there too, unnoticed. The page read without the parser keeps text the markup only seems to hide
  // ("a < b"), a '>' in an attribute, an empty comment, a tag named like script, and bytes that are not UTF-8.
  std::string svg = "<html><body><p>before</p><svg>";
  for (int i = 0; i < 300; ++i) svg += "<g>";
  for (int i = 0; i < 300; ++i) svg += "</g>";
  svg += "</svg><p>after the svg</p></body></html>";
  std::string big = "<html><body><pre>";
  for (int i = 0; i < 1'100'000; ++i) big += "word word ";  // 11 MB of text in one node.
  big += "THEVERYEND</pre><p>after pre</p></body></html>";
  std::string tricky = "<html><body>";
  for (int i = 0; i < 300; ++i) tricky += "<font>";
  tricky += "a < b and c > d omega <a title=\"x > y\" href=#>link text</a> <!--> kept <stylesheet>sheet</stylesheet> "
            "caf\xE9 <script>var hidden = 1;</script> tail";
  for (const auto& [html, wanted] : {std::pair{soup, std::vector<std::string>{"para 0 text", "para 399 text", "THE END"}},
                                     std::pair{nested, std::vector<std::string>{"before", "deep text", "after"}},
                                     std::pair{svg, std::vector<std::string>{"before", "after the svg"}},
                                     std::pair{big, std::vector<std::string>{"THEVERYEND", "after pre"}},
                                     std::pair{tricky, std::vector<std::string>{"a < b and c > d omega", "link text", "kept",
                                                                               "sheet", "caf\xEF\xBF\xBD", "tail"}}}) {
    auto e = Extract(FileKind::kHtml, "page.html", html, {.chunk_tokens = 100'000});
    ASSERT_OK(e);
    std::string all;
    for (const Chunk& c : e->chunks) all += c.text + "\n";
    for (const std::string& w : wanted) EXPECT_NE(all.find(w), std::string::npos) << w;
    EXPECT_EQ(all.find("hidden"), std::string::npos);
    EXPECT_EQ(all.find("href"), std::string::npos);
  }
}

TEST(IngestExtract, PdfPagesAreKeptAndDamagedPdfsRefused) {
  testing::TempDir dir;
  std::string pdf = ReadBytes(MakePdf(dir.path()));
  ASSERT_EQ(KindOf("manual.pdf", pdf), FileKind::kPdf);
  auto e = Extract(FileKind::kPdf, "manual.pdf", pdf, {});
  ASSERT_OK(e);
  ASSERT_EQ(e->chunks.size(), 2u);
  EXPECT_NE(e->chunks[0].text.find("quokka lives on Rottnest Island"), std::string::npos) << e->chunks[0].text;
  EXPECT_EQ(e->chunks[0].page_first, 1);
  EXPECT_EQ(e->chunks[0].name, "page 1");
  EXPECT_NE(e->chunks[1].text.find("lighthouse"), std::string::npos);
  EXPECT_EQ(e->chunks[1].page_first, 2);
  // Damaged: a header and nothing, then the file cut in half; refused with a reason or read in part, never a crash.
  auto garbage = Extract(FileKind::kPdf, "x.pdf", "%PDF-1.4\nthis is not a PDF", {});
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("poppler"), std::string::npos) << garbage.status().ToString();
  auto half = Extract(FileKind::kPdf, "x.pdf", pdf.substr(0, pdf.size() / 2), {});
  if (half.ok()) {
    EXPECT_FALSE(half->chunks.empty());
  }
  // A ".pdf" that does not start like one is not read as text.
  EXPECT_EQ(KindOf("fake.pdf", "hello"), std::nullopt);
}

TEST(IngestExtract, KindsByNameAndContent) {
  EXPECT_EQ(KindOf("README", "Plain words.\n"), FileKind::kText);
  EXPECT_EQ(KindOf("page", "<!DOCTYPE html><p>x"), FileKind::kHtml);
  EXPECT_EQ(KindOf("a.png", std::string("\x89PNG\r\n\x1a\n\0\0", 10)), std::nullopt);
  EXPECT_EQ(KindOf("tool.rs", "fn main() {}"), FileKind::kCode);
  EXPECT_EQ(KindOf("x.unknown", std::string(100, '\x01')), std::nullopt);
  EXPECT_FALSE(Extract(FileKind::kText, "a.txt", "   \n\n", {}).ok());
  EXPECT_FALSE(Extract(FileKind::kText, "a.txt", "x", {.chunk_tokens = 1}).ok());
  // One very long line is cut at characters, every piece within the budget, nothing lost.
  std::string line(20000, 'a');
  for (size_t i = 0; i < line.size(); i += 7) line[i] = ' ';
  auto e = Extract(FileKind::kText, "long.txt", line, {.chunk_tokens = 100});
  ASSERT_OK(e);
  size_t total = 0;
  for (const Chunk& c : e->chunks) {
    EXPECT_LE(Tokens(c.text), 100);
    total += c.text.size();
  }
  EXPECT_EQ(total, line.size());
}

// Hostile inputs cost linear time and bounded memory: a pattern of many stars, a megabyte line, a heading
// as long as the file, a CSV header longer than a chunk.
TEST(IngestExtract, HostileShapesStayCheap) {
  EXPECT_FALSE(internal::GlobMatch("*a*a*a*a*a*a*a*a*a*a*a*b", std::string(300, 'a')));
  EXPECT_TRUE(internal::GlobMatch("*a*a*a*a*a*a*a*a*a*a*a*b", std::string(300, 'a') + "b"));
  std::string line;
  for (int i = 0; line.size() < (1 << 20); ++i) line += "w" + std::to_string(i) + ",";
  auto e = Extract(FileKind::kText, "min.js", line, {.chunk_tokens = 16});
  ASSERT_OK(e);
  size_t total = 0;
  for (const Chunk& c : e->chunks) total += c.text.size();
  EXPECT_EQ(total, line.size());
  std::string heading = "# " + std::string(10000, 'h') + "\n\n" + std::string(4000, 'x') + "\n";
  auto h = Extract(FileKind::kMarkdown, "h.md", heading, {.chunk_tokens = 64});
  ASSERT_OK(h);
  for (const Chunk& c : h->chunks) EXPECT_LE(c.name.size(), 200u);
  std::string csv = std::string(5000, 'c') + "\n1\n2\n";
  auto c = Extract(FileKind::kCsv, "t.csv", csv, {.chunk_tokens = 64});
  ASSERT_OK(c);
  for (const Chunk& ch : c->chunks) EXPECT_LE(Tokens(ch.text), 64) << ch.text.substr(0, 80);
}

// ---- A tree added to the store through the engine ----

class IngestTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.File("tree");
    fs::create_directories(root_ + "/src");
    fs::create_directories(root_ + "/docs");
    fs::create_directories(root_ + "/data");
    fs::create_directories(root_ + "/build");
    fs::create_directories(root_ + "/.git");
    Write("README.md", "# Orchard\n\nOrchard tracks apple harvests.\n\n## Running\n\nStart it with `orchard serve`.\n");
    Write("src/harvest.py", "import csv\n\n\ndef parse_harvest(path):\n    \"\"\"Reads a harvest ledger.\"\"\"\n"
                            "    return list(csv.reader(open(path)))\n\n\nclass Ledger:\n    pass\n");
    Write("docs/faq.html", "<html><head><title>FAQ</title></head><body><h1>FAQ</h1><h2>Frost</h2>"
                           "<p>Cover the saplings with fleece when frost is forecast.</p></body></html>");
    Write("data/orchard.yaml", "orchard:\n  rows: 12\nirrigation:\n  schedule: dawn drip every second day\n");
    Write("data/yield.csv", "variety,kilos\nBramley,1200\nCox,800\n");
    Write("data/settings.json", R"({"pruning": {"month": "February"}, "owner": "Mara"})");
    Write("build/out.txt", "generated");
    Write("notes.log", "debug output");
    Write(".git/config", "[core]");
    Write(".gitignore", "build/\n*.log\n");
    Write("image.bin", std::string("\x89PNG\0\0\0binary", 14));
    Write("huge.txt", std::string(3 << 20, 'x'));
    fs::copy_file(MakePdf(dir_.path()), root_ + "/docs/guide.pdf");
    fs::create_symlink("/etc/passwd", root_ + "/docs/passwd");
    auto e = Engine::Open({.data_dir = dir_.File("data")});
    ASSERT_OK(e);
    engine_ = std::move(*e);
  }
  void Write(const std::string& rel, const std::string& text) { testing::WriteFileOrDie(root_ + "/" + rel, text); }
  Result<AddReport> Add(const std::string& uri = "strata://resources/orchard") {
    std::vector<std::string> paths = {root_};
    return engine_->AddResources(paths, uri, {}, {.max_file_bytes = 1 << 20});
  }
  std::string TopHit(const std::string& query) {
    auto hits = engine_->Find(FindRequest{.query = query, .under = "strata://resources/orchard", .limit = 3});
    EXPECT_OK(hits);
    return hits.ok() && !hits->hits.empty() ? hits->hits[0].uri.str() : "";
  }

  testing::TempDir dir_;
  std::string root_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(IngestTree, EveryKindIsAddedSkippedWithReasonsAndFound) {
  auto report = Add();
  ASSERT_OK(report);
  EXPECT_EQ(report->added, (std::vector<std::string>{"README.md", "data/orchard.yaml", "data/settings.json", "data/yield.csv",
                                                     "docs/faq.html", "docs/guide.pdf", "src/harvest.py"}));
  std::map<std::string, std::string> skipped;
  for (const SkippedFile& s : report->skipped) skipped[s.path] = s.reason;
  EXPECT_EQ(skipped["image.bin"], "binary");
  EXPECT_NE(skipped["huge.txt"].find("too large"), std::string::npos);
  EXPECT_NE(skipped["docs/passwd"].find("link"), std::string::npos);
  EXPECT_EQ(skipped.count("build/out.txt") + skipped.count("notes.log") + skipped.count(".git/config"), 0u);
  EXPECT_EQ(skipped.size(), 3u);

  // The file is a directory of ordered chunks with its source, hash and kind; the chunks carry ranges or pages.
  auto file = engine_->Stat("strata://resources/orchard/docs/guide.pdf");
  ASSERT_OK(file);
  Json meta = Json::parse(file->metadata);
  EXPECT_EQ(meta["ordered"], true);
  EXPECT_EQ(meta["ingest"]["source"], "docs/guide.pdf");
  EXPECT_EQ(meta["ingest"]["kind"], "pdf");
  EXPECT_EQ(file->abstract_text, "docs/guide.pdf: Field Guide");
  auto pages = engine_->List("strata://resources/orchard/docs/guide.pdf");
  ASSERT_OK(pages);
  ASSERT_EQ(pages->size(), 2u);
  EXPECT_EQ((*pages)[0].uri.name(), "0001-page-1");
  auto page2 = engine_->Stat((*pages)[1].uri.str());
  ASSERT_OK(page2);
  EXPECT_EQ(Json::parse(page2->metadata)["ingest"]["pages"], Json::array({2, 2}));
  auto readme = engine_->List("strata://resources/orchard/README.md");
  ASSERT_OK(readme);
  auto first = engine_->Stat((*readme)[0].uri.str());
  ASSERT_OK(first);
  Json range = Json::parse(first->metadata)["ingest"]["bytes"];
  EXPECT_EQ(range[0], 0);
  // A chunk is named by its most specific heading, and its L0 is that heading path and its first line of text.
  ASSERT_EQ(readme->size(), 2u);
  EXPECT_EQ((*readme)[1].uri.name(), "0002-running");
  EXPECT_EQ((*readme)[1].abstract_text, "Orchard > Running: Start it with `orchard serve`.");
  // Folders say what they hold.
  auto data = engine_->Stat("strata://resources/orchard/data");
  ASSERT_OK(data);
  EXPECT_EQ(data->abstract_text, "data/: 3 files");

  // A question answered in one chunk of each kind finds it first.
  EXPECT_EQ(TopHit("where does the quokka live").rfind("strata://resources/orchard/docs/guide.pdf/", 0), 0u);
  EXPECT_EQ(TopHit("when was the Wadjemup lighthouse lit"), "strata://resources/orchard/docs/guide.pdf/0002-page-2");
  EXPECT_EQ(TopHit("parse harvest ledger").rfind("strata://resources/orchard/src/harvest.py/0002-def-parse-harvest", 0), 0u);
  EXPECT_EQ(TopHit("protect saplings from frost").rfind("strata://resources/orchard/docs/faq.html/", 0), 0u);
  EXPECT_EQ(TopHit("irrigation schedule drip").rfind("strata://resources/orchard/data/orchard.yaml/", 0), 0u);
  EXPECT_EQ(TopHit("Bramley kilos").rfind("strata://resources/orchard/data/yield.csv/", 0), 0u);
  EXPECT_EQ(TopHit("which month is pruning").rfind("strata://resources/orchard/data/settings.json/", 0), 0u);
  EXPECT_EQ(TopHit("how do I start orchard serve").rfind("strata://resources/orchard/README.md/", 0), 0u);
}

TEST_F(IngestTree, ReAddingWritesOnlyWhatChangedAndRemovesWhatIsGone) {
  ASSERT_OK(Add());
  auto before = engine_->Stat("strata://resources/orchard/README.md");
  ASSERT_OK(before);
  auto again = Add();
  ASSERT_OK(again);
  EXPECT_TRUE(again->added.empty());
  EXPECT_TRUE(again->updated.empty());
  EXPECT_EQ(again->unchanged.size(), 7u);
  EXPECT_EQ(again->chunks, 0);  // Nothing written.
  EXPECT_EQ(engine_->Stat("strata://resources/orchard/README.md")->updated_ms, before->updated_ms);

  Write("README.md", "# Orchard\n\nOrchard tracks pear harvests too.\n");
  fs::remove(root_ + "/src/harvest.py");
  auto changed = Add();
  ASSERT_OK(changed);
  EXPECT_EQ(changed->updated, std::vector<std::string>{"README.md"});
  EXPECT_EQ(changed->removed, std::vector<std::string>{"src/harvest.py"});
  EXPECT_EQ(changed->unchanged.size(), 5u);
  EXPECT_EQ(engine_->Stat("strata://resources/orchard/src/harvest.py").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Stat("strata://resources/orchard/src").status().code(), StatusCode::kNotFound)
      << "a folder left empty goes with its last file";
  EXPECT_NE(TopHit("pear harvests").find("README.md"), std::string::npos);

  // Another add below the same scope is its own: it removes nothing of the first.
  std::string other = dir_.File("other");
  fs::create_directories(other);
  testing::WriteFileOrDie(other + "/note.txt", "A separate note.");
  std::vector<std::string> paths = {other};
  auto second = engine_->AddResources(paths, "strata://resources/orchard/extra");
  ASSERT_OK(second);
  EXPECT_TRUE(second->removed.empty());
  auto third = Add();
  ASSERT_OK(third);
  EXPECT_TRUE(third->removed.empty());  // extra/note.txt came from another add.
  EXPECT_OK(engine_->Stat("strata://resources/orchard/extra/note.txt"));

  // A node someone wrote by hand is not replaced by a file of the same path.
  ASSERT_OK(engine_->Write("strata://resources/hand/README.md", "written by hand"));
  paths = {root_ + "/README.md"};
  auto clash = engine_->AddResources(paths, "strata://resources/hand");
  ASSERT_OK(clash);
  ASSERT_EQ(clash->skipped.size(), 1u);
  EXPECT_NE(clash->skipped[0].reason.find("not added from a file"), std::string::npos);
  EXPECT_EQ(*engine_->Read("strata://resources/hand/README.md"), "written by hand");
  paths = {dir_.File("missing")};
  EXPECT_EQ(engine_->AddResources(paths, "strata://resources/x").status().code(), StatusCode::kNotFound);
}

// What an add must never do: replace a folder by a file of its name, call a half-written file unchanged, or
// remove a file the walk only skipped this time.
TEST_F(IngestTree, FoldersHalfWrittenFilesAndSkippedFilesAreSafe) {
  ASSERT_OK(Add());
  std::vector<SourceFile> clash = {{"docs", "# Not a folder\n\ntext\n", "", 0}};
  auto replaced = engine_->AddResourceFiles(clash, "strata://resources/orchard", {.remove_missing = false});
  ASSERT_OK(replaced);
  ASSERT_EQ(replaced->skipped.size(), 1u);
  EXPECT_NE(replaced->skipped[0].reason.find("a folder"), std::string::npos) << replaced->skipped[0].reason;
  EXPECT_OK(engine_->Stat("strata://resources/orchard/docs/faq.html"));
  // A file whose chunks were not all written has no hash yet: the next add writes it again.
  std::string readme = "strata://resources/orchard/README.md";
  auto node = engine_->Stat(readme);
  ASSERT_OK(node);
  Json meta = Json::parse(node->metadata);
  meta["ingest"].erase("hash");
  ASSERT_OK(engine_->Remove(readme, /*recursive=*/true));
  ASSERT_OK(engine_->Mkdir(readme, {.metadata = meta.dump()}));
  auto again = Add();
  ASSERT_OK(again);
  EXPECT_EQ(again->updated, std::vector<std::string>{"README.md"});
  EXPECT_FALSE(engine_->List(readme)->empty());
  // A file grown past the limit is skipped, and what an earlier add brought of it stays.
  Write("data/yield.csv", "variety,kilos\n" + std::string(2 << 20, '1') + "\n");
  auto grown = Add();
  ASSERT_OK(grown);
  EXPECT_TRUE(grown->removed.empty());
  EXPECT_OK(engine_->Stat("strata://resources/orchard/data/yield.csv"));
}

// Two processes adding one file at once (a server's add and the CLI's, here two engines on one data
// directory): each replaces the file in steps, and interleaved, one version's chunks stayed beside the
// other's, for good (the hash recorded last called the file unchanged from then on).
TEST(IngestConcurrent, TwoEnginesAddingOneFileAtOnceLeaveOneWholeVersion) {
  testing::TempDir dir;
  auto first = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(first);
  auto second = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(second);
  auto version = [](const std::string& word, int sections) {
    std::string text;
    for (int i = 0; i < sections; ++i) {
      text += "## " + word + " " + std::to_string(i) + "\n\nThe " + word + " part number " + std::to_string(i) + ".\n\n";
    }
    return text;
  };
  const std::string long_one = version("apple", 8), short_one = version("pear", 3);
  std::atomic<int> ready{0};
  auto adder = [&](Engine* engine, int parity) {
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();  // Both start together.
    for (int i = 0; i < 30; ++i) {
      const std::string& text = (i + parity) % 2 == 0 ? long_one : short_one;
      std::vector<SourceFile> files = {{"doc.md", text, "", static_cast<int64_t>(text.size())}};
      EXPECT_OK(engine->AddResourceFiles(files, "strata://resources/race", {.remove_missing = false}));
    }
  };
  // An add waits while another process holds the data directory's ingest lock.
  {
    auto locks = session::OpenFileOwnerLocks(dir.File("data") + "/locks");
    ASSERT_OK(locks);
    auto held = (*locks)->Lock({"ingest"});
    ASSERT_OK(held);
    std::vector<SourceFile> files = {{"doc.md", short_one, "", static_cast<int64_t>(short_one.size())}};
    auto waiting = std::async(std::launch::async, [&] {
      return (*first)->AddResourceFiles(files, "strata://resources/race", {.remove_missing = false});
    });
    EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
        << "the add went ahead while another process held the ingest lock";
    held->reset();
    EXPECT_OK(waiting.get());
  }
  std::thread a(adder, first->get(), 0), b(adder, second->get(), 1);
  a.join();
  b.join();
  auto node = (*first)->Stat("strata://resources/race/doc.md");
  ASSERT_OK(node);
  Json meta = Json::parse(node->metadata);
  auto chunks = (*first)->List("strata://resources/race/doc.md");
  ASSERT_OK(chunks);
  ASSERT_EQ(static_cast<int64_t>(chunks->size()), meta["ingest"]["chunks"].get<int64_t>());
  const std::string word = chunks->size() == 8 ? "apple" : "pear";
  for (const memory::Node& c : *chunks) {
    auto text = (*first)->Read(c.uri.str());
    ASSERT_OK(text);
    EXPECT_NE(text->find(word), std::string::npos) << *text;
  }
}

// A store that refuses every removal after the first `allowed`: an add stopped partway (a crash, a full disk).
class RemovalFailingStore final : public testing::ForwardingStore {
 public:
  RemovalFailingStore(memory::ContextStore& inner, int allowed) : ForwardingStore(inner), allowed_(allowed) {}
  Result<int64_t> Remove(const memory::Uri& uri, bool recursive) override {
    if (allowed_-- <= 0) return Status::Unavailable("the disk went away");
    return inner_.Remove(uri, recursive);
  }

 private:
  int allowed_;
};

// A changed file's old chunks were removed while its directory still recorded the old hash: an add stopped
// between two removals, then an add of the old content again, called the file unchanged with chunks missing.
TEST(IngestStopped, AFileWhoseOldChunksWerePartlyRemovedIsWrittenAgainNotCalledUnchanged) {
  testing::TempDir dir;
  auto store = memory::OpenSqliteStore(dir.path());
  ASSERT_OK(store);
  auto root = memory::Uri::Parse("strata://resources/book");
  ASSERT_OK(root);
  auto add = [&](memory::ContextStore& into, const std::string& text) -> Result<AddReport> {
    std::vector<SourceFile> files = {{"book.md", text, "", static_cast<int64_t>(text.size())}};
    AddReport report;
    STRATA_RETURN_IF_ERROR(AddFiles(into, *root, files, {}, &report));
    return report;
  };
  const std::string original = "## One\n\nThe first part.\n\n## Two\n\nThe second part.\n\n## Three\n\nThe third part.\n";
  auto first = add(**store, original);
  ASSERT_OK(first);
  ASSERT_EQ(first->chunks, 3);
  RemovalFailingStore failing(**store, /*allowed=*/1);
  std::string changed = original;
  changed.replace(changed.find("second"), 6, "revised");
  EXPECT_EQ(add(failing, changed).status().code(), StatusCode::kUnavailable);
  auto file = memory::Uri::Parse("strata://resources/book/book.md");
  ASSERT_OK(file);
  auto left = (*store)->List(*file);
  ASSERT_OK(left);
  ASSERT_EQ(left->size(), 2u);  // One old chunk went before the add stopped.

  auto again = add(**store, original);
  ASSERT_OK(again);
  EXPECT_TRUE(again->unchanged.empty());
  EXPECT_EQ(again->updated, std::vector<std::string>{"book.md"});
  auto whole = (*store)->List(*file);
  ASSERT_OK(whole);
  EXPECT_EQ(whole->size(), 3u);
  auto unchanged = add(**store, original);  // Written whole, it is unchanged from now on.
  ASSERT_OK(unchanged);
  EXPECT_EQ(unchanged->unchanged, std::vector<std::string>{"book.md"});
}

// A link named as the path is the tree it leads to: skipping it mirrored an empty tree and removed every file
// an earlier add of the same tree had brought.
TEST_F(IngestTree, ALinkNamedAsThePathIsFollowed) {
  ASSERT_OK(Add());
  std::string link = dir_.File("orchard-link");
  fs::create_directory_symlink(root_, link);
  std::vector<std::string> paths = {link};
  auto through = engine_->AddResources(paths, "strata://resources/orchard", {}, {.max_file_bytes = 1 << 20});
  ASSERT_OK(through);
  EXPECT_TRUE(through->removed.empty()) << through->removed.size() << " removed, the first " << through->removed[0];
  EXPECT_EQ(through->unchanged.size(), 7u);
  EXPECT_OK(engine_->Stat("strata://resources/orchard/README.md"));
  // A link to a file is that file, named as the link.
  std::string file_link = dir_.File("readme-link.md");
  fs::create_symlink(root_ + "/README.md", file_link);
  paths = {file_link};
  auto single = engine_->AddResources(paths, "strata://resources/single");
  ASSERT_OK(single);
  EXPECT_EQ(single->added, std::vector<std::string>{"readme-link.md"});
  paths = {dir_.File("dangling")};
  fs::create_symlink(dir_.File("nowhere"), paths[0]);
  EXPECT_EQ(engine_->AddResources(paths, "strata://resources/single").status().code(), StatusCode::kNotFound);
}

// Two paths that land on one name: the later is added, and the file it replaces is named among the skipped
// (before, it vanished without a word, while HTTP refused the same request).
TEST_F(IngestTree, TwoFilesOfOneNameAreNotLostSilently) {
  fs::create_directories(dir_.File("a"));
  fs::create_directories(dir_.File("b"));
  testing::WriteFileOrDie(dir_.File("a/readme.md"), "# From A\n\nalpha text\n");
  testing::WriteFileOrDie(dir_.File("b/readme.md"), "# From B\n\nbeta text\n");
  std::vector<std::string> paths = {dir_.File("a/readme.md"), dir_.File("b/readme.md")};
  auto files = engine_->AddResources(paths, "strata://resources/two");
  ASSERT_OK(files);
  EXPECT_EQ(files->added, std::vector<std::string>{"readme.md"});
  ASSERT_EQ(files->skipped.size(), 1u);
  EXPECT_NE(files->skipped[0].path.find("a/readme.md"), std::string::npos) << files->skipped[0].path;
  EXPECT_NE(files->skipped[0].reason.find("b/readme.md"), std::string::npos) << files->skipped[0].reason;
  paths = {dir_.File("a"), dir_.File("b")};
  auto dirs = engine_->AddResources(paths, "strata://resources/two");
  ASSERT_OK(dirs);
  EXPECT_EQ(dirs->skipped.size(), 1u);
  // One file named twice is one file: nothing skipped.
  paths = {dir_.File("a"), dir_.File("a/readme.md")};
  auto twice = engine_->AddResources(paths, "strata://resources/once");
  ASSERT_OK(twice);
  EXPECT_TRUE(twice->skipped.empty()) << twice->skipped[0].reason;
}

// A changed or removed file takes only its own chunks with it: a file added at a path below it and a note
// someone wrote there stay (a recursive remove took them silently, the report saying nothing).
TEST_F(IngestTree, UpdatingOrRemovingAFileKeepsWhatIsBelowIt) {
  const std::string root = "strata://resources/nested";
  std::vector<SourceFile> files = {{"x", "# X\n\nfirst\n", "", 0}, {"x/y", "# Y\n\nbelow\n", "", 0}};
  ASSERT_OK(engine_->AddResourceFiles(files, root));
  ASSERT_OK(engine_->Write(root + "/x/my-note", "a reviewer's note"));
  files = {{"x", "# X\n\nsecond\n", "", 0}, {"x/y", "# Y\n\nbelow\n", "", 0}};
  auto updated = engine_->AddResourceFiles(files, root);
  ASSERT_OK(updated);
  EXPECT_EQ(updated->updated, std::vector<std::string>{"x"});
  EXPECT_EQ(updated->unchanged, std::vector<std::string>{"x/y"});
  EXPECT_EQ(*engine_->Read(root + "/x/my-note"), "a reviewer's note");
  EXPECT_OK(engine_->Stat(root + "/x/y"));
  auto chunks = engine_->Grep("first", root);
  ASSERT_OK(chunks);
  EXPECT_TRUE(chunks->empty()) << "the old chunk went";
  // Removed from the tree: x's chunks go, its directory stays a folder for what is below it.
  files = {{"x/y", "# Y\n\nbelow\n", "", 0}};
  auto removed = engine_->AddResourceFiles(files, root, {.remove_missing = true});
  ASSERT_OK(removed);
  EXPECT_EQ(removed->removed, std::vector<std::string>{"x"});
  EXPECT_OK(engine_->Stat(root + "/x/y"));
  EXPECT_EQ(*engine_->Read(root + "/x/my-note"), "a reviewer's note");
  EXPECT_TRUE(engine_->Grep("second", root)->empty());
  EXPECT_EQ(engine_->Stat(root + "/x")->abstract_text, "x/: 1 file");
  // The file comes back into its directory; a folder of another origin is still not replaced.
  files = {{"x", "# X\n\nthird\n", "", 0}, {"x/y", "# Y\n\nbelow\n", "", 0}};
  auto back = engine_->AddResourceFiles(files, root);
  ASSERT_OK(back);
  EXPECT_EQ(back->added, std::vector<std::string>{"x"});
  EXPECT_EQ(engine_->Grep("third", root)->size(), 1u);
  EXPECT_OK(engine_->Stat(root + "/x/y"));
}

// A folder the tree replaced by a file of its name: the files it held go, and the file takes its place. The
// folder stayed for good before, the file was never added, and find kept answering with the folder's text.
TEST_F(IngestTree, AFolderReplacedByAFileOfItsNameGivesWayToIt) {
  const std::string root = "strata://resources/swap";
  std::vector<SourceFile> files = {{"docs/a.txt", "inner text about otters\n", "", 0}, {"b.txt", "other\n", "", 0}};
  ASSERT_OK(engine_->AddResourceFiles(files, root));
  files = {{"docs", "docs is now a plain file about giraffes\n", "", 0}, {"b.txt", "other\n", "", 0}};
  auto swapped = engine_->AddResourceFiles(files, root);
  ASSERT_OK(swapped);
  EXPECT_EQ(swapped->added, std::vector<std::string>{"docs"});
  EXPECT_EQ(swapped->removed, std::vector<std::string>{"docs/a.txt"});
  EXPECT_TRUE(swapped->skipped.empty()) << swapped->skipped[0].reason;
  EXPECT_TRUE(engine_->Grep("otters", root)->empty());
  EXPECT_EQ(engine_->Grep("giraffes", root)->size(), 1u);
  auto again = engine_->AddResourceFiles(files, root);
  ASSERT_OK(again);
  EXPECT_EQ(again->unchanged, (std::vector<std::string>{"docs", "b.txt"}));
  // Something else below a folder (a note someone wrote) keeps it, and the file is skipped, naming why.
  files = {{"notes/n.txt", "a note file\n", "", 0}};
  ASSERT_OK(engine_->AddResourceFiles(files, root + "2"));
  ASSERT_OK(engine_->Write(root + "2/notes/mine", "a reviewer's note"));
  files = {{"notes", "now a file\n", "", 0}};
  auto kept = engine_->AddResourceFiles(files, root + "2");
  ASSERT_OK(kept);
  ASSERT_EQ(kept->skipped.size(), 1u);
  EXPECT_NE(kept->skipped[0].reason.find("(a folder); not replaced"), std::string::npos) << kept->skipped[0].reason;
  EXPECT_EQ(*engine_->Read(root + "2/notes/mine"), "a reviewer's note");
}

// A file first added under a deeper root, then from a shallower one (the same URI, another relative path):
// its old chunks go. They stayed beside the new ones, and find answered with text the file no longer had.
TEST_F(IngestTree, AFileAddedAgainFromAnotherRootLosesItsOldChunks) {
  std::vector<SourceFile> inner = {{"x.md", "# One\n\nalpha walrus\n\n# Two\n\nbeta narwhal\n", "", 0}};
  ASSERT_OK(engine_->AddResourceFiles(inner, "strata://resources/top/a"));
  std::vector<SourceFile> outer = {{"a/x.md", "# Solo\n\ngamma octopus\n", "", 0}};
  auto moved = engine_->AddResourceFiles(outer, "strata://resources/top");
  ASSERT_OK(moved);
  EXPECT_EQ(moved->updated, std::vector<std::string>{"a/x.md"});
  auto chunks = engine_->List("strata://resources/top/a/x.md");
  ASSERT_OK(chunks);
  ASSERT_EQ(chunks->size(), 1u);
  EXPECT_EQ(std::string((*chunks)[0].uri.name()), "0001-solo");
  EXPECT_TRUE(engine_->Grep("narwhal", "strata://resources/top")->empty());
  // The same bytes from the other root again are not "unchanged": the file is now that root's.
  auto back = engine_->AddResourceFiles(inner, "strata://resources/top/a");
  ASSERT_OK(back);
  EXPECT_EQ(back->updated, std::vector<std::string>{"x.md"});
  EXPECT_TRUE(engine_->Grep("octopus", "strata://resources/top")->empty());
  ASSERT_OK(engine_->Check());
}

// A file whose path falls on, or below, another file's chunk is skipped, naming it; the rest of the add goes
// on. It was taken for a file and the add stopped halfway (409), or was skipped as "written otherwise".
TEST_F(IngestTree, AFileOnAnotherFilesChunkIsSkippedAndTheAddGoesOn) {
  const std::string root = "strata://resources/clash";
  std::vector<SourceFile> files = {{"a.md", "# Intro\n\nlemurs\n", "", 0},
                                   {"a.md/0001-intro", "otters\n", "", 0},
                                   {"a.md/0001-intro/deeper.md", "badgers\n", "", 0},
                                   {"zz.txt", "zebras\n", "", 0}};
  auto report = engine_->AddResourceFiles(files, root);
  ASSERT_OK(report);
  EXPECT_EQ(report->added, (std::vector<std::string>{"a.md", "zz.txt"}));
  ASSERT_EQ(report->skipped.size(), 2u);
  EXPECT_NE(report->skipped[0].reason.find("(a chunk of \"a.md\"); not replaced"), std::string::npos)
      << report->skipped[0].reason;
  EXPECT_NE(report->skipped[1].reason.find("not added"), std::string::npos) << report->skipped[1].reason;
  EXPECT_EQ(engine_->Grep("zebras", root)->size(), 1u);
  EXPECT_EQ(engine_->Grep("lemurs", root)->size(), 1u);
  // A changed file whose new chunk would land on a file added below it is skipped before its old chunks go.
  const std::string below = "strata://resources/below";
  files = {{"b.md", "# Start\n\nbadgers\n", "", 0}, {"b.md/0001-intro", "otters\n", "", 0}};
  auto first = engine_->AddResourceFiles(files, below);
  ASSERT_OK(first);
  EXPECT_EQ(first->added.size(), 2u);
  files = {{"b.md", "# Intro\n\nbeavers\n", "", 0}, {"b.md/0001-intro", "otters\n", "", 0}, {"c.md", "coypu\n", "", 0}};
  auto changed = engine_->AddResourceFiles(files, below);
  ASSERT_OK(changed);
  ASSERT_EQ(changed->skipped.size(), 1u);
  EXPECT_NE(changed->skipped[0].reason.find("the place of its chunk 1, holds another node"), std::string::npos)
      << changed->skipped[0].reason;
  EXPECT_EQ(changed->added, std::vector<std::string>{"c.md"});
  EXPECT_EQ(engine_->Grep("badgers", below)->size(), 1u) << "the old chunk stays";
  EXPECT_EQ(engine_->Grep("otters", below)->size(), 1u);
  auto problems = engine_->Check();
  ASSERT_OK(problems);
  EXPECT_TRUE(problems->empty());
}

// A file that holds no text now is skipped, and the chunks an earlier add took from it go: find must not
// answer with text the file no longer has.
TEST_F(IngestTree, AFileThatNoLongerHoldsTextLosesItsOldChunks) {
  ASSERT_OK(Add());
  Write("README.md", "");
  Write("data/settings.json", std::string("\x89PNG\0\0\0binary", 14));
  auto report = Add();
  ASSERT_OK(report);
  EXPECT_EQ(report->removed, (std::vector<std::string>{"README.md", "data/settings.json"}));
  std::map<std::string, std::string> skipped;
  for (const SkippedFile& s : report->skipped) skipped[s.path] = s.reason;
  EXPECT_EQ(skipped["data/settings.json"], "binary");
  EXPECT_NE(skipped["README.md"].find("no text"), std::string::npos) << skipped["README.md"];
  EXPECT_EQ(engine_->Stat("strata://resources/orchard/README.md").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Stat("strata://resources/orchard/data/settings.json").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(TopHit("how do I start orchard serve").find("README.md"), std::string::npos);
}

TEST_F(IngestTree, ChunkSizeIsCheckedFirstAndAChangedSizeCutsAgain) {
  std::vector<std::string> paths = {root_};
  auto tiny = engine_->AddResources(paths, "strata://resources/orchard", {.extract = {.chunk_tokens = 5}});
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("\"chunk_tokens\" must be between 16 and 100000, not 5"), std::string::npos)
      << tiny.status().message();
  EXPECT_EQ(engine_->Stat("strata://resources/orchard").status().code(), StatusCode::kNotFound) << "nothing was read";
  std::string paragraph = "Apple trees need pruning in late winter, before the buds break, to keep them open to light.";
  Write("long.md", paragraph + "\n\n" + paragraph + "\n\n" + paragraph + "\n\n" + paragraph + "\n");
  ASSERT_OK(Add());
  size_t before = engine_->List("strata://resources/orchard/long.md")->size();
  EXPECT_EQ(before, 1u);
  auto recut = engine_->AddResources(paths, "strata://resources/orchard", {.extract = {.chunk_tokens = 16}},
                                     {.max_file_bytes = 1 << 20});
  ASSERT_OK(recut);
  EXPECT_EQ(recut->unchanged.size(), 0u) << "every file is cut again at the new size";
  EXPECT_GE(engine_->List("strata://resources/orchard/long.md")->size(), 4u);
  auto same = engine_->AddResources(paths, "strata://resources/orchard", {.extract = {.chunk_tokens = 16}},
                                    {.max_file_bytes = 1 << 20});
  ASSERT_OK(same);
  EXPECT_EQ(same->unchanged.size(), 8u);
}

TEST_F(IngestTree, FilesCarriedInARequestAreReadFromTheirBytesOnly) {
  std::vector<SourceFile> files = {{"notes/a.md", "# A\n\nApples.\n", "", 0}};
  auto report = engine_->AddResourceFiles(files, "strata://resources/carried");
  ASSERT_OK(report);
  EXPECT_EQ(report->added, std::vector<std::string>{"notes/a.md"});
  files[0].disk = "/etc/passwd";
  EXPECT_EQ(engine_->AddResourceFiles(files, "strata://resources/carried").status().code(), StatusCode::kInvalidArgument);
  files = {{"../escape.md", "x", "", 0}};
  auto escape = engine_->AddResourceFiles(files, "strata://resources/carried");
  ASSERT_OK(escape);
  ASSERT_EQ(escape->skipped.size(), 1u);
  EXPECT_NE(escape->skipped[0].reason.find("not a node name"), std::string::npos);
}

// A file whose URI or whose chunks' URIs would pass a URI's bounds (128 segments, 4096 bytes; 1024 bytes for
// a node a store keeps) is skipped,
// naming the bound, and the rest is added. Such nodes were stored, and every later find over the scope
// failed parsing them (for every user of the account), as did check and export.
TEST_F(IngestTree, AFileTooDeepOrTooLongForAUriIsSkippedAndFindStillWorks) {
  std::string deep;
  for (int i = 0; i < 125; ++i) deep += "d/";
  std::string chunk_too_deep = deep + "f.md";               // Its URI has 128 segments, its chunks 129.
  std::string too_deep = deep + "e/f/g.md";                  // Its own URI has 130.
  std::string too_long = std::string(240, 'n') + "/" + std::string(240, 'n') + "/";
  for (int i = 0; i < 15; ++i) too_long += std::string(240, 'm') + "/";
  too_long += "x.md";                                        // More than 4096 bytes.
  // A URI, but longer than a store keeps (1024 bytes): PostgreSQL refused it halfway through the add.
  std::string too_long_to_keep;
  for (int i = 0; i < 5; ++i) too_long_to_keep += std::string(240, 'k') + "/";
  too_long_to_keep += "y.md";
  std::vector<SourceFile> files = {{"ok.md", "# Wombat\n\nWombats dig burrows.\n", "", 0},
                                   {chunk_too_deep, "hello wombat\n", "", 0},
                                   {too_deep, "hello wombat\n", "", 0},
                                   {too_long, "hello wombat\n", "", 0},
                                   {too_long_to_keep, "hello wombat\n", "", 0}};
  auto report = engine_->AddResourceFiles(files, "strata://resources/bounds");
  ASSERT_OK(report);
  EXPECT_EQ(report->added, std::vector<std::string>{"ok.md"});
  ASSERT_EQ(report->skipped.size(), 4u);
  for (const auto& skipped : report->skipped) {
    bool named = skipped.reason.find("segments; at most 128") != std::string::npos ||
                 skipped.reason.find("longer than 4096 bytes") != std::string::npos ||
                 (skipped.path == too_long_to_keep && skipped.reason.find("a node's URI is at most 1024") != std::string::npos);
    EXPECT_TRUE(named) << skipped.path.substr(0, 40) << ": " << skipped.reason.substr(0, 200);
  }
  auto hits = engine_->Find(FindRequest{.query = "wombat", .limit = 5});
  ASSERT_OK(hits);
  ASSERT_EQ(hits->hits.size(), 1u);
  EXPECT_EQ(hits->hits[0].uri.str().rfind("strata://resources/bounds/ok.md/", 0), 0u) << hits->hits[0].uri.str();
  auto problems = engine_->Check();
  ASSERT_OK(problems);
  EXPECT_TRUE(problems->empty()) << problems->front();
}

// The model's summary of an added file (AddOptions::summarize) is queued like phase 2, asked again when its
// reply is unusable, and replaces the heuristic layers when it arrives; one for content replaced since does
// nothing.
TEST(IngestSummary, TheModelsSummaryReplacesTheHeuristicLayersWhenItArrives) {
  testing::TempDir dir;
  int calls = 0;
  std::string last_prompt;
  std::vector<std::string> replies = {
      "Sure! Here is a summary.",
      R"({"abstract": "How to prune and protect an orchard.", "overview": "Pruning in February; fleece against frost.",
          "chunks": [{"index": 0, "abstract": "When to prune."}, {"index": 9, "abstract": "not a chunk"}]})"};
  std::function<void()> during_call;  // Runs once, while the model answers.
  llm::ScriptedProvider model("scripted", [&](const llm::ScriptedProvider::Request& req) {
    last_prompt = req.history.empty() ? "" : req.history[0].ExtractText();
    if (during_call) std::exchange(during_call, nullptr)();
    return testing::TextReply(replies[std::min<size_t>(calls++, replies.size() - 1)]);
  });
  auto opened = Engine::Open({.data_dir = dir.File("data"), .model = &model, .ignore_prompt_env = true,
                              .shipped_prompts_dir = STRATA_PROMPTS_DIR});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  std::string tree = dir.File("tree");
  fs::create_directories(tree + "/guide");
  testing::WriteFileOrDie(tree + "/guide/prune.md", "# Pruning\n\nPrune in February.\n\n## Frost\n\nUse fleece.\n");
  std::vector<std::string> paths = {tree};
  auto report = engine.AddResources(paths, "strata://resources/orchard", {.summarize = true});
  ASSERT_OK(report);
  EXPECT_EQ(report->queued, 1);
  // The job is listed with the tasks of whoever may read the file.
  auto jobs = (*engine.queue())->List(std::nullopt);
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].kind, kSummaryJobKind);
  EXPECT_OK(engine.CheckJobAccess(Reach::User("alice"), (*jobs)[0]));  // strata://resources is shared.
  ASSERT_OK(engine.AddResources(paths, "strata://user/bob/orchard", {.summarize = true}));
  jobs = (*engine.queue())->List(std::nullopt);
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->size(), 2u);
  for (const session::Job& job : *jobs) {
    bool bobs = job.key.rfind("strata://user/bob/", 0) == 0;
    EXPECT_EQ(engine.CheckJobAccess(Reach::User("alice"), job).ok(), !bobs) << job.key;
    EXPECT_OK(engine.CheckJobAccess(Reach::User("bob"), job));
  }
  ASSERT_OK(engine.Remove("strata://user/bob/orchard", /*recursive=*/true));  // Its job then does nothing.
  const std::string file = "strata://resources/orchard/guide/prune.md";
  EXPECT_EQ(engine.Stat(file)->abstract_text, "guide/prune.md: Pruning");  // Heuristic until the model's comes.
  auto work = engine.Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 2);
  EXPECT_EQ(calls, 2);  // The unusable reply was asked again; the removed file's job asked nothing.
  EXPECT_NE(last_prompt.find("File: guide/prune.md (markdown)"), std::string::npos) << last_prompt;
  EXPECT_NE(last_prompt.find("[0] Pruning"), std::string::npos) << last_prompt;
  auto node = engine.Stat(file);
  ASSERT_OK(node);
  EXPECT_EQ(node->abstract_text, "How to prune and protect an orchard.");
  EXPECT_EQ(node->overview, "Pruning in February; fleece against frost.");
  EXPECT_EQ(Json::parse(node->metadata)["ingest"]["summary"], "model");
  auto chunks = engine.List(file);
  ASSERT_OK(chunks);
  ASSERT_EQ(chunks->size(), 2u);
  EXPECT_EQ((*chunks)[0].abstract_text, "When to prune.");
  EXPECT_EQ(*engine.Read((*chunks)[0].uri.str()), "# Pruning\n\nPrune in February.");  // Content untouched.
  EXPECT_NE(engine.Stat("strata://resources/orchard/guide")->overview.find("How to prune and protect"), std::string::npos);

  // Queued for content that a later add replaced: the job does nothing, the newer layers stand.
  testing::WriteFileOrDie(tree + "/guide/prune.md", "# Pruning\n\nPrune in late winter.\n");
  ASSERT_OK(engine.AddResources(paths, "strata://resources/orchard", {.summarize = true}));
  testing::WriteFileOrDie(tree + "/guide/prune.md", "# Pruning\n\nPrune when the buds swell.\n");
  ASSERT_OK(engine.AddResources(paths, "strata://resources/orchard"));
  calls = 0;
  work = engine.Work();
  ASSERT_OK(work);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(engine.Stat(file)->abstract_text, "guide/prune.md: Pruning");

  // The same content cut at another size while its summary was being asked: that add's own summary was
  // taken for the job already running (the same file, the same hash), which then wrote the old cut's chunk
  // abstracts over the new chunks. Now the running job writes nothing, and the add's own job follows.
  testing::WriteFileOrDie(tree + "/guide/prune.md",
                          "# Pruning\n\nPrune apple trees in February, while they are dormant, cutting out dead, "
                          "diseased and crossing branches first.\n\nCover the young saplings with horticultural "
                          "fleece whenever a hard frost is forecast for the night.\n");
  ASSERT_OK(engine.AddResources(paths, "strata://resources/orchard", {.summarize = true}));
  ASSERT_EQ(engine.List(file)->size(), 1u);
  during_call = [&] {
    auto recut = engine.AddResources(paths, "strata://resources/orchard", {.extract = {.chunk_tokens = 16}, .summarize = true});
    EXPECT_OK(recut);
    if (recut.ok()) {
      EXPECT_EQ(recut->queued, 1);
    }
  };
  replies = {replies[1]};  // Usable at once.
  calls = 0;
  work = engine.Work();
  ASSERT_OK(work);
  EXPECT_EQ(calls, 2) << "the second cut's own summary was never asked";
  chunks = engine.List(file);
  ASSERT_OK(chunks);
  ASSERT_GE(chunks->size(), 2u);
  EXPECT_EQ((*chunks)[0].abstract_text, "When to prune.");
  EXPECT_EQ(Json::parse(engine.Stat(file)->metadata)["ingest"]["chunk_tokens"], 16);
}

// A summary the model has given waits for an add in progress (in any process) however long the add takes
// within reason, and is written: it waited ingest_wait like an add, failed, and its retry asked the model
// again, every attempt. An add itself still gives up after ingest_wait.
TEST(IngestSummary, ASummaryGivenWaitsForAnAddInsteadOfAskingTheModelAgain) {
  testing::TempDir dir;
  std::atomic<int> calls{0};
  std::function<void()> during_call;
  llm::ScriptedProvider model("scripted", [&](const llm::ScriptedProvider::Request&) {
    ++calls;
    if (during_call) std::exchange(during_call, nullptr)();
    return testing::TextReply(R"({"abstract": "How to prune an orchard.", "overview": "Pruning in February."})");
  });
  auto opened = Engine::Open({.data_dir = dir.File("data"), .model = &model, .ignore_prompt_env = true,
                              .shipped_prompts_dir = STRATA_PROMPTS_DIR,
                              .ingest_wait = std::chrono::milliseconds(100)});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  const std::string text = "# Pruning\n\nPrune in February.\n";
  std::vector<SourceFile> files = {{"prune.md", text, "", static_cast<int64_t>(text.size())}};
  ASSERT_OK(engine.AddResourceFiles(files, "strata://resources/orchard", {.summarize = true}));
  auto locks = session::OpenFileOwnerLocks(dir.File("data") + "/locks");
  ASSERT_OK(locks);
  std::unique_ptr<session::OwnerLocks::Held> held;
  std::atomic<bool> taken{false};  // Hands `held` to the thread that ends the add.
  during_call = [&] {  // Another process begins an add while the model answers.
    auto lock = (*locks)->Lock({"ingest"});
    ASSERT_OK(lock);
    held = std::move(*lock);
    taken.store(true);
  };
  std::thread add_ends([&] {
    for (int i = 0; i < 2000 && !taken.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // Six times an add's wait.
    if (taken.load()) held.reset();
  });
  auto work = engine.Work();
  add_ends.join();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 1);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(engine.Stat("strata://resources/orchard/prune.md")->abstract_text, "How to prune an orchard.");

  auto blocking = (*locks)->Lock({"ingest"});  // An add still gives up after ingest_wait.
  ASSERT_OK(blocking);
  Status refused = engine.AddResourceFiles(files, "strata://resources/orchard", {}).status();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
}

// A file's summary that died (the model refused for good) is revived by a retry of everything, as a dead
// phase 2 is; it stayed dead, and adding the unchanged file again queued nothing.
TEST(IngestSummary, ADeadSummaryIsRevivedByARetryOfEverything) {
  testing::TempDir dir;
  bool refuse = true;
  llm::ScriptedProvider model("scripted", [&](const llm::ScriptedProvider::Request&) {
    if (refuse) return llm::ScriptedReply{.error = Status::FailedPrecondition("the model's account is suspended")};
    return testing::TextReply(R"({"abstract": "How to prune an orchard.", "overview": "Pruning in February."})");
  });
  auto opened = Engine::Open({.data_dir = dir.File("data"), .model = &model, .ignore_prompt_env = true,
                              .shipped_prompts_dir = STRATA_PROMPTS_DIR});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  const std::string text = "# Pruning\n\nPrune in February.\n";
  std::vector<SourceFile> files = {{"prune.md", text, "", static_cast<int64_t>(text.size())}};
  ASSERT_OK(engine.AddResourceFiles(files, "strata://resources/orchard", {.summarize = true}));
  auto work = engine.Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->dead, 1);
  refuse = false;  // Whatever it was was mended.
  auto requeued = engine.Retry();
  ASSERT_OK(requeued);
  EXPECT_EQ(*requeued, 1);
  work = engine.Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 1);
  EXPECT_EQ(work->dead, 0);
  EXPECT_EQ(engine.Stat("strata://resources/orchard/prune.md")->abstract_text, "How to prune an orchard.");
}

}  // namespace
}  // namespace strata::ingest
