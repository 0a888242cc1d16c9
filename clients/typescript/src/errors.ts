// Errors: every failure of a client call is a StrataError, mapped once here — from the server's envelope
// ({"status":"error","error":{"code","message","request_id"}}) or, when no envelope arrived, from what went
// wrong on the way (no connection, a timeout, a cancelled call, an answer that is not Strata's).
import type { components } from "./generated/openapi.js";

/**
 * The server's error codes (docs/server.md), each chosen by what the caller does next:
 *
 * | code | HTTP | what to do |
 * |---|---|---|
 * | `invalid_argument` | 400 | fix the request (the message names the member or parameter) |
 * | `unauthenticated` | 401 | send a valid key |
 * | `permission_denied` | 403 | the key does not reach that URI or operation |
 * | `not_found` | 404 | no such node, session, task or route (also another user's session or task) |
 * | `failed_precondition`, `already_exists`, `aborted` | 409 | the state does not allow it |
 * | `resource_exhausted` | 413 / 429 | body too large; too many event streams |
 * | `unavailable` | 503 | retry later |
 * | `internal`, `data_loss` | 500 | a bug, or damaged data |
 *
 * The client adds three cases where no envelope arrived (`status` is then 0, or the HTTP status of an
 * answer that was not Strata's): `unavailable` (no connection, or not Strata's JSON envelope),
 * `deadline_exceeded` (`timeoutMs` passed) and `cancelled` (the caller's `AbortSignal` fired).
 */
export type StrataErrorCode = components["schemas"]["Error"]["error"]["code"];

/** What a StrataError is made of. */
export interface StrataErrorInit {
  code: StrataErrorCode;
  message: string;
  /** The HTTP status; 0 when no response arrived. */
  status: number;
  requestId?: string | undefined;
  method?: string | undefined;
  url?: string | undefined;
  cause?: unknown;
}

/**
 * A failed call. `code` is the server's error code (narrow on it: `err.code === "not_found"`, or on the
 * subclass: `err instanceof NotFoundError`), `status` the HTTP status (0 when no response arrived),
 * `message` the server's message as it sent it, `requestId` the server's request id (also in its log),
 * `method` and `url` the request that failed.
 */
export class StrataError extends Error {
  override readonly name: string = "StrataError";
  readonly code: StrataErrorCode;
  readonly status: number;
  readonly requestId: string | undefined;
  readonly method: string | undefined;
  readonly url: string | undefined;

  constructor(init: StrataErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.method = init.method;
    this.url = init.url;
  }

  /**
   * Whether the same call may succeed if made again later unchanged: the server is unavailable or busy
   * (`unavailable`; `resource_exhausted` with 429, too many streams), a timeout passed, or a concurrent
   * change got in the way (`aborted`).
   */
  get retryable(): boolean {
    switch (this.code) {
      case "unavailable":
      case "deadline_exceeded":
      case "aborted":
        return true;
      case "resource_exhausted":
        return this.status === 429;
      default:
        return false;
    }
  }
}

// One class per code, as in the Python module (strata.NotFoundError, ...): the class says what to do next.

/** The input is wrong (a bad URI, a malformed message, an option out of range): fix it. (400) */
export class InvalidArgumentError extends StrataError {
  declare readonly code: "invalid_argument";
  override readonly name: string = "InvalidArgumentError";
}
/** No valid API key was sent. (401) */
export class UnauthenticatedError extends StrataError {
  declare readonly code: "unauthenticated";
  override readonly name: string = "UnauthenticatedError";
}
/** The key does not reach that URI or operation (another user's scope, a root-only route). (403) */
export class PermissionDeniedError extends StrataError {
  declare readonly code: "permission_denied";
  override readonly name: string = "PermissionDeniedError";
}
/** No such node, session, task or route — also another user's session or task. (404) */
export class NotFoundError extends StrataError {
  declare readonly code: "not_found";
  override readonly name: string = "NotFoundError";
}
/** Not in a state for this call (phase 2 pending, a directory not empty, data served read-only). (409) */
export class FailedPreconditionError extends StrataError {
  declare readonly code: "failed_precondition";
  override readonly name: string = "FailedPreconditionError";
}
/** The name is taken. (409) */
export class AlreadyExistsError extends StrataError {
  declare readonly code: "already_exists";
  override readonly name: string = "AlreadyExistsError";
}
/** Lost a race and changed nothing: retry. (409) */
export class AbortedError extends StrataError {
  declare readonly code: "aborted";
  override readonly name: string = "AbortedError";
}
/** A limit was hit: the body is too large (413) or too many streams are open (429). */
export class ResourceExhaustedError extends StrataError {
  declare readonly code: "resource_exhausted";
  override readonly name: string = "ResourceExhaustedError";
}
/** Transient: the server is busy, locked or unreachable, or answered other than Strata does. Retry later. (503) */
export class UnavailableError extends StrataError {
  declare readonly code: "unavailable";
  override readonly name: string = "UnavailableError";
}
/** timeoutMs passed before the answer. */
export class DeadlineExceededError extends StrataError {
  declare readonly code: "deadline_exceeded";
  override readonly name: string = "DeadlineExceededError";
}
/** The caller's AbortSignal fired. */
export class CancelledError extends StrataError {
  declare readonly code: "cancelled";
  override readonly name: string = "CancelledError";
}
/** A bug in Strata or an unexpected failure on the server. (500) */
export class InternalError extends StrataError {
  declare readonly code: "internal";
  override readonly name: string = "InternalError";
}
/** Stored data is damaged: the message says which. (500) */
export class DataLossError extends StrataError {
  declare readonly code: "data_loss";
  override readonly name: string = "DataLossError";
}

const kClassOf: { readonly [C in StrataErrorCode]: new (init: StrataErrorInit) => StrataError } = {
  invalid_argument: InvalidArgumentError,
  unauthenticated: UnauthenticatedError,
  permission_denied: PermissionDeniedError,
  not_found: NotFoundError,
  failed_precondition: FailedPreconditionError,
  already_exists: AlreadyExistsError,
  aborted: AbortedError,
  resource_exhausted: ResourceExhaustedError,
  unavailable: UnavailableError,
  deadline_exceeded: DeadlineExceededError,
  cancelled: CancelledError,
  internal: InternalError,
  data_loss: DataLossError,
};

/** Returns the error for `init`, of its code's class (a code this client does not know: a StrataError). */
export function strataError(init: StrataErrorInit): StrataError {
  const cls = Object.hasOwn(kClassOf, init.code) ? kClassOf[init.code] : StrataError;
  return new cls(init);
}

/**
 * Returns whether `error` is a StrataError, and with `codes`, whether its code is one of them:
 * `if (isStrataError(error, "not_found")) ...`.
 */
export function isStrataError(error: unknown, ...codes: StrataErrorCode[]): error is StrataError {
  return error instanceof StrataError && (codes.length === 0 || codes.includes(error.code));
}
