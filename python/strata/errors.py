"""Strata's errors: one exception class per status code, shared by the in-process module and the HTTP client.

Every failure Strata reports is a ``StrataError``; the subclass says what to do next, the message says what
was wrong and where::

    try:
        engine.read("strata://resources/missing")
    except strata.NotFoundError as e:
        print(e.code, e.message)     # not_found  strata://resources/missing: no such node

``code`` is the status code's name (as in the HTTP API's ``error.code``); ``status`` is the HTTP status when
the error came from a server, and ``request_id`` the server's request id.
"""

from __future__ import annotations

__all__ = [
    "StrataError",
    "InvalidArgumentError",
    "NotFoundError",
    "FailedPreconditionError",
    "UnavailableError",
    "ResourceExhaustedError",
    "DataLossError",
    "CancelledError",
    "DeadlineExceededError",
    "AlreadyExistsError",
    "InternalError",
    "UnauthenticatedError",
    "PermissionDeniedError",
    "AbortedError",
    "error_class",
]


class StrataError(Exception):
    """A failure reported by Strata. ``code`` names the kind; ``message`` says what and where."""

    code: str = "unknown"
    #: The HTTP status a server answers with for this code.
    http_status: int = 500

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        #: The HTTP status of the response, when the error came from a server (strata.Client).
        self.status = status
        #: The server's request id (X-Request-Id), when the error came from a server.
        self.request_id = request_id

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self):  # Pickles (multiprocessing) with its fields.
        return (_rebuild, (type(self), self.message, self.code, self.status, self.request_id))


def _rebuild(cls, message, code, status, request_id):
    return cls(message, code=code, status=status, request_id=request_id)


class InvalidArgumentError(StrataError, ValueError):
    """The input is wrong (a bad URI, a malformed message): fix it; retrying fails the same way."""
    code, http_status = "invalid_argument", 400


class NotFoundError(StrataError, LookupError):
    """The named thing (URI, session, checkpoint, task) does not exist."""
    code, http_status = "not_found", 404


class FailedPreconditionError(StrataError):
    """Not in a state for this call (a turn already in progress, data opened read-only)."""
    code, http_status = "failed_precondition", 409


class UnavailableError(StrataError):
    """Transient: locked by another writer, a provider or server unreachable. Retry later."""
    code, http_status = "unavailable", 503


class ResourceExhaustedError(StrataError):
    """A limit was hit (a budget, a quota, a full disk)."""
    code, http_status = "resource_exhausted", 429


class DataLossError(StrataError):
    """Stored data is damaged, or durability could not be guaranteed."""
    code, http_status = "data_loss", 500


class CancelledError(StrataError):
    """The operation was cancelled."""
    code, http_status = "cancelled", 499


class DeadlineExceededError(StrataError, TimeoutError):
    """A timeout expired."""
    code, http_status = "deadline_exceeded", 504


class AlreadyExistsError(StrataError):
    """The name is taken: pick another."""
    code, http_status = "already_exists", 409


class InternalError(StrataError):
    """A bug in Strata or an unexpected operating-system failure."""
    code, http_status = "internal", 500


class UnauthenticatedError(StrataError):
    """No valid API key was given (strata.Client)."""
    code, http_status = "unauthenticated", 401


class PermissionDeniedError(StrataError, PermissionError):
    """The credentials do not reach this (another user's scope)."""
    code, http_status = "permission_denied", 403


class AbortedError(StrataError):
    """Lost a race and changed nothing (another worker holds the job)."""
    code, http_status = "aborted", 409


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, NotFoundError, FailedPreconditionError, UnavailableError, ResourceExhaustedError,
    DataLossError, CancelledError, DeadlineExceededError, AlreadyExistsError, InternalError,
    UnauthenticatedError, PermissionDeniedError, AbortedError)}


def error_class(code: str) -> type[StrataError]:
    """The exception class for a status code name ("not_found" → NotFoundError); StrataError if unknown."""
    return _BY_CODE.get(code, StrataError)
