// @strata/client: a typed client for Strata's HTTP API (`strata serve`). See README.md.
export { StrataClient } from "./client.js";
export type {
  AddResourcesOptions, ChangesOptions, CommitOptions, CompactOptions, ContextOptions, CountTokensOptions,
  CreateSessionOptions, DeleteSessionOptions, FindOptions, ForkOptions, GrepOptions, ImportSessionsOptions,
  IssueKeyOptions, LinkOptions, LsOptions, MkdirOptions, ReadOptions, RememberOptions, RequestOptions, RmOptions,
  StrataClientOptions, TasksOptions, TreeOptions, WriteOptions,
} from "./client.js";
export {
  AbortedError, AlreadyExistsError, CancelledError, DataLossError, DeadlineExceededError, FailedPreconditionError,
  InternalError, InvalidArgumentError, NotFoundError, PermissionDeniedError, ResourceExhaustedError, StrataError,
  UnauthenticatedError, UnavailableError, isStrataError,
} from "./errors.js";
export type { StrataErrorCode, StrataErrorInit } from "./errors.js";
export type {
  AddReport, ApiKey, ApiPath, Archive, AuditEntry, BodyOf, BodyRequired, ChangeEvent, ChatImportReport, Checkpoint,
  CommitDiff,
  CommitResult, CompactResult, ContentPart, ExportedTree, FindResult, GrepMatch, Hit, HttpMethod, ImportReport, IssuedKey,
  MemoryChange, Message, MethodOf, Node, NodeDetail, NodeList, NoEnvelope, PathParamsOf, QueryOf, QueryRequired, Relation,
  ResultOf, Session, SessionContext, SessionLog, SessionStatus, SourceFile, Task, TaskState, TokenCount, ToolCall,
  TreeFile, WaitedCommit,
} from "./types.js";
export type { components, paths } from "./generated/openapi.js";
