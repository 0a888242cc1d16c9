// The web viewer's routes: its files at / and /viewer/<file> (embedded at build time, no key needed: they
// hold no data, and the page asks for a key before it calls the API), and the change stream
// GET /api/v1/events that keeps an open page current.
#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "server_impl.h"
#include "viewer.h"

namespace strata::server {
namespace {

std::string_view ContentType(std::string_view name) {
  auto ends = [&](std::string_view ext) { return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext; };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

// The page runs only the viewer's own scripts and styles and talks only to this server; no other site may
// frame it. Every stored string reaches the document as text (web/dom.js), and this policy is the second
// wall should one ever not.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; frame-ancestors 'none'";

void ServeFile(const EmbeddedFile& file, HttpResponse& res) {
  res.status = 200;
  res.content_type = std::string(ContentType(file.name));
  res.body = std::string(file.bytes);
  res.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Referrer-Policy", "no-referrer");
  res.headers.emplace_back("X-Frame-Options", "DENY");
  // The files change only with the program: revalidate rather than run an old viewer on a new server.
  res.headers.emplace_back("Cache-Control", "no-cache");
}

const EmbeddedFile* FindFile(std::string_view name) {
  for (const EmbeddedFile& f : EmbeddedFiles()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

int64_t Server::Impl::RandomRevisionBase() {
  std::random_device device;
  const uint64_t bits = (static_cast<uint64_t>(device()) << 32) | device();
  return static_cast<int64_t>(bits & ((uint64_t{1} << 52) - 1));  // Exact as a JavaScript number, with room.
}

void Server::Impl::BumpRevision(const Engine* engine) {
  std::lock_guard lock(revisions_mu);
  ++revisions.try_emplace(engine, revision_base).first->second;
}

int64_t Server::Impl::Revision(const Engine* engine) {
  std::lock_guard lock(revisions_mu);
  auto it = revisions.find(engine);
  return it == revisions.end() ? revision_base : it->second;
}

void Server::Impl::AddViewerRoutes() {
  Add(Route("GET", "/", [](Call& c) -> Result<Json> {
         const EmbeddedFile* index = FindFile("index.html");
         if (index == nullptr) return Status::NotFound("this program was built without the viewer");
         ServeFile(*index, c.res);
         c.raw = true;
         return Json();
       }).NoKey());
  Add(Route("GET", "/viewer/{file}", [](Call& c) -> Result<Json> {
         const EmbeddedFile* file = FindFile(c.req.path_params.at(0));
         if (file == nullptr) return Status::NotFound("the viewer has no file " + json::QuoteForError(c.req.path_params.at(0), 80));
         ServeFile(*file, c.res);
         c.raw = true;
         return Json();
       }).NoKey());

  // Server-Sent Events: "change" with the account's revision, at once and whenever a request through this
  // server (or its worker) changed the account's data. A viewer refetches what it shows on each one.
  Add(Route("GET", "/api/v1/events", [this](Call& c) -> Result<Json> {
         STRATA_ASSIGN_OR_RETURN(std::shared_ptr<StreamSlot> slot, TakeEventSlot());
         const Engine* engine = c.engine;
         c.res.content_type = "text/event-stream";
         c.res.headers.emplace_back("Cache-Control", "no-cache");
         c.raw = true;
         // The key is checked again every few seconds: a stream opened with a key revoked since ends.
         auto request = std::make_shared<HttpRequest>(c.req);
         c.res.stream = [this, engine, slot, request](const ChunkWriter& write) {
           int64_t sent = -1;
           auto last_write = std::chrono::steady_clock::now();
           auto last_check = last_write;
           auto until = last_write + std::chrono::hours(1);  // The page reconnects after.
           while (!shut_down.load() && std::chrono::steady_clock::now() < until) {
             auto t = std::chrono::steady_clock::now();
             if (t - last_check > std::chrono::seconds(5)) {
               last_check = t;
               if (std::optional<std::string> refused = StreamRefusal(*request)) {
                 write(*refused);
                 return;
               }
             }
             int64_t now = Revision(engine);
             if (now != sent) {
               if (!write("event: change\ndata: {\"revision\":" + std::to_string(now) + "}\n\n")) return;
               sent = now;
               last_write = t;
             } else if (t - last_write > std::chrono::seconds(5)) {  // Also how soon a gone client is noticed.
               if (!write(": keep-alive\n\n")) return;
               last_write = t;
             }
             std::this_thread::sleep_for(std::chrono::milliseconds(100));
           }
         };
         return Json();
       }));
}

}  // namespace strata::server
