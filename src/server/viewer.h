// Internal to the server: the web viewer's files (web/*), compiled into the program by
// cmake/embed_files.cmake, and served by the routes in viewer.cc.
#pragma once

#include <span>
#include <string_view>

namespace strata::server {

struct EmbeddedFile {
  std::string_view name;   // The file name under web/ ("index.html").
  std::string_view bytes;  // Its content.
};

// Every embedded file, sorted by name (generated).
std::span<const EmbeddedFile> EmbeddedFiles();

}  // namespace strata::server
