"""strata.Client: a ``strata serve`` over HTTP, with the in-process Engine's method names, records and errors.

Standard library only (urllib), so it works where the compiled module is not installed::

    client = strata.Client("http://127.0.0.1:8420", api_key="...")
    client.write("strata://resources/notes/build", "Run scripts/test before pushing.")
    for hit in client.find("how do I test"):
        print(hit.uri, hit.score)

A failure raises the same strata.StrataError subclass the Engine raises for it (NotFoundError,
PermissionDeniedError, ...), with ``status`` (the HTTP status) and ``request_id`` set. What the server does
differently from an Engine in process: a user key reaches only its user's data (find, glob and grep cover
what it may read), and ``commit(wait=True)`` waits for the server's worker to finish phase 2 instead of
running it in the call (the outcome then has the archive's ``state`` and, once it is done, its ``diff``, as
in process).
"""

from __future__ import annotations

import base64
import http.client
import json
import operator
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Any, Iterator

from .errors import StrataError, error_class
from .types import (AddReport, AuditEntry, Change, ChatImportReport, Checkpoint, CommitDiff, CommitOutcome, Compaction, FindResult,
                    GrepMatch, ImportReport, Node, NodeDetail, NodeList, Session, SessionContext, SessionLog, SessionStatus, Task)

__all__ = ["Client"]


_POLL_INTERVAL_S = 0.5  # How often commit's wait asks for its task when it cannot follow its event stream.


def _records(cls, items) -> list:
    return [cls(item) for item in items]


def _number(value: Any, name: str) -> int:
    """A task id or archive number for a path, read as the Engine reads an integer argument in process
    (python/src/convert.cc, IntArg): an int or int-like (numpy.int64), or a float that is a whole number;
    a bool or anything else is InvalidArgumentError naming it (task(1.9) asked for task 1)."""
    wrong = f'"{name}" must be an integer'
    if isinstance(value, bool):
        raise error_class("invalid_argument")(f"{wrong}, not a bool")
    if isinstance(value, float):
        if value == int(value) and abs(value) <= 2**53:
            return int(value)
    elif hasattr(value, "__index__"):
        number = operator.index(value)
        if -2**63 <= number < 2**63:
            return number
        raise error_class("invalid_argument")(f"{wrong} of at most 64 bits")
    raise error_class("invalid_argument")(f"{wrong}, not {type(value).__name__}")


# The arguments read as flags and as integers wherever a method sends them (the query string or the body),
# checked as the in-process Engine checks them and in its words: "" in the query string was read by the server
# as a bare flag, true (rm(uri, recursive="") removed the whole subtree), and "2" was taken for an integer
# where Engine refuses it.
_FLAG_ARGS = frozenset({"recursive", "ignore_case", "force", "overwrite", "ordered", "remove_missing", "summarize",
                        "commit", "rewrite", "rerank"})
_INT_ARGS = frozenset({"level", "limit", "max_context_tokens", "reserve_for_reply", "memory_limit", "chunk_tokens",
                       "token_budget", "max_queries", "rerank_candidates"})


def _flag(value: Any, name: str) -> Any:
    """A flag as Engine takes it: True, False or None (its default); anything else is InvalidArgumentError."""
    if value is None or isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)  # As Engine (and pybind) take numpy's bool.
    raise error_class("invalid_argument")(f'"{name}" must be True or False, not {type(value).__name__}')


def _checked_args(args: dict | None) -> dict | None:
    """`args` (a query or a body) with its flags and integers checked (and whole floats made integers)."""
    if not isinstance(args, dict):
        return args
    out = {}
    for k, v in args.items():
        if k in _FLAG_ARGS:
            v = _flag(v, k)
        elif k in _INT_ARGS and v is not None:
            v = _number(v, k)
        out[k] = v
    return out


def _quote_for_error(text: str, most: int = 60) -> str:
    """`text` quoted as the library quotes input in errors (json::QuoteForError): whole up to `most` bytes, else
    its first `most` bytes (whole characters) with "..." and its length in bytes."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= most:
        return json.dumps(text, ensure_ascii=False)
    cut = json.dumps(data[:most].decode("utf-8", "ignore"), ensure_ascii=False)
    return f'{cut[:-1]}..." ({len(data)} bytes)'


def _scope_id(value: str, where: str) -> str:
    """A user or agent id, checked as the server and Engine check one (memory::ValidateScopeId), in its words."""
    def bad(rule: str):
        return error_class("invalid_argument")(f"{where}: id {_quote_for_error(value)} {rule}")
    if not isinstance(value, str):
        raise error_class("invalid_argument")(f'"{where}" must be a string, not {type(value).__name__}')
    if not value:
        raise bad("is empty")
    if len(value.encode("utf-8", "surrogatepass")) > 128:
        raise bad("is longer than 128 characters")
    if value.startswith("."):
        raise bad("starts with '.'")
    if any(not (c.isascii() and (c.isalnum() or c in "_-.")) for c in value):
        raise bad("may contain only letters, digits, '_', '-' and '.'")
    return value


def _message_of(message: Any, index: int) -> Any:
    """A message for a request body: a str is its JSON text, parsed here (as Engine parses it)."""
    if not isinstance(message, str):
        return message
    try:
        return json.loads(message)
    except ValueError as e:
        raise error_class("invalid_argument")(
            f"messages[{index}]: a message is a dict like {{\"role\": \"user\", \"content\": \"...\"}} or its JSON "
            f"text, and this str is not one ({e})") from None


def _checkpoint_tag(checkpoint: int, tag: str | None) -> str | None:
    """The tag to check: the one given, else the Checkpoint's own (an id alone checks none)."""
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, int):
        raise TypeError("checkpoint must be an int (a checkpoint id) or what checkpoint() returned")
    if tag is not None:
        return tag
    return checkpoint.tag if isinstance(checkpoint, Checkpoint) else None


class Client:
    """A ``strata serve`` at `base_url` (e.g. "http://127.0.0.1:8420"), as the key `api_key` (a user's key
    reaches that user's data; an admin key everything in its account). `account` acts in another account
    (root key only). `timeout` is in seconds per request (0 or None: no limit)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8420", api_key: str | None = None, *,
                 account: str | None = None, timeout: float | None = 120.0) -> None:
        # As the TypeScript client reads its baseUrl: an http(s) URL (the scheme in any case) with a host, and
        # no query or fragment (either would be glued to every request's path).
        try:
            parts = urllib.parse.urlsplit(base_url.strip())
            host = parts.hostname
        except (ValueError, AttributeError) as e:
            raise error_class("invalid_argument")(f"base_url must be an http(s) URL, not {base_url!r}: {e}") from None
        if parts.scheme.lower() not in ("http", "https") or not host:
            raise error_class("invalid_argument")(f"base_url must be an http(s) URL, not {base_url!r}")
        if parts.query or parts.fragment or base_url.strip().endswith(("?", "#")):
            raise error_class("invalid_argument")(f"base_url must not have a query or fragment: {base_url!r}")
        self.base_url = urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc, parts.path, "", "")).rstrip("/")
        self.api_key = api_key
        self.account = account
        # Seconds per request; 0 or None: no limit (the TypeScript client's timeoutMs 0). Its default is the
        # TypeScript client's too (a compact or a find with the model's help can take a minute).
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
            raise error_class("invalid_argument")(f"timeout must be 0 or more seconds (0 or None: no limit), not {timeout!r}")
        self.timeout = timeout if timeout else None

    def __repr__(self) -> str:
        return f"strata.Client({self.base_url!r})"

    # ---- Transport ----

    def _headers(self, extra: dict | None = None) -> dict:
        headers = {"Accept": "application/json", "User-Agent": "strata-python"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if self.account:
            headers["X-Strata-Account"] = self.account
        headers.update(extra or {})
        return headers

    def _url(self, path: str, query: dict | None) -> str:
        url = self.base_url + path
        if query:
            pairs = {k: ("true" if v is True else "false" if v is False else v)
                     for k, v in query.items() if v is not None}
            if pairs:
                url += "?" + urllib.parse.urlencode(pairs)
        return url

    def _open(self, method: str, path: str, query: dict | None = None, body: Any = None, *,
              timeout: float | None = None, accept: str | None = None):
        data = None
        extra = {}
        query, body = _checked_args(query), _checked_args(body)
        try:
            if body is not None:
                try:
                    data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
                except (TypeError, ValueError) as e:
                    # A value JSON cannot hold (an object, NaN): the argument's error, as Engine says it, not a
                    # TypeError or the server's "invalid JSON at byte N".
                    raise error_class("invalid_argument")(f"{method} {path}: {e}") from None
                extra["Content-Type"] = "application/json"
            elif method in ("POST", "PUT"):
                data = b""
            url = self._url(path, query)
        except UnicodeEncodeError as e:
            # A str with a lone surrogate (os.fsdecode of bytes that are not UTF-8), as the engine in process
            # names it (python/strata/_text_guard.py).
            raise error_class("invalid_argument")(
                f"{method} {path}: {e.object[max(0, e.start - 30):e.end + 30]!r} is not valid Unicode: "
                f"{e.object[e.start:e.end]!r} at index {e.start} is a lone surrogate") from None
        if accept:
            extra["Accept"] = accept
        request = urllib.request.Request(url, data=data, method=method, headers=self._headers(extra))
        try:
            return urllib.request.urlopen(request, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raise self._error(e, url) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            raise self._transport_error(method, url, e) from None

    @staticmethod
    def _transport_error(method: str, url: str, e: BaseException) -> StrataError:
        """A connection that failed, timed out or broke off (also while its body or stream was read): the
        retryable UnavailableError, or DeadlineExceededError for a timeout, as the TypeScript client raises."""
        reason = getattr(e, "reason", e)
        timed_out = isinstance(reason, (socket.timeout, TimeoutError))
        return error_class("deadline_exceeded" if timed_out else "unavailable")(
            f"{method} {url}: {reason or type(reason).__name__}")

    @staticmethod
    def _error(e: urllib.error.HTTPError, url: str) -> StrataError:
        try:
            raw = e.read()
        except (http.client.HTTPException, OSError) as broken:
            return Client._transport_error(f"HTTP {e.code}, its body cut off:", url, broken)
        request_id = e.headers.get("X-Request-Id")
        try:
            err = json.loads(raw)["error"]
            code, message = err.get("code") or "unknown", err.get("message") or ""
            request_id = err.get("request_id") or request_id
        except (ValueError, KeyError, TypeError, AttributeError):
            # Not Strata's envelope (a proxy's error page, say): nothing says what Strata made of the request,
            # so it is the retryable UnavailableError with the status, as the TypeScript client has it (a
            # proxy's 404 page is not "no such node").
            code = "unavailable"
            message = f"HTTP {e.code} from {url} without Strata's envelope: {raw[:200].decode('utf-8', 'replace')}"
        return error_class(code)(message, code=code, status=e.code, request_id=request_id)

    def _call(self, method: str, path: str, query: dict | None = None, body: Any = None) -> Any:
        return self._request(method, path, query, body)[0]

    def _request(self, method: str, path: str, query: dict | None = None, body: Any = None) -> tuple[Any, Any]:
        """The envelope's result and the response's headers."""
        with self._open(method, path, query, body) as response:
            try:
                raw = response.read()
            except (http.client.HTTPException, OSError) as e:
                raise self._transport_error(method, path, e) from None
            status, headers = response.status, response.headers
        try:
            envelope = json.loads(raw)
        except ValueError:
            raise error_class("unavailable")(f"{method} {path}: HTTP {status} with a body that is not JSON",
                                             status=status) from None
        if not isinstance(envelope, dict) or "result" not in envelope:
            raise error_class("unavailable")(f"{method} {path}: HTTP {status} without Strata's envelope",
                                             status=status)
        return envelope["result"], headers

    @staticmethod
    def _path(method: str, template: str, **params) -> str:
        # `template` with its {name}s filled in, as the TypeScript client fills them, in its words (the
        # server's for a missing parameter): "" and "." / ".." are no id (a URL makes them another route),
        # and a surrogate no UTF-8 holds is named, not a UnicodeEncodeError.
        def fill(match: "re.Match[str]") -> str:
            name = match.group(1)
            text = str(params[name])
            if text == "":
                raise error_class("invalid_argument")(f'{method} {template}: "{name}" must not be empty')
            if text in (".", ".."):
                raise error_class("invalid_argument")(f'{method} {template}: "{name}" must not be "{text}"')
            try:
                return urllib.parse.quote(text, safe="")
            except UnicodeEncodeError as e:
                raise error_class("invalid_argument")(
                    f'{method} {template}: "{name}" is not valid Unicode: {text[e.start:e.end]!r} at index '
                    f"{e.start} is a lone surrogate") from None
        return re.sub(r"\{(\w+)\}", fill, template)

    # ---- Service ----

    def health(self) -> dict:
        """The server's health (no key needed): the envelope's ``result``, ``{"alive": true}``, as the
        TypeScript client returns it."""
        return self._call("GET", "/health")

    def ready(self) -> dict:
        """Whether the server can serve (its storage answers): the envelope's ``result``."""
        return self._call("GET", "/ready")

    # ---- The store ----

    def write(self, uri: str, content: str, *, abstract: str | None = None, overview: str | None = None,
              category: str | None = None, metadata: dict | None = None, overwrite: bool = True) -> Node:
        body = {"uri": uri, "content": content, "abstract": abstract, "overview": overview, "category": category,
                "metadata": metadata, "overwrite": overwrite}
        return Node(self._call("POST", "/api/v1/fs/write", body={k: v for k, v in body.items() if v is not None}))

    def mkdir(self, uri: str, *, abstract: str | None = None, overview: str | None = None,
              ordered: bool = False) -> Node:
        body = {"uri": uri, "abstract": abstract, "overview": overview, "ordered": ordered}
        return Node(self._call("POST", "/api/v1/fs/mkdir", body={k: v for k, v in body.items() if v is not None}))

    def read(self, uri: str, level: int = 2) -> str:
        return self._call("GET", "/api/v1/fs/read", {"uri": uri, "level": level})["content"]

    def ls(self, uri: str | None = None, *, recursive: bool = False, limit: int = 0) -> NodeList:
        """The children of `uri`; without it, of what the key may list (a user key: its own scope)."""
        return self._nodes("/api/v1/fs/ls", {"uri": uri, "recursive": recursive, "limit": limit or None})

    def tree(self, uri: str | None = None, *, limit: int = 0) -> NodeList:
        return self._nodes("/api/v1/fs/tree", {"uri": uri, "limit": limit or None})

    def _nodes(self, path: str, query: dict) -> NodeList:
        """A listing, with ``truncated`` from the server's X-Strata-Truncated header."""
        result, headers = self._request("GET", path, query)
        if not isinstance(result, list):
            raise error_class("unavailable")(f"GET {path}: the server's answer is not a list")
        return NodeList(_records(Node, result), headers.get("X-Strata-Truncated") == "true")

    def stat(self, uri: str) -> NodeDetail:
        return NodeDetail(self._call("GET", "/api/v1/fs/stat", {"uri": uri}))

    def rm(self, uri: str, *, recursive: bool = False) -> int:
        return self._call("DELETE", "/api/v1/fs", {"uri": uri, "recursive": recursive})["removed"]

    def mv(self, src: str, dst: str) -> None:
        self._call("POST", "/api/v1/fs/mv", body={"from": src, "to": dst})

    def link(self, src: str, dst: str, reason: str = "") -> None:
        self._call("POST", "/api/v1/fs/link", body={"from": src, "to": dst, "reason": reason})

    def unlink(self, src: str, dst: str) -> None:
        self._call("POST", "/api/v1/fs/unlink", body={"from": src, "to": dst})

    def glob(self, pattern: str, under: str | None = None) -> list[Node]:
        return _records(Node, self._call("GET", "/api/v1/fs/glob", {"pattern": pattern, "under": under}))

    def grep(self, pattern: str, under: str | None = None, *, ignore_case: bool = False) -> list[GrepMatch]:
        return _records(GrepMatch, self._call("GET", "/api/v1/fs/grep", {"pattern": pattern, "under": under,
                                                                         "ignore_case": ignore_case}))

    def find(self, query: str, limit: int | None = None, under: str | None = None, session: str | None = None,
             token_budget: int | None = None, *, rewrite: bool | None = None, rerank: bool | None = None,
             max_queries: int | None = None, rerank_candidates: int | None = None,
             type: str | None = None) -> FindResult:
        """``rewrite``/``rerank`` ask the server's model for help (its cost is the result's ``model``). An argument
        left None takes the server's default (the engine's, as Engine.find has it)."""
        body = {"query": query, "limit": limit, "under": under, "session": session, "token_budget": token_budget,
                "rewrite": rewrite, "rerank": rerank, "max_queries": max_queries,
                "rerank_candidates": rerank_candidates, "type": type}
        return FindResult(self._call("POST", "/api/v1/search/find",
                                     body={k: v for k, v in body.items() if v is not None}))

    def export_files(self, uri: str) -> dict:
        """The subtree at `uri` as Markdown files: {"files": [{"path", "content"}], ...} (carried in the
        response; the server writes nothing of its own)."""
        return self._call("GET", "/api/v1/fs/export", {"uri": uri})

    def import_files(self, files: list[dict], uri: str = "strata://resources") -> ImportReport:
        """Writes Markdown files ([{"path", "content"}], as export_files gives them) below `uri`."""
        return ImportReport(self._call("POST", "/api/v1/fs/import", body={"uri": uri, "files": files}))

    # ---- Memories ----

    def remember(self, text: str, scope: str, *, category: str = "") -> list[Change]:
        body = {"text": text, "scope": scope, "category": category or None}
        return _records(Change, self._call("POST", "/api/v1/memories/remember",
                                           body={k: v for k, v in body.items() if v is not None}))

    def history(self, uri: str) -> list[AuditEntry]:
        return _records(AuditEntry, self._call("GET", "/api/v1/memories/history", {"uri": uri}))

    def changes(self, under: str | None = None, limit: int | None = None) -> list[AuditEntry]:
        return _records(AuditEntry, self._call("GET", "/api/v1/memories/changes", {"under": under, "limit": limit}))

    def consolidate(self, under: str) -> list[Change]:
        return _records(Change, self._call("POST", "/api/v1/memories/consolidate", body={"under": under}))

    # ---- Sessions ----

    def create_session(self, user: str = "", session_id: str | None = None, agent: str | None = None) -> Session:
        body = {"user": user or None, "id": session_id, "agent": agent}
        return Session(self._call("POST", "/api/v1/sessions", body={k: v for k, v in body.items() if v is not None}))

    def add_resources(self, files: dict[str, str | bytes], uri: str, *, remove_missing: bool = False,
                      chunk_tokens: int | None = None, summarize: bool = False) -> AddReport:
        """Documents and code as resources below `uri`: `files` maps relative paths to their text (or bytes,
        sent as base64: a PDF). A file sent again unchanged is not written again."""
        carried = []
        for path, content in files.items():
            if isinstance(content, bytes):
                carried.append({"path": path, "content": base64.b64encode(content).decode("ascii"),
                                "encoding": "base64"})
            else:
                carried.append({"path": path, "content": content})
        body = {"uri": uri, "files": carried, "remove_missing": remove_missing, "chunk_tokens": chunk_tokens,
                "summarize": summarize}
        return AddReport(self._call("POST", "/api/v1/resources", body={k: v for k, v in body.items() if v is not None}))

    def import_sessions(self, format: str, content: str | bytes, user: str | None = None, *, agent: str | None = None,
                        commit: bool = False, name: str | None = None) -> ChatImportReport:
        """A chat export's text (chatgpt, claude, kimi or openai-jsonl) as sessions; a user key imports for
        its own user. Importing it again adds nothing. `content` may be bytes (UTF-8), as Engine takes it."""
        if isinstance(content, (bytes, bytearray)):
            try:
                content = bytes(content).decode("utf-8")
            except UnicodeDecodeError as e:
                raise error_class("invalid_argument")(f"content is not UTF-8 at byte {e.start}") from None
        body = {"format": format, "content": content, "user": user, "agent": agent, "commit": commit, "name": name}
        return ChatImportReport(self._call("POST", "/api/v1/sessions/import",
                                           body={k: v for k, v in body.items() if v is not None}))

    def get_session(self, session_id: str, *, messages: bool = False) -> Session:
        _flag(messages, "messages")
        view = self._call("GET", self._path("GET", "/api/v1/sessions/{id}", id=session_id))
        if not messages:
            view.pop("messages", None)
        return Session(view)

    def list_sessions(self, *, user: str | None = None) -> list[Session]:
        if user is not None:
            _scope_id(user, "user")  # As Engine.list_sessions(user=) checks it: "" or "a/b" listed nothing.
        return [Session(s) for s in self._call("GET", "/api/v1/sessions") if user is None or s.get("user") == user]

    def add_messages(self, session_id: str, messages: dict | str | list[dict | str]) -> Session:
        """`messages`: one message or a list; a message is a dict or its JSON text (a context.jsonl line), as
        Engine.add_messages takes it (a str was sent as a list of its characters)."""
        if isinstance(messages, (dict, str)):
            messages = [messages]
        messages = [_message_of(m, i) for i, m in enumerate(messages)]
        return Session(self._call("POST", self._path("POST", "/api/v1/sessions/{id}/messages", id=session_id),
                                  body={"messages": list(messages)}))

    def messages(self, session_id: str) -> list[dict]:
        return self._call("GET", self._path("GET", "/api/v1/sessions/{id}/messages", id=session_id))

    def delete_session(self, session_id: str, *, force: bool = False) -> None:
        self._call("DELETE", self._path("DELETE", "/api/v1/sessions/{id}", id=session_id), {"force": force})

    def checkpoint(self, session_id: str) -> Checkpoint:
        return Checkpoint(self._call("POST", self._path("POST", "/api/v1/sessions/{id}/checkpoints", id=session_id)))

    def revert(self, session_id: str, checkpoint: int, tag: str | None = None) -> Session:
        body = {"checkpoint": int(checkpoint), "tag": _checkpoint_tag(checkpoint, tag)}
        return Session(self._call("POST", self._path("POST", "/api/v1/sessions/{id}/revert", id=session_id),
                                  body={k: v for k, v in body.items() if v is not None}))

    def fork(self, session_id: str, new_id: str | None = None, checkpoint: int | None = None,
             tag: str | None = None) -> Session:
        if checkpoint is None and tag is not None:
            raise error_class("invalid_argument")("tag names a checkpoint: give checkpoint with it")
        body = {"id": new_id, "checkpoint": None if checkpoint is None else int(checkpoint),
                "tag": None if checkpoint is None else _checkpoint_tag(checkpoint, tag)}
        return Session(self._call("POST", self._path("POST", "/api/v1/sessions/{id}/fork", id=session_id),
                                  body={k: v for k, v in body.items() if v is not None}))

    def session_log(self, session_id: str) -> SessionLog:
        return SessionLog(self._call("GET", self._path("GET", "/api/v1/sessions/{id}/log", id=session_id)))

    def set_system_prompt(self, session_id: str, prompt: str) -> None:
        self._call("POST", self._path("POST", "/api/v1/sessions/{id}/system-prompt", id=session_id), body={"prompt": prompt})

    def record_usage(self, session_id: str, tokens: int) -> None:
        """A usage mark: the provider-reported tokens of the session's whole context."""
        self._call("POST", self._path("POST", "/api/v1/sessions/{id}/usage", id=session_id), body={"tokens": tokens})

    def context(self, session_id: str, *, max_context_tokens: int | None = None,
                reserve_for_reply: int | None = None, memory_limit: int | None = None, query: str | None = None,
                system_prompt: str | None = None, encoding: str | None = None) -> SessionContext:
        return SessionContext(self._call("GET", self._path("GET", "/api/v1/sessions/{id}/context", id=session_id), {
            "max_context_tokens": max_context_tokens, "reserve_for_reply": reserve_for_reply,
            "memory_limit": memory_limit, "query": query, "system_prompt": system_prompt, "encoding": encoding}))

    def compact(self, session_id: str, *, focus: str = "") -> Compaction:
        """Folds the session's older messages into a summary with the server's model, keeping the newest turns."""
        return Compaction(self._call("POST", self._path("POST", "/api/v1/sessions/{id}/compact", id=session_id), body={"focus": focus}))

    def commit(self, session_id: str, *, wait: bool = False, timeout: float | None = None) -> CommitOutcome:
        """Archives the session's messages; phase 2 runs on the server's worker. With wait=True, returns once
        that task has finished (done or dead), with the archive's ``state`` and, when it is done, its ``diff``
        (what Engine.commit(wait=True) returns in process)."""
        _flag(wait, "wait")
        view = self._call("POST", self._path("POST", "/api/v1/sessions/{id}/commit", id=session_id))
        if not wait:
            return CommitOutcome(view)
        deadline = None if timeout is None else time.monotonic() + timeout
        task = None
        try:
            for task in self.task_events(view["task_id"], timeout=timeout):
                pass
        except StrataError as e:
            # The server holds a limited number of streams open (429): the commit is made, so ask instead
            # (as the TypeScript client does); a retry of the commit would commit again.
            if e.code != "resource_exhausted":
                raise
        # Also when the stream ended before the task did (the server's hour per stream).
        while task is None or not task.finished:
            if task is not None:
                if deadline is not None and time.monotonic() > deadline:
                    raise error_class("deadline_exceeded")(f"task {view['task_id']} did not finish within {timeout} s")
                time.sleep(_POLL_INTERVAL_S)
            task = self.task(view["task_id"])
        status = self.session_status(session_id)
        for archive in status.archives:
            if archive.archive == view["archive"]:
                view["state"] = archive.state
                if archive.get("error"):
                    view["error"] = archive.error
        if task is not None and task.state == "dead" and "error" not in view:
            view["error"] = task.get("last_error", "phase 2 failed")
        if view.get("state") == "done":
            view["diff"] = self.archive_diff(session_id, view["archive"])
        return CommitOutcome(view)

    def archive_diff(self, session_id: str, archive: int) -> CommitDiff:
        """What phase 2 changed for one of the session's archives (FailedPreconditionError until it is done)."""
        return CommitDiff(self._call("GET", self._path("GET", "/api/v1/sessions/{id}/archives/{archive}/diff", id=session_id, archive=_number(archive, 'archive'))))

    def session_status(self, session_id: str) -> SessionStatus:
        return SessionStatus(self._call("GET", self._path("GET", "/api/v1/sessions/{id}/status", id=session_id)))

    def retry(self, session_id: str | None = None) -> int:
        """Queues again what failed for good: one session's failed archives and dead jobs, or with no id
        (the root key's) everything of the account, as the in-process `Engine.retry()` does."""
        if not session_id:  # None or "", as Engine.retry("").
            return self._call("POST", "/api/v1/admin/retry")["requeued"]
        return self._call("POST", self._path("POST", "/api/v1/sessions/{id}/retry", id=session_id))["requeued"]

    # ---- Tasks ----

    def task(self, task_id: int) -> Task:
        return Task(self._call("GET", f"/api/v1/tasks/{_number(task_id, 'task_id')}"))

    def tasks(self, *, session: str | None = None, state: str | None = None, limit: int = 200) -> list[Task]:
        return _records(Task, self._call("GET", "/api/v1/tasks", {"session": session, "state": state, "limit": limit}))

    def task_events(self, task_id: int, *, timeout: float | None = None) -> Iterator[Task]:
        """The task's states as they change (Server-Sent Events), ending once it is done or dead. `timeout`
        bounds the whole wait (DeadlineExceededError when it passes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        path = f"/api/v1/tasks/{_number(task_id, 'task_id')}/events"
        # A read waits at least 30 s: the server sends a keep-alive comment every 15 s.
        read_timeout = None if self.timeout is None else max(self.timeout, 30.0)
        with self._open("GET", path, accept="text/event-stream", timeout=read_timeout) as response:
            event, data = "message", []
            lines = iter(response)
            while True:
                try:
                    raw = next(lines)
                except StopIteration:
                    return
                except (http.client.HTTPException, OSError) as e:  # The server went away mid-stream.
                    raise self._transport_error("GET", path, e) from None
                if deadline is not None and time.monotonic() > deadline:
                    raise error_class("deadline_exceeded")(f"task {task_id} did not finish within {timeout} s")
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if data:
                        payload = "\n".join(data)
                        if event == "task":
                            try:
                                state = json.loads(payload)
                            except ValueError:
                                state = None
                            if not isinstance(state, dict):  # The stream is broken (TypeScript: data not JSON).
                                raise error_class("unavailable")(
                                    f"GET {path}: the task event's data is not a JSON object: {payload[:200]!r}",
                                    status=200)
                            task = Task(state)
                            yield task
                            if task.finished:
                                return
                        elif event == "end":
                            return
                    event, data = "message", []
                elif line.startswith(":"):
                    continue
                else:
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "event":
                        event = value
                    elif name == "data":
                        data.append(value)

    # ---- Skills, prompts, tokens ----

    def add_skill(self, agent: str, skill_md: str) -> str:
        return self._call("POST", "/api/v1/skills", body={"agent": agent, "skill_md": skill_md})["uri"]

    def list_skills(self, agent: str) -> list[Node]:
        return _records(Node, self._call("GET", "/api/v1/skills", {"agent": agent}))

    def show_skill(self, agent: str, name: str) -> str:
        return self._call("GET", self._path("GET", "/api/v1/skills/{name}", name=name), {"agent": agent})["skill_md"]

    def render_prompt(self, id: str, variables: dict | None = None, /, **kwargs: Any) -> str:
        if variables is not None and not isinstance(variables, dict):
            raise error_class("invalid_argument")("variables must be a dict")  # As Engine.render_prompt says.
        return self._call("POST", "/api/v1/prompts/render",
                          body={"id": id, "vars": {**(variables or {}), **kwargs}})["text"]

    def count_tokens(self, text_or_messages: str | dict | list, encoding: str = "o200k_base") -> int:
        body: dict = {"encoding": encoding}
        if isinstance(text_or_messages, str):
            body["text"] = text_or_messages
        else:
            body["messages"] = [text_or_messages] if isinstance(text_or_messages, dict) else list(text_or_messages)
        result = self._call("POST", "/api/v1/tokens/count", body=body)
        # The server without the vocabulary counts characters / 4 and says so: said here as strata.count_tokens
        # says it in process.
        if result.get("warning"):
            warnings.warn(str(result["warning"]), RuntimeWarning, stacklevel=2)
        return result["tokens"]


# Arguments no UTF-8 holds are named before anything is sent, as the engine in process names them.
from ._text_guard import guard_client  # noqa: E402  (after the class it wraps)

guard_client(Client)
