// The types of the API, all taken from docs/api/openapi.yaml through the types openapi-typescript generates
// from it (src/generated/openapi.ts, made by build.sh): the route helpers below let the client name a route
// only if the document serves it, and give its query, path parameters, body and result exactly as the
// document describes them. A route renamed or removed there, or a member the client sends or reads
// renamed, fails the build.
import type { components, paths } from "./generated/openapi.js";

// ---- Routes ----

/** A path template the API document serves ("/api/v1/sessions/{id}"). */
export type ApiPath = keyof paths;
/** The HTTP methods the API uses. */
export type HttpMethod = "get" | "post" | "delete";
/** The methods the document declares for `P` (openapi-typescript writes `post?: never` for the others). */
export type MethodOf<P extends ApiPath> = {
  [M in HttpMethod]: [NonNullable<paths[P][M]>] extends [never] ? never : M;
}[HttpMethod];
type Operation<P extends ApiPath, M extends HttpMethod> = NonNullable<paths[P][M]>;
type OperationParams<P extends ApiPath, M extends HttpMethod> =
  Operation<P, M> extends { parameters: infer X } ? X : never;

/** The query parameters of a route (never when it takes none). */
export type QueryOf<P extends ApiPath, M extends HttpMethod> =
  OperationParams<P, M> extends { query?: infer Q } ? Exclude<Q, undefined> : never;
/** The path parameters of a route ({id}, {name}; never when it has none). */
export type PathParamsOf<P extends ApiPath, M extends HttpMethod> =
  OperationParams<P, M> extends { path?: infer X } ? Exclude<X, undefined> : never;
/** Whether the document requires the route's query (one of its parameters is required). */
export type QueryRequired<P extends ApiPath, M extends HttpMethod> =
  OperationParams<P, M> extends { query: unknown } ? true : false;
/** Whether the document requires the route's body. */
export type BodyRequired<P extends ApiPath, M extends HttpMethod> =
  Operation<P, M> extends { requestBody: unknown } ? true : false;
/** The JSON body of a route (never when it takes none). */
export type BodyOf<P extends ApiPath, M extends HttpMethod> =
  NonNullable<Operation<P, M>["requestBody"]> extends { content: { "application/json": infer B } } ? B : never;
/**
 * What a route's envelope carries in `result` on success. A route whose 200 response the document does not
 * describe as an envelope gives a type nothing is assignable to (never would be assignable to anything, and
 * the client would compile against a route it cannot read).
 */
export type ResultOf<P extends ApiPath, M extends HttpMethod> =
  Operation<P, M> extends { responses: { 200: { content: { "application/json": { result: infer R } } } } }
    ? R
    : NoEnvelope<P>;
/** The result type of a route whose 200 response is not an envelope in the document. */
export interface NoEnvelope<P> {
  readonly "no JSON envelope in the document's 200 response": P;
}

// ---- The API's values (field names as the server sends them) ----

type Schemas = components["schemas"];

/**
 * A node of the store: `uri`, `is_dir`, `type` ("resource" | "memory" | "skill"), `category`, `abstract`
 * (its L0 layer), `size` (bytes of content), `created_ms`, `updated_ms`, and `superseded: true` on a memory
 * a newer one replaced.
 */
export type Node = Schemas["Node"];
/**
 * What `ls` and `tree` return: the nodes, and `truncated: true` when the `limit` cut the list (there are
 * more), as the server's `X-Strata-Truncated` header, Python's `NodeList` and MCP's list say.
 */
export type NodeList = Node[] & { truncated: boolean };
/** A node with its `overview` (L1), `metadata` and the `relations` the caller may see. */
export type NodeDetail = Schemas["NodeDetail"];
/** A relation between two nodes: `from`, `to`, `reason`. */
export type Relation = Schemas["Relation"];
/** A line of a leaf that matched a grep: `uri`, `line` (1-based), `text`, `superseded`. */
export type GrepMatch = Schemas["GrepMatch"];
/**
 * A retrieval hit: `uri`, `level` (the layer it is about), `score`, `abstract`, `reason` (why it ranked:
 * lexical and vector ranks, the directory's boost) and `tokens` (its abstract's exact o200k_base tokens,
 * what a token budget counts).
 */
export type Hit = Schemas["Hit"];
/** A find: `hits` best first, `tokens` (theirs together), and `searched` when a session widened a short query. */
export type FindResult = Schemas["FindResult"];
/** Documents added as resources: `added`, `updated`, `unchanged`, `removed` paths, `skipped` with reasons. */
export type AddReport = Schemas["AddReport"];
/** A file carried to POST /api/v1/resources: a relative `path`, its `content`, `encoding` "base64" for bytes. */
export type SourceFile = { path: string; content: string; encoding?: "utf-8" | "base64" };
/** A chat export's import: `imported` sessions, `unchanged` ids (imported before) and `skipped` conversations. */
export type ChatImportReport = Schemas["ChatImportReport"];
/** A file of a Markdown tree (docs/formats/markdown-tree.md): a relative `path` and its `content`. */
export type TreeFile = Schemas["TreeFile"];
/** A subtree as its Markdown tree: `files` and the counts `directories`, `leaves`, `relations`. */
export type ExportedTree = ResultOf<"/api/v1/fs/export", "get">;
/** What an import stored, and `skipped` (`{path, reason}`, as an add reports them) for what it did not. */
export type ImportReport = ResultOf<"/api/v1/fs/import", "post">;

/**
 * A message in kosong JSON, OpenAI-shaped: `role` ("system" | "user" | "assistant" | "tool"), `content` (a
 * string, a list of parts, or null — the member must be present), and `tool_calls`, `tool_call_id`, `name`.
 */
export type Message = Schemas["Message"];
/**
 * A content part: `{type: "text", text}`, `{type: "think", think, encrypted?}`,
 * `{type: "image_url", image_url: {url}}`, ...
 */
export type ContentPart = Schemas["ContentPart"];
/** A tool call: `{type: "function", id, function: {name, arguments}}`. */
export type ToolCall = Schemas["ToolCall"];
/** A session: `id`, `user`, `agent`, `abstract`, `overview`, `contexts`, `stats`, and `messages` from getSession. */
export type Session = Schemas["Session"];
/** A session's window as a model would get it, with exact tokens per section and per message. */
export type SessionContext = Schemas["SessionContext"];
/** A checkpoint: `session`, `checkpoint` (its id), `messages` (how many precede it), `tag` (a digest of the conversation up to it). */
export type Checkpoint = ResultOf<"/api/v1/sessions/{id}/checkpoints", "post">;
/** A session's current log: messages, checkpoints, usage marks, system prompt, rotations. */
export type SessionLog = Schemas["SessionLog"];
/** One archive of a session and how far its phase 2 got (`state`, `error` when it failed). */
export type Archive = Schemas["Archive"];
/** A session's archives and phase-2 tasks. */
export type SessionStatus = ResultOf<"/api/v1/sessions/{id}/status", "get">;
/** What a commit started: `task_id` (its phase 2), `archive` (the archive phase 1 made), `messages`. */
export type CommitResult = ResultOf<"/api/v1/sessions/{id}/commit", "post">;
/**
 * What one archive's phase 2 changed: `session`, `archive`, `summary`, `candidates` (how many memories
 * extraction proposed) and `changes` (MemoryChange).
 */
export type CommitDiff = Schemas["CommitDiff"];
/**
 * A commit waited for: the commit, its finished task, the archive's `state` and `error` (why phase 2 failed),
 * and its `diff` when it is done — what the in-process Engine's commit with wait and the Python Client return.
 */
export type WaitedCommit = CommitResult & {
  task: Task;
  state?: Schemas["Archive"]["state"];
  error?: string;
  diff?: CommitDiff;
};
/** What a compaction did. */
export type CompactResult = ResultOf<"/api/v1/sessions/{id}/compact", "post">;

/**
 * A background task (a commit's phase 2): `id`, `kind`, `state` ("pending" | "running" | "done" | "dead"),
 * `attempts`, `last_error`, `key` (the session's `<id>@<incarnation>`), `session`, `payload`, `created_ms`,
 * `updated_ms`, `not_before_ms`.
 */
export type Task = Schemas["Job"];
/** A task's state. "done" and "dead" (failed for good; see `last_error`, then `retry`) are terminal. */
export type TaskState = Task["state"];
/** A change a memory operation made: `action` ("create" | "merge" | "supersede" | "skip"), `reason`, `uri`. */
export type MemoryChange = Schemas["MemoryChange"];
/**
 * An entry of the memory audit log: `uri`, `action`, `reason`, `before`, `after`, `at_ms`, `source` and
 * `session` (the session it came from while that incarnation lives; "" otherwise or when not the caller's).
 */
export type AuditEntry = Schemas["AuditEntry"];
/** A token count: `encoding`, `tokens`, and `warning` when the exact vocabulary was missing. */
export type TokenCount = ResultOf<"/api/v1/tokens/count", "post">;
/** An API key as listed (never its secret): `id`, `account`, `user`, `role`, `created_ms`. */
export type ApiKey = Schemas["Key"];
/** A key just issued, with its secret `key` (shown this once). */
export type IssuedKey = ResultOf<"/api/v1/admin/keys", "post">;

/** One event of the account's change stream (`watch`): the account's revision after a change. */
export interface ChangeEvent {
  revision: number;
}
