"""Strata: a context engine for LLM agents, in process.

    import strata

    engine = strata.Engine.open("strata-data")                # or a postgresql:// URL
    engine.write("strata://resources/notes/build", "Run scripts/test before pushing.")
    for hit in engine.find("how do I test"):
        print(hit.uri, hit.score, hit.abstract, hit.tokens)

    log = strata.ContextLog("context.jsonl")                 # kimi-cli's context.jsonl
    log.append({"role": "user", "content": "hello"})

    strata.count_tokens("hello world")                        # exact, tiktoken-compatible

``strata.Client`` speaks to a ``strata serve`` over HTTP with the same method names and the same errors
(``strata.StrataError`` and its subclasses). See help(strata.Engine), help(strata.ContextLog),
help(strata.Conversation) and help(strata.Client).
"""

from __future__ import annotations

from .errors import (AbortedError, AlreadyExistsError, CancelledError, DataLossError, DeadlineExceededError,
                     FailedPreconditionError, InternalError, InvalidArgumentError, NotFoundError,
                     PermissionDeniedError, ResourceExhaustedError, StrataError, UnauthenticatedError,
                     UnavailableError)
from .types import (AddReport, Archive, AuditEntry, Change, ChatImportReport, Checkpoint, CommitDiff, CommitOutcome, Compaction, FindResult, GrepMatch,
                    Hit, Node, NodeDetail, NodeList, Record, Session, SessionContext, SessionLog, SessionStatus, Task,
                    TurnOutcome)
from .tool import Tool, tool
from .client import Client

try:
    from . import _strata
    from ._text_guard import guard_text
    guard_text(_strata, ["Engine", "Turn", "ContextLog", "History", "Conversation"], ["count_tokens", "encode", "decode"])
    from ._strata import (ContextLog, Conversation, Engine, History, Turn, count_tokens, decode, encode)
except ImportError as e:  # The HTTP client works without the compiled module.
    _import_error = e

    def __getattr__(name):
        if name in ("ContextLog", "Conversation", "Engine", "History", "Turn", "count_tokens", "decode", "encode"):
            raise ImportError(f"strata.{name} needs the compiled module strata._strata, which did not load: "
                              f"{_import_error}") from _import_error
        raise AttributeError(f"module 'strata' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "Engine", "Turn", "ContextLog", "History", "Conversation", "Client", "count_tokens", "encode", "decode",
    "Tool", "tool",
    "StrataError", "InvalidArgumentError", "NotFoundError", "FailedPreconditionError", "UnavailableError",
    "ResourceExhaustedError", "DataLossError", "CancelledError", "DeadlineExceededError", "AlreadyExistsError",
    "InternalError", "UnauthenticatedError", "PermissionDeniedError", "AbortedError",
    "Record", "Checkpoint", "Node", "NodeDetail", "NodeList", "Hit", "FindResult", "GrepMatch", "Session", "Archive", "Task",
    "SessionStatus", "CommitOutcome", "CommitDiff", "Compaction", "AuditEntry", "Change", "SessionContext", "SessionLog", "TurnOutcome",
    "ChatImportReport", "AddReport",
]
