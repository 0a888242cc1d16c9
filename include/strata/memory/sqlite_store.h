// The embedded context store: one SQLite database in WAL mode plus an hnswlib vector index beside it.
//
//   DIR/strata.db           nodes, FTS5 index, vectors, relations, embedding cache (docs/formats/context-store.md)
//   DIR/vectors.hnsw        the HNSW graph over the vectors table; DIR/vectors.hnsw.meta names the database
//                           generation it reflects. Older → caught up from the vector log on open; missing,
//                           unreadable, of another model or older than the log → rebuilt from the database
//                           (the database is the truth; the index is a cache).
//
// Every mutation is one IMMEDIATE transaction; the vector index is updated after the commit and saved by
// Flush() and on destruction (only when it is of the database's current generation). Other processes may
// share the database (WAL, busy timeout); a process notices their vector changes through the generation and
// applies them from the vector log (each vector's generation, the ids each generation removed) before its
// next vector search, or rebuilds its index when the log does not cover them.
//
// Thread safety: reads (Stat, Read, List, Glob, Grep, Relations, Lexical, VectorNeighbours, Similarities,
// GetStats) run in parallel, each on a read connection of its own (WAL); writes are serialised and exclude
// reads for the length of their transaction. A write embeds its texts before it takes the lock, so no
// lock is held across an embedder call.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "strata/memory/store.h"
#include "strata/util/clock.h"

namespace strata::memory {

struct SqliteStoreOptions {
  // Embeds node text; nullptr → NewLocalHashedEmbedder(). Opening with a different model id re-embeds
  // every node (batched, through the cache) before returning.
  std::shared_ptr<Embedder> embedder;
  // No embedder was chosen (the engine's default): a store that records another model keeps it — the local
  // embedder of its dimension, or kFailedPrecondition naming a remote model — instead of re-embedding every
  // node, which an instance serving the store with its own model would then refuse to read.
  bool keep_stored_model = false;
  // FULL: a committed call survives power loss; NORMAL: it survives a process crash (WAL), faster.
  bool synchronous_full = true;
  std::chrono::milliseconds busy_timeout{5000};  // Waiting for another process's write lock; then kUnavailable.
  int hnsw_m = 16;
  int hnsw_ef_construction = 200;
  int hnsw_ef_search = 64;
  // Threads that insert into the vector index when it is built from the table or a batch is written.
  // 1 by default; more (0: every core) is opt-in: hnswlib 0.6.2's concurrent insertion takes element locks
  // in a data-dependent order, which ThreadSanitizer reports as possible deadlocks (docs/PERFORMANCE.md).
  int index_threads = 1;
  // Below this many candidate vectors a filtered search is exact (a scan), above it it uses the HNSW graph.
  int64_t exact_search_below = 2000;
  Clock* clock = nullptr;  // nullptr → SystemClock() (wall time for created/updated).
  // Only read (--read-only): the database is opened read-only (immutable on a read-only volume), nothing
  // is created, migrated or saved, and every change is refused with kFailedPrecondition naming the mode. A
  // directory without a store reads as an empty one; a store that needs an upgrade (another schema,
  // full-text layout or embedder) is an error asking to open it once without --read-only.
  bool read_only = false;
};

// Opens (creating if needed) the store in directory `dir`.
Result<std::unique_ptr<ContextStore>> OpenSqliteStore(const std::string& dir, SqliteStoreOptions options = {});

}  // namespace strata::memory
