// Built-in tools for an agent chat (`strata chat`, or any Conversation given the toolset), so a first chat
// can use tools before any MCP server is configured:
//
//   read_file       {path, line_offset?, n_lines?}  numbered lines of a UTF-8 text file (at most n_lines,
//                                                    2,000 characters a line, max_read_bytes in all)
//   list_directory  {path?}                          a directory's entries, "/" after subdirectories
//   remember        {text, category?}                keeps a memory in the user's scope, deduplicated by the
//                                                    model; kept as a plain note when no model can be used
//   find            {query, limit?, token_budget?}   searches the user's memories and the shared scopes
//                                                    (Engine::Find for the user: the hits HTTP and MCP give)
//
// The file tools read with the permissions of the process, relative paths from its working directory;
// they never write. Every failure (a missing file, a binary file, a store error) is a tool result the model
// can read (tools/tool.h).
//
// Thread safety: the tools may run concurrently; they borrow `engine`, which must outlive the toolset.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "strata/engine/engine.h"
#include "strata/tools/tool.h"

namespace strata {

struct AgentToolsOptions {
  std::string user = "default";  // Whose memories remember and find reach.
  bool files = true;              // read_file, list_directory.
  bool memory = true;             // remember, find.
  size_t max_read_bytes = 100 << 10;  // read_file stops after this much text and says where it stopped.
  size_t max_entries = 1000;          // list_directory lists this many and says how many were left out.
};

// Adds the tools `options` selects to `toolset`. kAlreadyExists if a name is taken.
Status AddAgentTools(Engine* engine, const AgentToolsOptions& options, tools::Toolset* toolset);

}  // namespace strata
