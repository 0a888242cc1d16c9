"""Text that is not UTF-8, at the module's edge.

A ``str`` holding a lone surrogate (what ``os.fsdecode`` makes of a file name's bytes that are not UTF-8) cannot
become the UTF-8 text every entry point takes: pybind11 refused it as "incompatible function arguments"
(``TypeError``) or "Unable to cast" (``RuntimeError``), not as the ``InvalidArgumentError`` the rest of the
module raises for bad input. Each entry point is wrapped so that such a failure, when an argument is such a
string (or a list holding one: paths, URIs), is raised as ``InvalidArgumentError`` naming the argument and the
character. Strings inside dicts (messages, metadata) are checked where they are converted (python/src/convert.cc).
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any

from .errors import InvalidArgumentError


def _not_utf8(args: tuple, kwargs: dict, check_bytes: bool = True) -> str | None:
    """Names the first argument that is a str no UTF-8 can hold (or, with `check_bytes`, bytes that are not
    UTF-8), or None."""
    named = [(f"argument {i + 1}", a) for i, a in enumerate(args)] + [(f"{k!r}", v) for k, v in kwargs.items()]
    # A list of strings (paths, URIs) is converted by pybind11 too: its items are named by their index.
    items = []
    for name, value in named:
        if isinstance(value, (list, tuple)):
            items += [(f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, (str, bytes, bytearray))]
        else:
            items.append((name, value))
    for name, value in items:
        if isinstance(value, (bytes, bytearray)):
            if not check_bytes:
                continue
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as e:
                return (f"{name} is not UTF-8: byte {value[e.start]:#04x} at index {e.start} (a name that is not UTF-8 "
                        f"is not a path or name Strata stores)")
            continue
        if not isinstance(value, str):
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return (f"{name} is not valid Unicode: {value[e.start:e.end]!r} at index {e.start} is a lone "
                    f"surrogate (a name decoded from bytes that are not UTF-8?)")
    return None


def _fspath(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, os.PathLike) for v in value):
        return type(value)(os.fspath(v) if isinstance(v, os.PathLike) else v for v in value)
    return value


def _holds_bytes(args: tuple, kwargs: dict) -> bool:
    """Whether an argument, or an item of a list or tuple argument, is bytes (checked before the call)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, (bytes, bytearray)):
            return True
        if isinstance(value, (list, tuple)) and any(isinstance(v, (bytes, bytearray)) for v in value):
            return True
    return False


# Arguments whose bytes are a file's content, not a name (entry point: its position after self, its keyword):
# passed on as they are, for the parser to read as the CLI reads the file (a chat export's damaged line is
# skipped or repaired and reported, not the whole export refused as "a name that is not UTF-8").
_CONTENT_BYTES = {"Engine.import_sessions": (1, "content")}


def _names_checked(where: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args` (after self) and `kwargs` without the arguments of `where` that are content."""
    if where not in _CONTENT_BYTES:
        return args, kwargs
    position, keyword = _CONTENT_BYTES[where]
    return (tuple(None if i == position else a for i, a in enumerate(args)),
            {k: v for k, v in kwargs.items() if k != keyword})


def _guard(func: Any, where: str, skip_self: bool) -> Any:
    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        # A path given as a pathlib.Path (an os.PathLike), alone or in a list, is taken as its text.
        args = tuple(_fspath(a) for a in args)
        kwargs = {k: _fspath(v) for k, v in kwargs.items()}
        # bytes that are not UTF-8 (os.fsencode of such a name) are refused before the call: pybind11 passes
        # them through, and the failure came (as a bare UnicodeDecodeError) only once the work was done.
        named, named_kwargs = _names_checked(where, args[1:] if skip_self else args, kwargs)
        if _holds_bytes(named, named_kwargs):
            problem = _not_utf8(named, named_kwargs)
            if problem is not None and "is not UTF-8" in problem:
                raise InvalidArgumentError(f"{where}: {problem}")
        try:
            return func(*args, **kwargs)
        except (TypeError, RuntimeError) as e:
            # Only pybind11's refusal to convert the arguments is read so, and only when a string among them no
            # UTF-8 holds (which pybind11 refuses too); its own message stays as the cause.
            said = str(e)
            if not any(p in said for p in ("incompatible function arguments", "incompatible constructor arguments",
                                           "Unable to cast")):
                raise
            # Content taken as raw bytes is not blamed for another argument's refusal; a str holding a lone
            # surrogate is named wherever it is.
            problem = (_not_utf8(named, named_kwargs) or
                       _not_utf8(args[1:] if skip_self else args, kwargs, check_bytes=False))
            if problem is None:
                raise
            raise InvalidArgumentError(f"{where}: {problem}") from e
    return guarded


def guard_text(module: Any, classes: list[str], functions: list[str]) -> None:
    """Wraps the public methods (and constructors) of `classes` and the `functions` of the compiled module."""
    for class_name in classes:
        cls = getattr(module, class_name)
        for name, member in list(vars(cls).items()):
            if name.startswith("_") and name != "__init__":
                continue
            if isinstance(member, property):
                continue
            where = f"{class_name}.{name}" if name != "__init__" else class_name
            if isinstance(member, staticmethod):
                setattr(cls, name, staticmethod(_guard(member.__func__, where, skip_self=False)))
            elif callable(getattr(cls, name, None)):
                setattr(cls, name, _guard(getattr(cls, name), where, skip_self=True))
    for name in functions:
        setattr(module, name, _guard(getattr(module, name), name, skip_self=False))


def _text_parameters(func: Any) -> dict[str, bool]:
    """The parameters of `func` annotated ``str`` or ``str | None``: name -> whether None is taken."""
    texts = {}
    for name, param in inspect.signature(func).parameters.items():
        annotation = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
        if annotation == "str":
            texts[name] = False
        elif annotation in ("str | None", "Optional[str]"):
            texts[name] = True
    return texts


def _prechecked(func: Any, where: str) -> Any:
    signature = inspect.signature(func)
    texts = _text_parameters(func)

    @functools.wraps(func)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        # A text argument that is no text (a number, a list) is the TypeError the Engine raises in process
        # (pybind11 converts no such value to a string); before, it went out as its repr or JSON value and
        # came back as the server's InvalidArgumentError, or went through.
        if texts:
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{where}: {e}") from None
            for name, value in bound.arguments.items():
                if name not in texts or isinstance(value, str) or (value is None and texts[name]):
                    continue
                # As in process: a pathlib.Path is taken as its text, and bytes as the UTF-8 they hold.
                if isinstance(value, os.PathLike):
                    value = os.fspath(value)
                if isinstance(value, (bytes, bytearray)):
                    try:
                        value = bytes(value).decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise InvalidArgumentError(
                            f"{where}: argument {name!r} is not UTF-8: byte {value[e.start]:#04x} at index {e.start}"
                        ) from None
                if not isinstance(value, str):
                    wanted = "str or None" if texts[name] else "str"
                    raise TypeError(f"{where}: argument {name!r} must be {wanted}, not {type(value).__name__}")
                bound.arguments[name] = value
            args, kwargs = bound.args[1:], bound.kwargs
        # Only str: bytes the client takes are content (a chat export), which the server reads and names.
        problem = _not_utf8(args, kwargs, check_bytes=False)
        if problem is not None:
            raise InvalidArgumentError(f"{where}: {problem}")
        return func(self, *args, **kwargs)
    return checked


def guard_client(cls: Any) -> None:
    """Wraps the public methods of the HTTP client so that an argument no UTF-8 holds is named as the engine in
    process names it (``Client.write: argument 2 is not valid Unicode: ...``), before anything is sent; text
    inside a dict (a message, metadata) is named where the body is encoded."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or not callable(member) or isinstance(member, (staticmethod, classmethod, type)):
            continue
        setattr(cls, name, _prechecked(member, f"Client.{name}"))
