// The context store on PostgreSQL, for many Strata instances sharing one state (docs/formats/postgres.md).
//
// Nodes, relations, vectors and the embedding cache are tables (store_*); the full-text index is a
// weighted tsvector per node (name and overview B, abstract A, content D; the `english` configuration, so
// stemmed and without stop words) under a GIN index, ranked with ts_rank. Every mutation is one
// transaction that also takes the store's advisory lock, so writes from all instances are serialised as
// the embedded store serialises writes from all processes; reads run in parallel on pooled connections.
//
// Vectors: Debian 12 has no pgvector, so each instance keeps an in-process HNSW index (hnswlib) over the
// vectors table. A transaction that changes vectors bumps a generation counter, stamps the rows it wrote
// (and records the ids it removed) with it, and NOTIFYs the new generation. Each instance LISTENs; before
// a vector search it reads the notifications that arrived (no round trip when there are none) and applies
// the rows of the generations it has not seen. Notifications are asynchronous, so the statement that checks
// the graph's hits also reads the generation: an index behind it catches up and the search runs again, and
// a search never misses a write committed before it began (through any instance). A lost listening
// connection is re-established and the index caught up. The trade-off: every instance holds every vector in memory and builds the graph on first use
// (seconds at 100k nodes); in exchange a search costs no database work beyond checking its hits. Where
// pgvector exists, VectorNeighbours is the one place to change.
//
// Thread safety: safe to call from several threads.
#pragma once

#include <memory>
#include <string>

#include "strata/memory/store.h"
#include "strata/util/clock.h"

namespace strata::memory {

struct PgStoreOptions {
  // Embeds node text; nullptr → NewLocalHashedEmbedder(). Opening with a different model id re-embeds
  // every node before returning.
  std::shared_ptr<Embedder> embedder;
  // No embedder was chosen (the engine's default): a store that records another model keeps it — the local
  // embedder of its dimension, or kFailedPrecondition naming a remote model — instead of re-embedding every
  // node, which an instance serving the store with its own model would then refuse to read.
  bool keep_stored_model = false;
  int hnsw_m = 16;
  int hnsw_ef_construction = 200;
  int hnsw_ef_search = 64;
  // Threads that insert into the vector index when it is built from the table or a batch is written.
  // 1 by default; more (0: every core) is opt-in: hnswlib 0.6.2's concurrent insertion takes element locks
  // in a data-dependent order, which ThreadSanitizer reports as possible deadlocks (docs/PERFORMANCE.md).
  int index_threads = 1;
  // Below this many candidate vectors a filtered search is exact (a scan), above it it uses the HNSW graph.
  int64_t exact_search_below = 2000;
  Clock* clock = nullptr;  // nullptr → SystemClock().
  size_t max_idle_connections = 8;
  // Snapshots of the vector index kept in the database (docs/formats/postgres.md): an instance whose index
  // is not built yet loads the newest and catches up from the change feed instead of building it from the
  // table. An instance saves one (in the background; Flush waits for it) after building its index from the
  // table, and after `snapshot_every` vectors changed since the newest.
  bool index_snapshots = true;
  int64_t snapshot_every = 50000;
  // An instance that wrote this many vectors without searching (a bulk load: it never built its index)
  // builds the index in Flush and saves a snapshot; and one that caught up this many others wrote saves
  // one: the next instance then starts from it instead of catching up vector by vector on its first search.
  int64_t snapshot_after_bulk = 1000;
};

// Opens the store in the PostgreSQL database at `url` (postgres://…), creating or upgrading its tables.
Result<std::unique_ptr<ContextStore>> OpenPgStore(const std::string& url, PgStoreOptions options = {});

}  // namespace strata::memory
