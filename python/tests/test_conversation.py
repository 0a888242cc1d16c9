"""strata.Conversation: the agent turn loop from Python, with Python callables as tools and a scripted model."""

from __future__ import annotations

import json
from typing import Literal, Optional

import pytest

import strata


def scripted(tmp_path, replies) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": replies}))
    return str(path)


def call(name: str, arguments: dict, id: str = "c1") -> dict:
    return {"parts": [{"type": "function", "id": id, "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def test_a_turn_calls_a_python_tool_and_logs_everything(tmp_path):
    seen = []

    def weather(city: str, unit: Literal["C", "F"] = "C") -> dict:
        """The current weather in a city.

        Longer text that is not part of the description."""
        seen.append((city, unit))
        return {"city": city, "sky": "sunny", "unit": unit}

    def broken(reason: Optional[str] = None) -> str:
        "Always fails."
        raise RuntimeError("the weather service is down")

    script = scripted(tmp_path, [call("weather", {"city": "Paris"}), call("broken", {}, "c2"),
                                 {"text": "Sunny in Paris."}])
    chat = strata.Conversation(str(tmp_path / "chat.jsonl"), provider="scripted", script=script,
                               tools=[weather, broken], system_prompt="You help.")
    streamed = []
    result = chat.send("Weather in Paris?", on_text=streamed.append)
    assert result.text == "Sunny in Paris." and "".join(streamed) == "Sunny in Paris."
    assert result.steps == 3 and not result.stopped_at_max_steps
    assert result.stop_reason == "" and result.warnings == []
    assert seen == [("Paris", "C")]
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert json.loads(tool_messages[0]["content"]) == {"city": "Paris", "sky": "sunny", "unit": "C"}
    assert "RuntimeError: the weather service is down" in json.dumps(tool_messages[1])
    # The log holds the turn, restorable by ContextLog and kimi-cli alike.
    chat.close()
    log = strata.ContextLog(str(tmp_path / "chat.jsonl"))
    assert log.system_prompt == "You help."
    assert log.history[0] == {"role": "user", "content": "Weather in Paris?"}
    assert log.history[-1]["content"] == "Sunny in Paris."


def test_tools_are_described_from_their_signatures():
    def search(query: str, limit: int = 5, tags: Optional[list[str]] = None) -> str:
        "Search the notes."
        return ""

    from strata.tool import describe
    t = describe(search)
    assert t.name == "search" and t.description == "Search the notes."
    assert t.parameters == {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}
    custom = strata.tool(name="lookup", description="Look it up.", parameters={"type": "object", "properties": {}})(search)
    assert (custom.name, custom.description) == ("lookup", "Look it up.")
    with pytest.raises(TypeError):
        describe(42)


def test_undo_and_bad_settings(tmp_path):
    chat = strata.Conversation(str(tmp_path / "c.jsonl"), provider="scripted",
                               script=scripted(tmp_path, [{"text": "one"}, {"text": "two"}]))
    chat.send("first")
    chat.send("second")
    assert chat.undo() == 1
    assert [m["content"] for m in chat.history] == ["first", "one"]
    with pytest.raises(strata.InvalidArgumentError, match="unknown option"):
        strata.Conversation(str(tmp_path / "d.jsonl"), provider="scripted", nonsense=1)
    with pytest.raises(strata.StrataError):
        strata.Conversation(str(tmp_path / "e.jsonl"), provider="no-such-provider")
    # The numbers are read as the CLI reads its flags: -1 steps ran none, a negative reserve turned the
    # headroom check off, a NaN ratio reached a cast, and 2.0 or 2**40 were pybind's TypeError.
    for option, value, says in [("max_steps", -1, '"max_steps" must be from 1 to 2147483647, not -1'),
                                ("max_steps", 2**40, '"max_steps" must be from 1'),
                                ("max_context", -5, '"max_context" must be 0 or more, not -5'),
                                ("reserve_for_reply", -1, '"reserve_for_reply" must be 0 or more'),
                                ("compact_ratio", float("nan"), '"compact_ratio" must be a number from 0.1 to 1, not nan'),
                                ("compact_ratio", 5, '"compact_ratio" must be a number from 0.1 to 1, not 5'),
                                ("compact_ratio", True, '"compact_ratio" must be a number from 0.1 to 1, not bool')]:
        with pytest.raises(strata.InvalidArgumentError, match=says):
            strata.Conversation(str(tmp_path / "f.jsonl"), provider="scripted", **{option: value})
    taken = strata.Conversation(str(tmp_path / "g.jsonl"), provider="scripted", max_steps=2.0, max_context=1000,
                                compact_ratio=1, script=scripted(tmp_path, [{"text": "one"}]))
    taken.close()


def test_a_tool_whose_text_is_not_unicode(tmp_path):
    # A tool named or described with a lone surrogate was pybind's bare "Unable to cast"; a result holding
    # one threw past the tool's own error handling. The name is refused, naming it; the result reaches the
    # model with "?" in its place (Python's "replace").
    def bad(): return ""
    bad.__name__ = "bad\ud800"
    with pytest.raises(strata.InvalidArgumentError, match="a tool's name is not valid Unicode"):
        strata.Conversation(str(tmp_path / "t.jsonl"), provider="scripted", tools=[bad])

    def echo(text: str) -> str:
        "Echo."
        return "got \ud800 " + text
    chat = strata.Conversation(str(tmp_path / "u.jsonl"), provider="scripted", tools=[echo],
                               script=scripted(tmp_path, [call("echo", {"text": "hi"}), {"text": "done"}]))
    result = chat.send("go")
    assert result.text == "done"
    outputs = [m for m in chat.history if m["role"] == "tool"]
    assert outputs and outputs[0]["content"] == "got ? hi", outputs
    chat.close()


def test_a_reply_cut_short_says_why(tmp_path):
    # A reply cut at the token limit passed for a whole one: its stop reason and the warning strata chat
    # prints reach Python too.
    script = scripted(tmp_path, [{"text": "It was the best of", "stop_reason": "length"}])
    chat = strata.Conversation(str(tmp_path / "cut.jsonl"), provider="scripted", script=script)
    result = chat.send("Tell me the opening line.")
    assert result.text == "It was the best of"
    assert result.stop_reason == "length"
    assert result.warnings == ["the reply was cut at the output token limit (stop reason: length)"]
    chat.close()
