"""Tools for strata.Conversation: Python callables the model may call.

A plain function is described from its signature and docstring::

    def weather(city: str, unit: str = "celsius") -> str:
        "The current weather in a city."
        ...

becomes the tool ``weather`` with parameters {"city": string (required), "unit": string}. Annotations map
to JSON Schema types (str, int, float, bool, list, dict, Optional[...], Literal[...]); use ``@strata.tool``
to give the name, description or the whole parameter schema yourself.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable

__all__ = ["Tool", "tool", "describe"]


@dataclasses.dataclass(frozen=True)
class Tool:
    """A tool: its name, description, JSON Schema for its arguments, and the function that runs it (called
    with the arguments as keywords; its result is sent to the model as text, or as JSON if not a str)."""
    name: str
    description: str
    parameters: dict
    fn: Callable[..., Any]


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
         parameters: dict | None = None):
    """Decorator: ``@strata.tool`` or ``@strata.tool(name=..., description=..., parameters=...)``."""
    def wrap(f: Callable[..., Any]) -> Tool:
        base = describe(f)
        return Tool(name or base.name, description if description is not None else base.description,
                    parameters if parameters is not None else base.parameters, f)
    return wrap(fn) if fn is not None else wrap


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def _schema(annotation: Any) -> dict:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        rest = [a for a in args if a is not type(None)]
        return _schema(rest[0]) if len(rest) == 1 else {"anyOf": [_schema(a) for a in rest]}
    if origin in (list, tuple, set, frozenset):
        out: dict = {"type": "array"}
        if args and args[0] is not Ellipsis:
            out["items"] = _schema(args[0])
        return out
    if origin is dict:
        return {"type": "object"}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    return {}


def describe(obj: Any) -> Tool:
    """A Tool for `obj`: a Tool as it is, or a callable described from its signature and docstring."""
    if isinstance(obj, Tool):
        return obj
    if not callable(obj):
        raise TypeError(f"a tool is a callable or a strata.Tool, not {type(obj).__name__}")
    name = getattr(obj, "__name__", None) or type(obj).__name__
    doc = inspect.getdoc(obj) or ""
    description = doc.split("\n\n")[0].strip() or name
    try:
        hints = typing.get_type_hints(obj)
    except Exception:  # Annotations that do not resolve: described without types.
        hints = {}
    properties: dict[str, dict] = {}
    required: list[str] = []
    for p in inspect.signature(obj).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        properties[p.name] = _schema(hints.get(p.name, p.annotation))
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
    parameters: dict = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return Tool(name, description, parameters, obj)
