// StrataClient: one method per route of Strata's HTTP API (docs/server.md, docs/api/openapi.yaml). Each
// method makes one request and returns the envelope's `result` (or the one value in it, such as read's
// content); the server does all the work. Every request goes through `call` (or `events` for the Server-Sent
// Events streams), which names the route by its path template in the API document, so that the types of
// its query, path parameters, body and result are the document's (types.ts).
//
// Not covered here: the model endpoints (/v1/chat/completions, /v1/messages), which the official OpenAI
// and Anthropic SDKs speak (point their baseURL at the server), MCP (/mcp) and the viewer's files.
import { StrataError, strataError } from "./errors.js";
import { parseSse } from "./sse.js";
import type {
  AddReport, ApiKey, ApiPath, AuditEntry, BodyOf, BodyRequired, ChangeEvent, ChatImportReport, Checkpoint, CommitDiff,
  CommitResult, CompactResult, ExportedTree, FindResult, GrepMatch, HttpMethod, ImportReport, IssuedKey, MemoryChange, Message,
  MethodOf, Node, NodeDetail, NodeList, NoEnvelope, PathParamsOf, QueryOf, QueryRequired, Relation, ResultOf, Session,
  SessionContext, SessionLog, SessionStatus, SourceFile, Task, TaskState, TokenCount, TreeFile,
  WaitedCommit,
} from "./types.js";

/** How a client reaches the server. */
export interface StrataClientOptions {
  /** The server's address, e.g. "http://127.0.0.1:8420"; a path prefix is kept ("https://host/strata"). */
  baseUrl: string;
  /**
   * An API key, sent as `Authorization: Bearer KEY`: an issued key (`sk-strata-...`) or the root key. None
   * for a server without keys (which listens on loopback only).
   */
  apiKey?: string | undefined;
  /** With the root key: the account to act in (`X-Strata-Account`; default: the default account). */
  account?: string | undefined;
  /** The fetch to call (default: the global one), e.g. one with a proxy agent, or a test double. */
  fetch?: typeof fetch | undefined;
  /**
   * Milliseconds a call may take before it fails with `deadline_exceeded` (default 120000; 0: no limit).
   * For the event streams (taskEvents, watch, commit's wait) it bounds the time until the stream opens.
   */
  timeoutMs?: number | undefined;
  /** Headers sent with every request (e.g. a tracing header). */
  headers?: Record<string, string> | undefined;
}

/** What every call also takes. */
export interface RequestOptions {
  /** Cancels the call (it fails with `cancelled`); for a stream, also ends it. */
  signal?: AbortSignal | undefined;
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number | undefined;
}

export interface WriteOptions extends RequestOptions {
  /** The L0 layer (default: derived from the content). */
  abstract?: string | undefined;
  /** The L1 layer (default: derived from the content). */
  overview?: string | undefined;
  category?: string | undefined;
  /** Stored with the node (a JSON object). */
  metadata?: Record<string, unknown> | undefined;
  /** false: writing over an existing leaf fails with `already_exists` (default true). */
  overwrite?: boolean | undefined;
}
export interface ReadOptions extends RequestOptions {
  /** 0 the abstract (L0), 1 the overview (L1), 2 the content (L2, the default). */
  level?: 0 | 1 | 2 | undefined;
}
export interface LsOptions extends RequestOptions {
  /** The whole subtree, not just the children. */
  recursive?: boolean | undefined;
  /** At most this many nodes (0, the default: all). */
  limit?: number | undefined;
}
export interface TreeOptions extends RequestOptions {
  /** At most this many nodes (0, the default: all). */
  limit?: number | undefined;
}
export interface RmOptions extends RequestOptions {
  /** Remove a directory and everything below it (without it, a non-empty directory is refused). */
  recursive?: boolean | undefined;
}
export interface MkdirOptions extends RequestOptions {
  /**
   * Its children form a sequence (a conversation's turns, a document's chunks): find lifts a hit's
   * neighbours only in such directories.
   */
  ordered?: boolean | undefined;
  abstract?: string | undefined;
  overview?: string | undefined;
}
export interface LinkOptions extends RequestOptions {
  /** Why the two are related. */
  reason?: string | undefined;
}
export interface GrepOptions extends RequestOptions {
  ignoreCase?: boolean | undefined;
}
export interface AddResourcesOptions extends RequestOptions {
  /** Remove what an earlier add to this URI brought from files not sent now (default false). */
  removeMissing?: boolean | undefined;
  /** Tokens per chunk at most (16-100000, default 512). */
  chunkTokens?: number | undefined;
  /** Queue the server's model to summarise each added or changed file (the result's `queued`). */
  summarize?: boolean | undefined;
}
export interface ImportSessionsOptions extends RequestOptions {
  /** Whose sessions they become (a user key: its own user; required for the root key). */
  user?: string | undefined;
  agent?: string | undefined;
  /** Commit each imported session (phase 2 queued: its memories). */
  commit?: boolean | undefined;
  /** The file's name, used in the report's `where`. */
  name?: string | undefined;
}
export interface FindOptions extends RequestOptions {
  /** At most this many hits (1-1000, default 10). */
  limit?: number | undefined;
  /** Below this URI only (default: everything the key reaches, ranked together). */
  under?: string | undefined;
  /**
   * One of the caller's sessions: a short query (under eight words, "and the second one?") is searched
   * together with the session's newest user message; the result's `searched` shows what was searched.
   */
  session?: string | undefined;
  /** > 0: only the best hits whose abstracts fit in this many tokens together (see each hit's `tokens`). */
  tokenBudget?: number | undefined;
  /** Only nodes of this type (default: all). */
  type?: "resource" | "memory" | "skill" | undefined;
  /**
   * Let the server's model rewrite the question into the searches that find its parts (the result's
   * `queries`); needs a model configured on the server. Its cost is in the result's `model`.
   */
  rewrite?: boolean | undefined;
  /** Let the server's model order the best `rerankCandidates` hits by how well they answer. */
  rerank?: boolean | undefined;
  /** Searches the model may write (1-8, default 3). */
  maxQueries?: number | undefined;
  /** Candidates the model orders (2-100, default 20). */
  rerankCandidates?: number | undefined;
}
export interface CreateSessionOptions extends RequestOptions {
  /** The session's id (default: a new one). */
  id?: string | undefined;
  /** Whose session it is (a user key: its own user, the default). */
  user?: string | undefined;
  /** The agent it talks to (its skills and shared memories). */
  agent?: string | undefined;
}
export interface CommitOptions extends RequestOptions {
  /**
   * Resolve only once phase 2 (summary, memory extraction, dedup) has finished, following the task's event
   * stream; the result then has the finished `task` (state "done", or "dead" with its `last_error`).
   */
  wait?: boolean | undefined;
}
export interface DeleteSessionOptions extends RequestOptions {
  /** Delete even while phase 2 of an archive is pending (its task is dropped). */
  force?: boolean | undefined;
}
export interface ContextOptions extends RequestOptions {
  /** The model's window in tokens (default: the server's `--window`). */
  maxContextTokens?: number | undefined;
  /** Tokens kept for the reply (default: min(4096, a quarter of the window)). */
  reserveForReply?: number | undefined;
  /** "o200k_base" (default), "cl100k_base" or "chars". */
  encoding?: string | undefined;
  /** What to recall memories for (default: the newest user message). */
  query?: string | undefined;
  /** How many memories to recall (0-100, default 5). */
  memoryLimit?: number | undefined;
  /** Instead of the session's own system prompt. */
  systemPrompt?: string | undefined;
}
export interface ForkOptions extends RequestOptions {
  /** The new session's id (default: a new one). */
  newId?: string | undefined;
  /** Copy the messages up to this checkpoint only (what `checkpoint()` returned: checked by its tag). */
  checkpoint?: number | Checkpoint | undefined;
}
export interface CompactOptions extends RequestOptions {
  /** What the summary should keep. */
  focus?: string | undefined;
}
export interface TasksOptions extends RequestOptions {
  /** Only this session's tasks. */
  session?: string | undefined;
  state?: TaskState | undefined;
  /** At most this many (1-10000, default 200). */
  limit?: number | undefined;
}
export interface RememberOptions extends RequestOptions {
  /** Whose memory it is: "strata://user/<id>" or "strata://agent/<id>". */
  scope: string;
  /** preferences, profile, entities, events, cases or patterns (default: chosen from the text). */
  category?: string | undefined;
}
export interface ChangesOptions extends RequestOptions {
  /** At or below this URI (default: everything the key reaches; a user key: its own scope). */
  under?: string | undefined;
  /** At most this many (1-1000, default 50). */
  limit?: number | undefined;
}
export interface CountTokensOptions extends RequestOptions {
  /** "o200k_base" (default), "cl100k_base" or "chars" (characters / 4). */
  encoding?: string | undefined;
}
export interface IssueKeyOptions extends RequestOptions {
  user: string;
  /** Default: the default account. */
  account?: string | undefined;
  /** "user" (default): its own scope and sessions; "admin": the whole account. */
  role?: "user" | "admin" | undefined;
}

/** A member `K` of type `T`, required or optional as the document says, and absent when `T` is never. */
type Slot<K extends string, T, Required extends boolean> =
  [T] extends [never] ? { [_ in K]?: undefined } : Required extends true ? { [_ in K]: T } : { [_ in K]?: T };
/** What `call` takes for a route: its path parameters, its query and its body, as the document has them. */
type CallInit<P extends ApiPath, M extends HttpMethod> =
  Slot<"path", PathParamsOf<P, M>, true> & Slot<"query", QueryOf<P, M>, QueryRequired<P, M>> &
  Slot<"body", BodyOf<P, M>, BodyRequired<P, M>>;

/** The routes that answer Server-Sent Events. */
type StreamPath = "/api/v1/tasks/{id}/events" | "/api/v1/events";

/** A task's states after which it never changes. */
const kTerminal: readonly TaskState[] = ["done", "dead"];
const kDefaultTimeoutMs = 120_000;
/** How often commit's wait asks for the task when it cannot follow its event stream. */
const kPollIntervalMs = 500;

/**
 * A client of one Strata server. Safe to share: it keeps no state between calls but its options.
 *
 * Results carry the server's field names (`is_dir`, `created_ms`, `task_id`, ...); options are camelCase
 * and are sent under the server's names. Every failure is a {@link StrataError}.
 */
/** The nodes of a listing with `truncated` always set (false unless the server said the limit cut it). */
function asNodeList(nodes: Node[]): NodeList {
  if (!("truncated" in nodes)) Object.defineProperty(nodes, "truncated", { value: false, enumerable: false });
  return nodes as NodeList;
}

export class StrataClient {
  readonly baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #account: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;

  /**
   * Throws InvalidArgumentError (status 0) when `baseUrl` is not an http(s) URL or `timeoutMs` is negative, as
   * the Python client's constructor raises it, and a TypeError when no fetch is available.
   */
  constructor(options: StrataClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw badOption(`baseUrl must be an http(s) URL, not ${JSON.stringify(options.baseUrl)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw badOption(`baseUrl must be an http(s) URL, not ${JSON.stringify(options.baseUrl)}`);
    }
    if (url.search !== "" || url.hash !== "") {
      throw badOption(`baseUrl must not have a query or fragment: ${JSON.stringify(options.baseUrl)}`);
    }
    this.baseUrl = url.href.replace(/\/+$/, "");
    const timeoutMs = options.timeoutMs ?? kDefaultTimeoutMs;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw badOption(`timeoutMs must be 0 or more, not ${timeoutMs}`);
    }
    this.#timeoutMs = timeoutMs;
    if (options.fetch === undefined && typeof globalThis.fetch !== "function") {
      throw new TypeError("no fetch: pass one as options.fetch (Node 20+ and browsers have a global fetch)");
    }
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#apiKey = options.apiKey;
    this.#account = options.account;
    this.#headers = { ...options.headers };
  }

  // ---- Service ----

  /** Resolves when the process answers (`{alive: true}`); needs no key. */
  health(options: RequestOptions = {}): Promise<ResultOf<"/health", "get">> {
    return this.call("get", "/health", {}, options);
  }

  /** Resolves when the default account's store and sessions are open; fails with the server's error otherwise. */
  ready(options: RequestOptions = {}): Promise<ResultOf<"/ready", "get">> {
    return this.call("get", "/ready", {}, options);
  }

  /** Returns the Prometheus metrics text (the root key only). */
  metrics(options: RequestOptions = {}): Promise<string> {
    return this.text("/metrics", options);
  }

  // ---- The store ----

  /** Writes a leaf at `uri` (its parents are created) and returns its node. */
  write(uri: string, content: string, options: WriteOptions = {}): Promise<Node> {
    const { abstract, overview, category, metadata, overwrite } = options;
    return this.call("post", "/api/v1/fs/write",
                     { body: { uri, content, abstract, overview, category, metadata, overwrite } }, options);
  }

  /** Returns one layer of the node at `uri`: its content (the default), overview or abstract. */
  async read(uri: string, options: ReadOptions = {}): Promise<string> {
    return (await this.call("get", "/api/v1/fs/read", { query: { uri, level: options.level } }, options)).content;
  }

  /**
   * Lists the directory at `uri` (default: everything for an admin key, the user's own scope for a user
   * key); with `recursive`, its whole subtree.
   */
  async ls(uri?: string, options: LsOptions = {}): Promise<NodeList> {
    return asNodeList(await this.call("get", "/api/v1/fs/ls",
                                      { query: { uri, recursive: options.recursive, limit: options.limit } }, options));
  }

  /** Lists the subtree at `uri` (default as for ls), parents before children. */
  async tree(uri?: string, options: TreeOptions = {}): Promise<NodeList> {
    return asNodeList(await this.call("get", "/api/v1/fs/tree", { query: { uri, limit: options.limit } }, options));
  }

  /** Returns the node at `uri` with its overview, metadata and the relations the caller may see. */
  stat(uri: string, options: RequestOptions = {}): Promise<NodeDetail> {
    return this.call("get", "/api/v1/fs/stat", { query: { uri } }, options);
  }

  /** Removes the node at `uri` (a subtree with `recursive`); returns how many nodes went. */
  rm(uri: string, options: RmOptions = {}): Promise<ResultOf<"/api/v1/fs", "delete">> {
    return this.call("delete", "/api/v1/fs", { query: { uri, recursive: options.recursive } }, options);
  }

  /** Moves a node or subtree. */
  mv(from: string, to: string, options: RequestOptions = {}): Promise<ResultOf<"/api/v1/fs/mv", "post">> {
    return this.call("post", "/api/v1/fs/mv", { body: { from, to } }, options);
  }

  /** Creates a directory (and its parents) and returns its node. */
  mkdir(uri: string, options: MkdirOptions = {}): Promise<Node> {
    const { ordered, abstract, overview } = options;
    return this.call("post", "/api/v1/fs/mkdir", { body: { uri, ordered, abstract, overview } }, options);
  }

  /** Relates two nodes. */
  link(from: string, to: string, options: LinkOptions = {}): Promise<Relation> {
    return this.call("post", "/api/v1/fs/link", { body: { from, to, reason: options.reason } }, options);
  }

  /** Removes the relation between two nodes. */
  unlink(from: string, to: string, options: RequestOptions = {}): Promise<ResultOf<"/api/v1/fs/unlink", "post">> {
    return this.call("post", "/api/v1/fs/unlink", { body: { from, to } }, options);
  }

  /**
   * Returns the nodes whose path matches `pattern` (`*`, `?`, `**`, `[...]`), below `under` (default:
   * everything the key may read).
   */
  glob(pattern: string, under?: string, options: RequestOptions = {}): Promise<Node[]> {
    return this.call("get", "/api/v1/fs/glob", { query: { pattern, under } }, options);
  }

  /** Returns the lines of leaves below `under` (default as for glob) that contain `pattern`. */
  grep(pattern: string, under?: string, options: GrepOptions = {}): Promise<GrepMatch[]> {
    return this.call("get", "/api/v1/fs/grep", { query: { pattern, under, ignore_case: options.ignoreCase } }, options);
  }

  /** Returns the subtree at `uri` as its Markdown tree (docs/formats/markdown-tree.md). */
  exportFiles(uri: string, options: RequestOptions = {}): Promise<ExportedTree> {
    return this.call("get", "/api/v1/fs/export", { query: { uri } }, options);
  }

  /** Reads the files of a Markdown tree (as exportFiles returns them) into the store below `uri`. */
  importFiles(files: readonly TreeFile[], uri: string, options: RequestOptions = {}): Promise<ImportReport> {
    return this.call("post", "/api/v1/fs/import", { body: { uri, files: [...files] } }, options);
  }

  // ---- Retrieval ----

  /**
   * Finds what is relevant to `query` (hybrid lexical and vector retrieval over the hierarchy): hits best
   * first, each with its `uri`, `score`, `abstract`, `reason` and `tokens`.
   */
  find(query: string, options: FindOptions = {}): Promise<FindResult> {
    const { limit, under, session, tokenBudget, type, rewrite, rerank, maxQueries, rerankCandidates } = options;
    return this.call("post", "/api/v1/search/find",
                     { body: { query, limit, under, session, token_budget: tokenBudget, type, rewrite, rerank,
                               max_queries: maxQueries, rerank_candidates: rerankCandidates } }, options);
  }

  // ---- Sessions ----

  /** Creates a session (a user key: its own user's) and returns it. */
  createSession(options: CreateSessionOptions = {}): Promise<Session> {
    const { id, user, agent } = options;
    return this.call("post", "/api/v1/sessions", { body: { id, user, agent } }, options);
  }

  /**
   * Adds documents and code as resources below `uri`: each file (`path`, `content`, and `encoding: "base64"`
   * for bytes such as a PDF) becomes a directory of chunks that find searches; a file sent again unchanged is
   * not written again. With `removeMissing`, files an earlier add to `uri` brought and not sent now are removed.
   */
  addResources(uri: string, files: readonly SourceFile[], options: AddResourcesOptions = {}): Promise<AddReport> {
    const { removeMissing, chunkTokens, summarize } = options;
    return this.call("post", "/api/v1/resources",
                     { body: { uri, files: [...files], remove_missing: removeMissing, chunk_tokens: chunkTokens,
                               summarize } },
                     options);
  }

  /**
   * Imports a chat export's text (`format`: chatgpt, claude, kimi or openai-jsonl) as sessions, each with its
   * title and original times; a user key imports for its own user. Importing it again adds nothing.
   */
  importSessions(format: "chatgpt" | "claude" | "kimi" | "openai-jsonl", content: string,
                 options: ImportSessionsOptions = {}): Promise<ChatImportReport> {
    const { user, agent, commit, name } = options;
    return this.call("post", "/api/v1/sessions/import", { body: { format, content, user, agent, commit, name } },
                     options);
  }

  /** Returns the sessions the key may see (a user key: its own). */
  listSessions(options: RequestOptions = {}): Promise<Session[]> {
    return this.call("get", "/api/v1/sessions", {}, options);
  }

  /** Returns a session with its current (uncommitted) messages. */
  getSession(sessionId: string, options: RequestOptions = {}): Promise<Session> {
    return this.call("get", "/api/v1/sessions/{id}", { path: { id: sessionId } }, options);
  }

  /** Appends messages (OpenAI-shaped kosong JSON) to a session and returns the session. */
  addMessages(sessionId: string, messages: Message | readonly Message[],
              options: RequestOptions = {}): Promise<Session> {
    const list: Message[] = Array.isArray(messages) ? [...(messages as readonly Message[])] : [messages as Message];
    return this.call("post", "/api/v1/sessions/{id}/messages", { path: { id: sessionId }, body: { messages: list } },
                     options);
  }

  /** Returns a session's current (uncommitted) messages. */
  messages(sessionId: string, options: RequestOptions = {}): Promise<Message[]> {
    return this.call("get", "/api/v1/sessions/{id}/messages", { path: { id: sessionId } }, options);
  }

  /**
   * Commits a session: its current messages move into an archive (phase 1, done when this resolves) and
   * phase 2 — summary, memory extraction, dedup — is queued as the task `task_id`. With `wait`, resolves
   * once that task has finished, with the task, the archive's `state` and `error`, and when it is done its
   * `diff` (what the in-process Engine's commit with wait and the Python Client return).
   */
  commit(sessionId: string, options: CommitOptions & { wait: true }): Promise<WaitedCommit>;
  commit(sessionId: string, options?: CommitOptions): Promise<CommitResult>;
  async commit(sessionId: string, options: CommitOptions = {}): Promise<CommitResult | WaitedCommit> {
    const committed = await this.call("post", "/api/v1/sessions/{id}/commit", { path: { id: sessionId } }, options);
    if (!options.wait) return committed;
    let task: Task | undefined;
    try {
      for await (const t of this.taskEvents(committed.task_id, options)) task = t;
    } catch (error) {
      // The server holds a limited number of streams open (429): the commit is made, so ask instead.
      if (!(error instanceof StrataError && error.code === "resource_exhausted")) throw error;
    }
    // Also when the stream ended before the task did (the server's hour per stream).
    while (task === undefined || !kTerminal.includes(task.state)) {
      if (task !== undefined) await pause(kPollIntervalMs, options.signal, `waiting for task ${committed.task_id}`);
      task = await this.task(committed.task_id, options);
    }
    // The archive's state (and why it failed), as the in-process Engine's commit and the Python Client
    // report it; the diff once it is done.
    const status = await this.sessionStatus(sessionId, options);
    const archive = status.archives.find((a) => a.archive === committed.archive);
    const waited: WaitedCommit = { ...committed, task };
    if (archive !== undefined) waited.state = archive.state;
    if (archive?.error) waited.error = archive.error;
    if (task.state === "dead" && waited.error === undefined) waited.error = task.last_error || "phase 2 failed";
    if (waited.state === "done") waited.diff = await this.archiveDiff(sessionId, committed.archive, options);
    return waited;
  }

  /**
   * What phase 2 changed for one of a session's archives: its summary, how many memories extraction
   * proposed, and the memory changes. Rejects with `failed_precondition` until that archive is done.
   */
  archiveDiff(sessionId: string, archive: number, options: RequestOptions = {}): Promise<CommitDiff> {
    return this.call("get", "/api/v1/sessions/{id}/archives/{archive}/diff", { path: { id: sessionId, archive } },
                     options);
  }

  /** Returns a session's archives and phase-2 tasks. */
  sessionStatus(sessionId: string, options: RequestOptions = {}): Promise<SessionStatus> {
    return this.call("get", "/api/v1/sessions/{id}/status", { path: { id: sessionId } }, options);
  }

  /** Queues a session's failed archives and dead tasks again (once the cause is fixed). */
  retry(sessionId: string, options: RequestOptions = {}): Promise<ResultOf<"/api/v1/sessions/{id}/retry", "post">> {
    return this.call("post", "/api/v1/sessions/{id}/retry", { path: { id: sessionId } }, options);
  }

  /**
   * Queues again everything of the account that failed for good (the root key only): every session's failed
   * archives and dead jobs, and the dead jobs of no session (a file's summary by the model), as
   * `strata session retry` without an id.
   */
  retryAll(options: RequestOptions = {}): Promise<ResultOf<"/api/v1/admin/retry", "post">> {
    return this.call("post", "/api/v1/admin/retry", {}, options);
  }

  /**
   * Deletes a session: its messages, archives and state (memories it produced stay). Refused with
   * `failed_precondition` while phase 2 is pending, unless `force`.
   */
  deleteSession(sessionId: string,
                options: DeleteSessionOptions = {}): Promise<ResultOf<"/api/v1/sessions/{id}", "delete">> {
    return this.call("delete", "/api/v1/sessions/{id}", { path: { id: sessionId }, query: { force: options.force } },
                     options);
  }

  /**
   * Returns the window a model would be sent for this session (the system prompt with recalled memories,
   * the summary, the newest history that fits), with exact tokens per section and per message.
   */
  context(sessionId: string, options: ContextOptions = {}): Promise<SessionContext> {
    const query: QueryOf<"/api/v1/sessions/{id}/context", "get"> = {
      max_context_tokens: options.maxContextTokens,
      reserve_for_reply: options.reserveForReply,
      encoding: options.encoding,
      query: options.query,
      memory_limit: options.memoryLimit,
      system_prompt: options.systemPrompt,
    };
    return this.call("get", "/api/v1/sessions/{id}/context", { path: { id: sessionId }, query }, options);
  }

  /**
   * Marks the current end of the messages; returns the checkpoint: its `checkpoint` id (0, 1, ... within the
   * current messages), `messages` before it and `tag`. Give it back to revert or fork whole: the id names
   * another checkpoint after a commit, revert or compaction, and the tag makes them refuse then.
   */
  checkpoint(sessionId: string, options: RequestOptions = {}): Promise<Checkpoint> {
    return this.call("post", "/api/v1/sessions/{id}/checkpoints", { path: { id: sessionId } }, options);
  }

  /** Returns the session's log: messages, checkpoints, usage marks, system prompt, rotations. */
  sessionLog(sessionId: string, options: RequestOptions = {}): Promise<SessionLog> {
    return this.call("get", "/api/v1/sessions/{id}/log", { path: { id: sessionId } }, options);
  }

  /**
   * Drops a checkpoint and every message after it (the old log is kept as a rotation). Given what
   * `checkpoint()` returned, only while its id still names that checkpoint (a 409 StrataError otherwise);
   * given an id alone, whichever checkpoint has it now.
   */
  revert(sessionId: string, checkpoint: number | Checkpoint, options: RequestOptions = {}): Promise<Session> {
    return this.call("post", "/api/v1/sessions/{id}/revert",
                     { path: { id: sessionId }, body: checkpointBody(checkpoint) }, options);
  }

  /** Starts a new session with the same owners, system prompt and messages (up to a checkpoint). */
  fork(sessionId: string, options: ForkOptions = {}): Promise<Session> {
    const { newId, checkpoint } = options;
    const at = checkpoint === undefined ? {} : checkpointBody(checkpoint);
    return this.call("post", "/api/v1/sessions/{id}/fork", { path: { id: sessionId }, body: { id: newId, ...at } },
                     options);
  }

  /** Sets the session's system prompt. */
  setSystemPrompt(sessionId: string, prompt: string, options: RequestOptions = {}):
      Promise<ResultOf<"/api/v1/sessions/{id}/system-prompt", "post">> {
    return this.call("post", "/api/v1/sessions/{id}/system-prompt", { path: { id: sessionId }, body: { prompt } },
                     options);
  }

  /** Records a usage mark: the provider-reported token count of the session's whole context. */
  recordUsage(sessionId: string, tokens: number, options: RequestOptions = {}):
      Promise<ResultOf<"/api/v1/sessions/{id}/usage", "post">> {
    return this.call("post", "/api/v1/sessions/{id}/usage", { path: { id: sessionId }, body: { tokens } }, options);
  }

  /** Folds older messages into a summary with the server's model, keeping the newest turns. */
  compact(sessionId: string, options: CompactOptions = {}): Promise<CompactResult> {
    return this.call("post", "/api/v1/sessions/{id}/compact",
                     { path: { id: sessionId }, body: { focus: options.focus } }, options);
  }

  // ---- Tasks (phase 2 of commits) ----

  /** Returns a task. */
  task(taskId: number, options: RequestOptions = {}): Promise<Task> {
    return this.call("get", "/api/v1/tasks/{id}", { path: { id: taskId } }, options);
  }

  /** Returns the tasks the key may see (a user key: its own sessions'), newest first. */
  tasks(options: TasksOptions = {}): Promise<Task[]> {
    const { session, state, limit } = options;
    return this.call("get", "/api/v1/tasks", { query: { session, state, limit } }, options);
  }

  /**
   * Follows a task: yields it at once and whenever it changes, and returns after it reaches a terminal
   * state ("done" or "dead") or the server ends the stream. Stopping early (break, or the signal) closes
   * the stream.
   *
   * ```ts
   * for await (const task of client.taskEvents(taskId)) console.log(task.state);
   * ```
   */
  async *taskEvents(taskId: number, options: RequestOptions = {}): AsyncGenerator<Task, void, undefined> {
    for await (const { event, data } of this.events("/api/v1/tasks/{id}/events", { path: { id: taskId } }, options)) {
      if (event === "end") return;
      if (event !== "task") continue;
      const task = data as Task;
      yield task;
      if (kTerminal.includes(task.state)) return;
    }
  }

  /**
   * Follows the account's changes: yields `{revision}` at once and whenever a request or the worker
   * changed the account's data (so a view can refetch). Runs until stopped (break, or the signal).
   */
  async *watch(options: RequestOptions = {}): AsyncGenerator<ChangeEvent, void, undefined> {
    for await (const { event, data } of this.events("/api/v1/events", {}, options)) {
      if (event === "change") yield data as ChangeEvent;
    }
  }

  // ---- Memories ----

  /** Remembers a fact about a user or agent now, through dedup; returns what changed. */
  remember(text: string, options: RememberOptions): Promise<MemoryChange[]> {
    return this.call("post", "/api/v1/memories/remember",
                     { body: { text, scope: options.scope, category: options.category } }, options);
  }

  /** Returns the audit trail of one memory (oldest first). */
  history(uri: string, options: RequestOptions = {}): Promise<AuditEntry[]> {
    return this.call("get", "/api/v1/memories/history", { query: { uri } }, options);
  }

  /** Returns the newest memory changes at or below a URI, newest first. */
  changes(options: ChangesOptions = {}): Promise<AuditEntry[]> {
    return this.call("get", "/api/v1/memories/changes", { query: { under: options.under, limit: options.limit } },
                     options);
  }

  /** Merges duplicate memories under a directory; returns what changed. */
  consolidate(under: string, options: RequestOptions = {}): Promise<MemoryChange[]> {
    return this.call("post", "/api/v1/memories/consolidate", { body: { under } }, options);
  }

  // ---- Skills (strata://agent/<agent>/skills) ----

  /** Returns an agent's skills as nodes. */
  listSkills(agent: string, options: RequestOptions = {}): Promise<Node[]> {
    return this.call("get", "/api/v1/skills", { query: { agent } }, options);
  }

  /** Returns one skill's SKILL.md text. */
  async showSkill(agent: string, name: string, options: RequestOptions = {}): Promise<string> {
    return (await this.call("get", "/api/v1/skills/{name}", { path: { name }, query: { agent } }, options)).skill_md;
  }

  /** Validates and stores a SKILL.md for an agent; returns its URI. */
  async addSkill(agent: string, skillMd: string, options: RequestOptions = {}): Promise<string> {
    return (await this.call("post", "/api/v1/skills", { body: { agent, skill_md: skillMd } }, options)).uri;
  }

  // ---- Tokens and prompts ----

  /**
   * Counts tokens exactly (o200k_base, cl100k_base) or as characters / 4 ("chars"): of a text, or of
   * messages the way the context window counts them.
   */
  countTokens(input: string | readonly Message[], options: CountTokensOptions = {}): Promise<TokenCount> {
    const body: BodyOf<"/api/v1/tokens/count", "post"> =
      typeof input === "string" ? { text: input, encoding: options.encoding }
                                : { messages: [...input], encoding: options.encoding };
    return this.call("post", "/api/v1/tokens/count", { body }, options);
  }

  /** Renders the prompt template `id` with `vars` and returns the text. */
  async renderPrompt(id: string, vars: Record<string, unknown> = {}, options: RequestOptions = {}): Promise<string> {
    return (await this.call("post", "/api/v1/prompts/render", { body: { id, vars } }, options)).text;
  }

  // ---- Keys (the root key only) ----

  /** Issues a key for a user of an account; its secret (`key`) is shown this once. */
  issueKey(options: IssueKeyOptions): Promise<IssuedKey> {
    const { user, account, role } = options;
    return this.call("post", "/api/v1/admin/keys", { body: { user, account, role } }, options);
  }

  /** Returns the issued keys (never their secrets). */
  listKeys(options: RequestOptions = {}): Promise<ApiKey[]> {
    return this.call("get", "/api/v1/admin/keys", {}, options);
  }

  /** Revokes a key by its id. */
  revokeKey(keyId: string, options: RequestOptions = {}): Promise<ResultOf<"/api/v1/admin/keys/{id}", "delete">> {
    return this.call("delete", "/api/v1/admin/keys/{id}", { path: { id: keyId } }, options);
  }

  // ---- The transport ----

  /**
   * Makes one request to `path` and returns its envelope's result. Only a route the document serves with
   * `method` and answers in the envelope type-checks, with its own path parameters, query and body.
   */
  private async call<P extends ApiPath, M extends MethodOf<P>>(
      method: M, path: P, init: ResultOf<P, M> extends NoEnvelope<P> ? NoEnvelope<P> : CallInit<P, M>,
      options: RequestOptions): Promise<ResultOf<P, M>> {
    const { path: params, query, body } = init as { path?: unknown; query?: unknown; body?: unknown };
    const verb = method.toUpperCase();
    const url = this.url(verb, path, params, query);
    if (body !== undefined) bodyNotUnicode(verb, path, "body", body);
    const deadline = new Deadline(options.signal, options.timeoutMs ?? this.#timeoutMs);
    try {
      deadline.signal.throwIfAborted();
      const response = await this.#fetch(url, {
        method: verb,
        headers: this.headers("application/json", body !== undefined),
        body: body === undefined ? null : JSON.stringify(body),
        signal: deadline.signal,
      });
      const text = await response.text();
      const result = unwrap(verb, url, response, text) as ResultOf<P, M>;
      // A listing the limit cut says so in a header (ls, tree): kept on the array, out of its JSON.
      if (Array.isArray(result) && response.headers.get("x-strata-truncated") === "true") {
        Object.defineProperty(result, "truncated", { value: true, enumerable: false });
      }
      return result;
    } catch (error) {
      throw failure(error, deadline, verb, url);
    } finally {
      deadline.dispose();
    }
  }

  /** GETs `path` and returns its body as text (routes that answer other than JSON, e.g. /metrics). */
  private async text(path: ApiPath, options: RequestOptions): Promise<string> {
    const url = this.url("GET", path, undefined, undefined);
    const deadline = new Deadline(options.signal, options.timeoutMs ?? this.#timeoutMs);
    try {
      deadline.signal.throwIfAborted();
      const response = await this.#fetch(url, { method: "GET", headers: this.headers("text/plain", false),
                                                signal: deadline.signal });
      const text = await response.text();
      if (!response.ok) unwrap("GET", url, response, text);
      return text;
    } catch (error) {
      throw failure(error, deadline, "GET", url);
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Opens the event stream at `path` and yields its events with their data parsed as JSON. The timeout
   * covers opening it; the signal, all of it.
   */
  private async *events<P extends StreamPath>(path: P, init: CallInit<P, "get">, options: RequestOptions):
      AsyncGenerator<{ event: string; data: unknown }, void, undefined> {
    const url = this.url("GET", path, init.path, init.query);
    const deadline = new Deadline(options.signal, options.timeoutMs ?? this.#timeoutMs);
    try {
      let body: ReadableStream<Uint8Array>;
      try {
        deadline.signal.throwIfAborted();
        const response = await this.#fetch(url, { method: "GET", headers: this.headers("text/event-stream", false),
                                                  signal: deadline.signal });
        const type = response.headers.get("content-type") ?? "";
        if (!response.ok || !type.startsWith("text/event-stream") || response.body === null) {
          const text = await response.text();
          unwrap("GET", url, response, text);  // Throws the server's error if it sent one.
          throw strataError({ code: "unavailable", status: response.status, method: "GET", url,
                                  message: `GET ${url}: expected an event stream, got ${type || "no content type"}` });
        }
        body = response.body;
      } finally {
        deadline.stopTimer();
      }
      for await (const event of parseSse(body)) {
        // Every event Strata sends carries a JSON object (a task, a change, {} to end): anything else is a
        // broken stream, as the Python client says too.
        let data: unknown;
        try {
          data = JSON.parse(event.data);
        } catch {
          data = undefined;
        }
        if (typeof data !== "object" || data === null || Array.isArray(data)) {
          throw strataError({
            code: "unavailable", status: 200, method: "GET", url,
            message: `GET ${url}: the ${event.event} event's data is not a JSON object: ${snippet(event.data)}`,
          });
        }
        yield { event: event.event, data };
      }
    } catch (error) {
      throw failure(error, deadline, "GET", url);
    } finally {
      deadline.dispose();
    }
  }

  /** The URL of `path` with its path parameters filled in and its query appended. */
  private url(verb: string, path: string, params: unknown, query: unknown): string {
    const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value: unknown = (params as Record<string, unknown> | undefined)?.[name];
      if (value === undefined || value === null || String(value) === "") {
        throw strataError({ code: "invalid_argument", status: 0, method: verb, url: this.baseUrl + path,
                                message: `${verb} ${path}: "${name}" must not be empty` });
      }
      // "." and ".." are path segments to a URL (escaped too): /sessions/./messages would become
      // /sessions/messages, another route or another session. No id or name Strata takes is either.
      if (String(value) === "." || String(value) === "..") {
        throw strataError({ code: "invalid_argument", status: 0, method: verb, url: this.baseUrl + path,
                                message: `${verb} ${path}: "${name}" must not be "${String(value)}"` });
      }
      notUnicode(verb, path, `"${name}"`, String(value));
      return encodeURIComponent(String(value));
    });
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries((query ?? {}) as Record<string, unknown>)) {
      if (value === undefined || value === null) continue;
      // A flag is true or false: "" (from a caller without the types) was sent as a bare ?recursive, which
      // the server reads as true — a whole subtree removed.
      if (QUERY_FLAGS.has(key) && typeof value !== "boolean") {
        throw strataError({ code: "invalid_argument", status: 0, method: verb, url: this.baseUrl + path,
                            message: `"${key}" must be true or false, not ${typeof value}` });
      }
      // URLSearchParams would send U+FFFD in its place: another URI, another node.
      notUnicode(verb, path, `"${key}"`, String(value));
      search.append(key, String(value));
    }
    const qs = search.toString();
    return this.baseUrl + filled + (qs === "" ? "" : `?${qs}`);
  }

  private headers(accept: string, hasBody: boolean): Record<string, string> {
    const headers: Record<string, string> = { ...this.#headers, accept };
    if (hasBody) headers["content-type"] = "application/json";
    if (this.#apiKey !== undefined) headers["authorization"] = `Bearer ${this.#apiKey}`;
    if (this.#account !== undefined) headers["x-strata-account"] = this.#account;
    return headers;
  }
}

/** The query parameters read as flags (Call::BoolArg on the server). */
const QUERY_FLAGS = new Set(["recursive", "force", "ignore_case"]);

/**
 * A request's signal: the caller's signal and the timeout together. `timedOut` says which fired; the timer
 * can be stopped once a stream is open, and `dispose` unhooks everything.
 */
class Deadline {
  readonly signal: AbortSignal;
  readonly caller: AbortSignal | undefined;
  readonly timeoutMs: number;
  timedOut = false;
  readonly #controller = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  readonly #onAbort = (): void => this.#controller.abort(this.caller?.reason);

  constructor(caller: AbortSignal | undefined, timeoutMs: number) {
    this.caller = caller;
    this.timeoutMs = timeoutMs;
    this.signal = this.#controller.signal;
    if (caller?.aborted) {
      this.#controller.abort(caller.reason);
    } else {
      caller?.addEventListener("abort", this.#onAbort, { once: true });
    }
    if (timeoutMs > 0 && !this.signal.aborted) {
      this.#timer = setTimeout(() => {
        this.timedOut = true;
        this.#controller.abort(new DOMException(`no answer within ${timeoutMs} ms`, "TimeoutError"));
      }, timeoutMs);
    }
  }

  stopTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  dispose(): void {
    this.stopTimer();
    this.caller?.removeEventListener("abort", this.#onAbort);
  }
}

/** A checkpoint argument as the revert and fork bodies take it: an id alone, or the id and its tag. */
function checkpointBody(checkpoint: number | Checkpoint): { checkpoint: number; tag?: string } {
  return typeof checkpoint === "number" ? { checkpoint } : { checkpoint: checkpoint.checkpoint, tag: checkpoint.tag };
}

/** Resolves after `ms`; rejects with `cancelled` ("<what>: cancelled") as soon as `signal` fires. */
function pause(ms: number, signal: AbortSignal | undefined, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const cancelled = () =>
      strataError({ code: "cancelled", status: 0, message: `${what}: cancelled`, cause: signal?.reason });
    if (signal?.aborted) return reject(cancelled());
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelled());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The StrataError for something that went wrong in a request (a StrataError already made passes as is). */
function failure(error: unknown, deadline: Deadline, method: string, url: string): StrataError {
  if (error instanceof StrataError) return error;
  if (deadline.timedOut) {
    return strataError({ code: "deadline_exceeded", status: 0, method, url, cause: error,
                             message: `${method} ${url}: no answer within ${deadline.timeoutMs} ms` });
  }
  if (deadline.caller?.aborted) {
    return strataError({ code: "cancelled", status: 0, method, url, cause: deadline.caller.reason,
                             message: `${method} ${url}: cancelled` });
  }
  return strataError({ code: "unavailable", status: 0, method, url, cause: error,
                           message: `${method} ${url}: ${describe(error)}` });
}

/** An error's message with its causes ("fetch failed: connect ECONNREFUSED 127.0.0.1:9"). */
function describe(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 4; ++depth) {
    if (e instanceof Error) {
      if (e.message !== "" && !parts.includes(e.message)) parts.push(e.message);
      e = e.cause;
    } else {
      parts.push(String(e));
      break;
    }
  }
  return parts.length === 0 ? "the request failed" : parts.join(": ");
}

/**
 * Throws `invalid_argument` when `text` holds a lone surrogate, which no UTF-8 holds (as the Python client
 * and the Engine in process refuse it), before anything is sent: encodeURIComponent threw a bare URIError
 * for it, and URLSearchParams replaced it.
 */
function notUnicode(verb: string, path: string, name: string, text: string): void {
  const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.exec(text);
  if (lone === null) return;
  const code = lone[0].charCodeAt(0).toString(16);
  throw strataError({ code: "invalid_argument", status: 0, method: verb, url: path,
                      message: `${verb} ${path}: ${name} is not valid Unicode: '\\u${code}' at index ${lone.index} ` +
                               "is a lone surrogate" });
}

/** notUnicode for every string of a request's body, named by its place ("body.messages[0].content"). */
function bodyNotUnicode(verb: string, path: string, name: string, value: unknown, depth = 0): void {
  if (typeof value === "string") {
    notUnicode(verb, path, name, value);
  } else if (Array.isArray(value) && depth < 64) {
    value.forEach((item, i) => bodyNotUnicode(verb, path, `${name}[${i}]`, item, depth + 1));
  } else if (isObject(value) && depth < 64) {
    for (const [key, item] of Object.entries(value)) {
      notUnicode(verb, path, `${name} key`, key);
      bodyNotUnicode(verb, path, `${name}.${key}`, item, depth + 1);
    }
  }
}

/** A constructor option the client cannot work with: invalid_argument before any request, as in Python. */
function badOption(message: string): StrataError {
  return strataError({ code: "invalid_argument", status: 0, message });
}

/** At most 200 characters of a body, for messages. */
function snippet(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 200 ? `${flat.slice(0, 200)}...` : flat;
}

/** The result of a response in the envelope; throws the server's error, or `unavailable` for any other answer. */
function unwrap(method: string, url: string, response: Response, text: string): unknown {
  const headerId = response.headers.get("x-request-id") ?? undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    const type = response.headers.get("content-type") ?? "no content type";
    throw strataError({
      code: "unavailable", status: response.status, method, url, requestId: headerId,
      message: `${method} ${url}: HTTP ${response.status} with a body that is not JSON (${type}): ` +
               (snippet(text) || "empty"),
    });
  }
  if (isObject(body) && body["status"] === "error" && isObject(body["error"]) &&
      typeof body["error"]["code"] === "string" && typeof body["error"]["message"] === "string") {
    const error = body["error"];
    const requestId = typeof error["request_id"] === "string" ? error["request_id"] : headerId;
    throw strataError({ code: error["code"] as StrataError["code"], message: error["message"] as string,
                            status: response.status, requestId, method, url });
  }
  if (response.ok && isObject(body) && body["status"] === "ok" && "result" in body) return body["result"];
  throw strataError({
    code: "unavailable", status: response.status, method, url, requestId: headerId,
    message: `${method} ${url}: HTTP ${response.status} without Strata's envelope: ${snippet(text)}`,
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
