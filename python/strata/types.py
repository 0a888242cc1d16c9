"""What Strata returns: records over the JSON views every front end shares (docs/api/openapi.yaml).

The in-process module (``strata.Engine``) and the HTTP client (``strata.Client``) build these from the same
views, so one question gets one answer from both. Each record reads like an object (``hit.uri``) and like a
mapping (``hit["uri"]``); ``to_dict()`` gives a plain dict (a copy) for JSON or logging::

    for hit in engine.find("which seat"):
        print(hit.uri, hit.score, hit.tokens)
"""

from __future__ import annotations

import copy
from typing import Any, Iterator

__all__ = [
    "Record", "Checkpoint", "Node", "NodeDetail", "Hit", "FindResult", "GrepMatch", "Session", "Archive", "Task",
    "SessionStatus", "CommitOutcome", "CommitDiff", "Compaction", "AuditEntry", "Change", "SessionContext", "SessionLog", "TurnOutcome",
    "WorkReport", "ImportReport", "ChatImportReport", "AddReport",
]


class Record:
    """A JSON view as an object: attributes and keys are the view's members."""

    __slots__ = ("_data",)
    #: Members whose values are records (or lists of records) of another class.
    _nested: dict[str, type[Record]] = {}

    def __init__(self, data: dict[str, Any] | None = None, /, **members: Any) -> None:
        data = dict(data or {}, **members)
        for name, cls in self._nested.items():
            value = data.get(name)
            if isinstance(value, list):
                data[name] = [v if isinstance(v, Record) else cls(v) for v in value]
            elif isinstance(value, dict):
                data[name] = cls(value)
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no member {name!r} "
                                 f"(it has: {', '.join(self._data)})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def keys(self):
        return self._data.keys()

    def to_dict(self) -> dict[str, Any]:
        """The view as plain dicts and lists (a deep copy)."""
        def plain(v: Any) -> Any:
            if isinstance(v, Record):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            return copy.deepcopy(v)
        return {k: plain(v) for k, v in self._data.items()}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return type(self) is type(other) and self.to_dict() == other.to_dict()
        if isinstance(other, dict):
            return self.to_dict() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._data.items())
        return f"{type(self).__name__}({inner})"

    def __dir__(self):
        return list(super().__dir__()) + list(self._data)

    def __getstate__(self):
        return self._data

    def __setstate__(self, state):
        object.__setattr__(self, "_data", state)


class Checkpoint(int):
    """A checkpoint: its id (this int, as kimi-cli numbers them: 0, 1, ... within the current messages),
    ``messages`` (how many come before it), ``tag`` and ``session``.

    An id names another checkpoint once the session is committed, reverted or compacted. Give this object
    back to ``revert`` or ``fork`` and they act only while that id still has the messages this one had
    before it, in the same conversation (since the last commit); ``FailedPreconditionError`` otherwise.
    It compares and hashes as its id, an int; a checkpoint from ``session_log()`` is a dict: pass
    ``revert(session, c["id"], tag=c["tag"])``."""

    def __new__(cls, data: dict[str, Any]) -> "Checkpoint":
        self = super().__new__(cls, data["checkpoint"])
        self.session = data.get("session", "")
        self.messages = data.get("messages", 0)
        self.tag = data.get("tag", "")
        return self

    def __getnewargs__(self) -> tuple[dict[str, Any]]:  # copy, deepcopy and pickle keep the tag.
        return (self.to_dict(),)

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session, "checkpoint": int(self), "messages": self.messages, "tag": self.tag}

    def __repr__(self) -> str:
        return f"Checkpoint({int(self)}, messages={self.messages}, tag={self.tag!r})"


class Node(Record):
    """A node of the store: ``uri``, ``is_dir``, ``type``, ``category``, ``abstract``, ``size``,
    ``created_ms``, ``updated_ms`` (and ``superseded`` for a memory a newer one replaced)."""
    __slots__ = ()


class NodeList(list):
    """What ``ls`` and ``tree`` return: a list of Node, whose ``truncated`` is True when ``limit`` cut it (there
    are more), in process and over HTTP alike (MCP's list and tree say the same)."""

    def __init__(self, nodes=(), truncated: bool = False):
        super().__init__(nodes)
        self.truncated = truncated

    def __repr__(self) -> str:
        return f"NodeList({list.__repr__(self)}, truncated={self.truncated})"


class NodeDetail(Node):
    """``stat``: a Node plus ``overview``, ``metadata`` (a dict) and ``relations`` ([{from, to, reason}])."""
    __slots__ = ()


class Hit(Record):
    """A find result: ``uri``, ``level`` (0 abstract, 1 overview, 2 content), ``score``, ``abstract``,
    ``reason`` (why it ranked), ``tokens`` (of what a reader gets at that level)."""
    __slots__ = ()


class FindResult(Record):
    """``hits`` (best first), ``tokens`` (their sum) and ``searched`` (the text searched, when a session's
    newest request was added to a short follow-up); with model help, ``queries`` (the model's searches) and
    ``model`` (its cost: calls, input_tokens, output_tokens, ms, error). Iterating gives the hits."""
    __slots__ = ()
    _nested = {"hits": Hit}

    def __iter__(self) -> Iterator[Hit]:
        return iter(self._data["hits"])

    def __len__(self) -> int:
        return len(self._data["hits"])

    def __bool__(self) -> bool:
        return bool(self._data["hits"])

    def __getitem__(self, key):  # result[0] is the best hit; result["tokens"] a member.
        if isinstance(key, (int, slice)):
            return self._data["hits"][key]
        return self._data[key]


class GrepMatch(Record):
    """A grep match: ``uri``, ``line`` (1-based), ``text``, ``superseded``."""
    __slots__ = ()


class Session(Record):
    """A session: ``id``, ``user``, ``agent``, ``abstract``, ``overview``, ``contexts``, ``stats``,
    ``created_ms``, ``updated_ms``, ``title`` and ``source`` for an imported one (and ``messages`` when asked
    for)."""
    __slots__ = ()


class Archive(Record):
    """A committed archive: ``archive`` (its number), ``messages``, ``state`` (archived, summarized,
    extracted, done, failed), ``error`` and ``notes`` when there are any."""
    __slots__ = ()


class Task(Record):
    """A background task (a commit's phase 2): ``id``, ``kind``, ``state`` (pending, running, done, dead),
    ``attempts``, ``last_error``, ``session``, ``created_ms``, ``updated_ms``."""
    __slots__ = ()

    @property
    def finished(self) -> bool:
        """Whether the task will not run again (done, or dead after its attempts)."""
        return self._data.get("state") in ("done", "dead")


class SessionStatus(Record):
    """``session``, its ``archives`` and their phase-2 ``jobs`` (Task records)."""
    __slots__ = ()
    _nested = {"archives": Archive, "jobs": Task}


class Change(Record):
    """One memory change: ``action`` (create, merge, supersede, skip), ``uri``, ``reason``."""
    __slots__ = ()


class CommitDiff(Record):
    """What one archive's phase 2 changed: ``session``, ``archive``, ``summary``, ``candidates`` (how many
    memories extraction proposed) and ``changes`` (Change records)."""
    __slots__ = ()
    _nested = {"changes": Change}


class CommitOutcome(Record):
    """A commit: ``session``, ``archive`` (its number), ``messages`` archived, ``task_id`` (the phase-2
    task); after ``wait=True`` also ``state``, ``diff`` (a CommitDiff, once phase 2 is done) and ``error``
    when phase 2 did not finish (it is retried later)."""
    __slots__ = ()
    _nested = {"diff": CommitDiff}


class AuditEntry(Record):
    """A memory's history entry: ``uri``, ``action``, ``source``, ``session``, ``at_ms``, ``reason``,
    ``before``, ``after``."""
    __slots__ = ()


class SessionContext(Record):
    """A session's window as it would be sent: ``system_prompt``, ``messages`` ([{index, tokens, included,
    message}]), ``memories`` (Hit records), ``sections`` (tokens per part), ``budget``, ``total_tokens``,
    ``warnings``."""
    __slots__ = ()
    _nested = {"memories": Hit}

    @property
    def sent(self) -> list[dict]:
        """The messages that would be sent, in order (the included ones)."""
        return [m["message"] for m in self._data.get("messages", []) if m.get("included")]


class Compaction(Record):
    """What a compaction did: ``session`` (the Session after it), ``compacted`` (messages folded into the
    summary), ``kept``, ``summary``, ``pruned_fallback`` (the model failed and old tool output was pruned
    instead, ``llm_error`` says why), ``tokens_before``, ``tokens_after``."""
    __slots__ = ()
    _nested = {"session": Session}


class SessionLog(Record):
    """A session's log: ``system_prompt``, ``messages``, ``checkpoints``, ``usage_tokens``, ``rotations``."""
    __slots__ = ()


class TurnOutcome(Record):
    """What finishing a turn did: ``committed`` (the policy was met), ``job_id``, ``uncommitted_tokens``,
    ``uncommitted_turns``."""
    __slots__ = ()


class WorkReport(Record):
    """Phase-2 work done now: ``completed``, ``pending``, ``dead``."""
    __slots__ = ()


class ImportReport(Record):
    """An import: ``directories``, ``leaves``, ``relations``, and ``skipped`` ([{path, reason}], as an add
    reports them)."""
    __slots__ = ()
    _nested = {"skipped": Record}


class AddReport(Record):
    """Documents and code added as resources: ``added``, ``updated``, ``unchanged``, ``removed`` (paths),
    ``skipped`` ([{path, reason}]), ``chunks`` (written now) and ``bytes`` (read)."""
    __slots__ = ()
    _nested = {"skipped": Record}


class ChatImportReport(Record):
    """A chat export's import: ``imported`` ([{session, title, source, messages, archive?, continued?}];
    ``continued``: a conversation imported before that went on since, its ``messages`` new ones appended),
    ``unchanged`` (session ids imported before) and ``skipped`` ([{where, reason}]), each entry a record."""
    __slots__ = ()
    _nested = {"imported": Record, "skipped": Record}
