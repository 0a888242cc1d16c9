// HTML to Markdown-like text through libxml2's HTML parser (which recovers from the usual tag soup):
// headings become "#" lines, block elements paragraphs, list items "- " lines; scripts, styles and other
// non-text elements are dropped.
#include <libxml/HTMLparser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "ingest_internal.h"
#include "strata/json/json_writer.h"

namespace strata::ingest::internal {
namespace {

bool Is(const xmlNode* n, const char* name) {
  return n->name != nullptr && xmlStrcasecmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}

bool Dropped(const xmlNode* n) {
  for (const char* name : {"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "head",
                           "button", "select", "math"}) {
    if (Is(n, name)) return true;
  }
  return false;
}

// Elements that end a paragraph of the text (headings aside: HeadingLevel), in the parsed tree and in the
// one-pass reading of markup the parser gave up on (TextOfMarkup).
constexpr const char* kBlockElements[] = {"p",       "div",     "li",      "pre",        "blockquote", "tr",
                                          "dt",      "dd",      "section", "article",    "table",      "ul",
                                          "ol",      "dl",      "br",      "hr",         "header",     "footer",
                                          "main",    "aside",   "nav",     "figure",     "figcaption", "address",
                                          "form",    "fieldset", "details", "summary",   "caption",    "body"};

bool BlockElement(const xmlNode* n) {
  for (const char* name : kBlockElements) {
    if (Is(n, name)) return true;
  }
  return false;
}

int HeadingLevel(const xmlNode* n) {
  if (n->name == nullptr || std::strlen(reinterpret_cast<const char*>(n->name)) != 2) return 0;
  char h = static_cast<char>(n->name[0]), d = static_cast<char>(n->name[1]);
  return (h == 'h' || h == 'H') && d >= '1' && d <= '6' ? d - '0' : 0;
}

// libxml2's HTML parser stops at this many open elements (xmlParserMaxDepth, 256), give or take the root's.
constexpr size_t kDeepestParsed = 250;

// The text of a page read without a parser, in one pass: comments, scripts and styles dropped, tags dropped
// (a block's tag breaks the paragraph), the common entities decoded. For pages the parser cannot read whole.
// A '<' opens a tag only before a letter, '/', '!' or '?' ("a < b" is text), and a tag ends at the first '>'
// outside quotes.
std::string TextOfMarkup(std::string_view html) {
  auto lower = [](char ch) { return static_cast<char>(std::tolower(static_cast<unsigned char>(ch))); };
  // Whether a tag named `word` (case aside) starts at html[at], the name ending there.
  auto named = [&](size_t at, std::string_view word) {
    if (at + word.size() > html.size()) return false;
    for (size_t k = 0; k < word.size(); ++k) {
      if (lower(html[at + k]) != word[k]) return false;
    }
    const size_t after = at + word.size();
    return after == html.size() || html[after] == '>' || html[after] == '/' ||
           std::isspace(static_cast<unsigned char>(html[after]));
  };
  // The end of the tag opened at html[at] (the index after its '>'), quoted attribute values skipped.
  auto tag_end = [&](size_t at) {
    char quote = 0;
    for (size_t k = at + 1; k < html.size(); ++k) {
      const char ch = html[k];
      if (quote != 0) {
        if (ch == quote) quote = 0;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '>') {
        return k + 1;
      }
    }
    return html.size();
  };
  std::string out;
  bool space = false;
  for (size_t i = 0; i < html.size();) {
    const char c = html[i];
    const char next = i + 1 < html.size() ? html[i + 1] : '\0';
    if (c == '<' && (std::isalpha(static_cast<unsigned char>(next)) || next == '/' || next == '!' || next == '?')) {
      if (html.compare(i, 4, "<!--") == 0) {
        // "<!-->" and "<!--->" are whole (empty) comments.
        size_t end = html.compare(i, 5, "<!-->") == 0 ? i + 2 : html.compare(i, 6, "<!--->") == 0 ? i + 3 : html.find("-->", i + 4);
        i = end == std::string_view::npos ? html.size() : end + 3;
        continue;
      }
      size_t end = tag_end(i);
      std::string_view tag = html.substr(i + 1, end - i - 1);
      for (std::string_view raw : {"script", "style"}) {
        if (named(i + 1, raw)) {
          // Its text is not the page's: skip to its end tag.
          size_t close = i + 1;
          while ((close = html.find("</", close)) != std::string_view::npos && !named(close + 2, raw)) close += 2;
          end = close == std::string_view::npos ? html.size() : tag_end(close);
          tag = raw;
          break;
        }
      }
      if (!tag.empty() && tag[0] == '/') tag.remove_prefix(1);
      size_t name_end = 0;
      while (name_end < tag.size() && std::isalnum(static_cast<unsigned char>(tag[name_end]))) ++name_end;
      std::string name(tag.substr(0, name_end));
      for (char& ch : name) ch = lower(ch);
      const bool heading = name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6';
      if (heading || std::find(std::begin(kBlockElements), std::end(kBlockElements), name) != std::end(kBlockElements)) {
        while (!out.empty() && out.back() == ' ') out.pop_back();
        if (!out.empty() && !out.ends_with("\n\n")) out += "\n\n";
        space = false;
      }
      i = end;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f') {
      space = !out.empty() && out.back() != '\n';
      ++i;
      continue;
    }
    if (space) out += ' ';
    space = false;
    if (c == '&') {
      static constexpr std::pair<std::string_view, std::string_view> kEntities[] = {
          {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&apos;", "'"},
          {"&nbsp;", " "}};
      bool decoded = false;
      for (const auto& [entity, text] : kEntities) {
        if (html.compare(i, entity.size(), entity) == 0) {
          out += text;
          i += entity.size();
          decoded = true;
          break;
        }
      }
      if (decoded) continue;
    }
    out += c;
    ++i;
  }
  // The bytes were not decoded as the page declares them: what is not UTF-8 becomes U+FFFD.
  return json::ReplaceInvalidUtf8(out);
}

struct Writer {
  std::string out;
  std::string line;  // The paragraph being written.
  int pre = 0;
  size_t deepest = 0;  // The most elements open at once.

  void Break() {
    size_t end = line.find_last_not_of(" \n");
    if (end != std::string::npos) {
      out += line.substr(0, end + 1);
      out += "\n\n";
    }
    line.clear();
  }
  void Text(const char* text) {
    if (pre > 0) {
      line += text;
      return;
    }
    for (const char* p = text; *p != '\0'; ++p) {
      bool space = *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == '\f';
      if (space) {
        if (!line.empty() && line.back() != ' ' && line.back() != '\n') line += ' ';
      } else {
        line += *p;
      }
    }
  }
  // Walks the tree in document order with a stack of its own, as deep as the page nests (unclosed inline
  // tags in old HTML nest a level each: a recursion, or a depth cap, lost the text past it).
  void Walk(const xmlNode* n) {
    struct Open {
      const xmlNode* node;
      bool heading, block, is_pre;
    };
    std::vector<Open> open;
    while (true) {
      if (n == nullptr) {
        if (open.empty()) return;
        const Open o = open.back();
        open.pop_back();
        if (o.heading) {
          Break();
        } else {
          pre -= o.is_pre ? 1 : 0;
          if (o.block) Break();
        }
        n = o.node->next;
        continue;
      }
      if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
        if (n->content != nullptr) Text(reinterpret_cast<const char*>(n->content));
        n = n->next;
        continue;
      }
      if (n->type != XML_ELEMENT_NODE || Dropped(n)) {
        n = n->next;
        continue;
      }
      if (int level = HeadingLevel(n); level > 0) {
        Break();
        line = std::string(static_cast<size_t>(level), '#') + " ";
        open.push_back({n, true, false, false});
        deepest = std::max(deepest, open.size());
        n = n->children;
        continue;
      }
      bool block = BlockElement(n);
      if (block) Break();
      if (Is(n, "li")) line += "- ";
      if (Is(n, "td") || Is(n, "th")) line += line.empty() ? "" : " | ";
      bool is_pre = Is(n, "pre");
      pre += is_pre ? 1 : 0;
      open.push_back({n, false, block, is_pre});
      deepest = std::max(deepest, open.size());
      n = n->children;
    }
  }
};

std::string Title(const xmlNode* n, int depth) {
  for (; n != nullptr && depth < 50; n = n->next) {
    if (n->type != XML_ELEMENT_NODE) continue;
    if (Is(n, "title")) {
      xmlChar* text = xmlNodeGetContent(n);
      std::string t = text != nullptr ? reinterpret_cast<const char*>(text) : "";
      xmlFree(text);
      size_t start = t.find_first_not_of(" \t\r\n");
      if (start == std::string::npos) return "";
      t = t.substr(start, t.find_last_not_of(" \t\r\n") - start + 1);
      for (char& c : t) c = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
      return t;
    }
    if (Is(n, "body")) return "";
    std::string inner = Title(n->children, depth + 1);
    if (!inner.empty()) return inner;
  }
  return "";
}

}  // namespace

Result<Extracted> ExtractHtml(std::string_view bytes, const ExtractOptions& options) {
  static std::once_flag init;
  std::call_once(init, [] { xmlInitParser(); });
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) return Status::InvalidArgument("too large for the HTML parser");
  htmlParserCtxtPtr ctxt = htmlNewParserCtxt();
  if (ctxt == nullptr) return Status::Internal("html: out of memory");
  htmlDocPtr doc = htmlCtxtReadMemory(ctxt, bytes.data(), static_cast<int>(bytes.size()), "page.html", nullptr,
                                      HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET);
  // libxml2 halts (the rest of the page unread) at 256 open elements — counted over every element, those
  // the walk skips too — and at a text node over 10 MB: a halted parser has SAX disabled.
  const bool halted = ctxt->disableSAX != 0;
  htmlFreeParserCtxt(ctxt);
  if (doc == nullptr) return Status::InvalidArgument("not HTML that libxml2 can read");
  const xmlNode* root = xmlDocGetRootElement(doc);
  Extracted out;
  out.kind = FileKind::kHtml;
  out.title = Title(root, 0);
  Writer w;
  w.Walk(root);
  w.Break();
  xmlFreeDoc(doc);
  // libxml2 stops reading (the rest of the page lost) at 256 open elements, which old HTML's unclosed inline
  // tags reach (400 unclosed <font>s), or at a text node over 10 MB. Then the page's text is read without its
  // structure instead: every word is kept. (XML_PARSE_HUGE lifts the limit, but matching each end tag against that many open ones
  // made a 1 MB page of them take 50 s.)
  if (halted || w.deepest >= kDeepestParsed) w.out = TextOfMarkup(bytes);
  std::string first_heading;
  std::vector<Block> blocks = MarkdownBlocks(w.out, &first_heading, /*keep_ranges=*/false);
  if (out.title.empty()) out.title = first_heading;
  out.chunks = PackBlocks(blocks, options.chunk_tokens);
  if (out.chunks.empty()) return Status::InvalidArgument("no text in it (only markup, scripts or styles)");
  return out;
}

}  // namespace strata::ingest::internal
