"""strata.ContextLog: kimi-cli's context.jsonl from Python — the shared conformance cases run through the
Python API, byte compatibility with the CLI both ways, crash artefacts, and the one-writer rule."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest

import strata
from conftest import strata_bin

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(os.environ.get("STRATA_CONFORMANCE_DIR", ROOT.parent / "shared" / "conformance"))


def context_cases():
    dirs = [CONFORMANCE / "kosong", ROOT / "tests" / "conformance" / "cases"]
    assert dirs[0].is_dir(), f"conformance cases not found at {dirs[0]}"
    cases = []
    for d in dirs:
        for f in sorted(d.glob("*.json")):
            case = json.loads(f.read_text())
            if case.get("area") == "context_file":
                cases.append(pytest.param(case, id=case["id"]))
    assert cases
    return cases


def json_lines(text: str) -> list:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


@pytest.mark.parametrize("case", context_cases())
def test_conformance_case(case, tmp_path):
    given = case["input"]
    initial = {name: data.encode("utf-8") for name, data in given.get("initial_files", {}).items()}
    initial.update({name: base64.b64decode(data) for name, data in given.get("initial_files_base64", {}).items()})
    for name, data in initial.items():
        (tmp_path / name).write_bytes(data)
    # kimi-cli's own figures: characters / 4 for what follows the last usage mark.
    log = strata.ContextLog(str(tmp_path / given.get("backend", "context.jsonl")), restore=False, estimator="chars")
    results = []
    for op in given["ops"]:
        name = op["op"]
        result = {}
        try:
            if name == "restore":
                result["return"] = log.restore()
            elif name == "append":
                log.append(op["messages"])
            elif name == "checkpoint":
                log.checkpoint(op.get("add_user_message", False))
            elif name == "revert_to":
                log.revert_to(op["id"])
            elif name == "clear":
                log.clear()
            elif name == "update_token_count":
                log.update_token_count(op["n"])
            elif name == "write_system_prompt":
                log.write_system_prompt(op["prompt"])
            else:
                pytest.fail(f"unknown op {name}")
            result["ok"] = True
        except strata.StrataError:
            result["ok"] = False
        results.append(result)
    log.close()
    expected = case["expected"]
    for i, (got, want) in enumerate(zip(results, expected.get("results", results), strict=True)):
        assert got["ok"] == want["ok"], f"op {i}"
        if "return" in want:
            assert got["return"] == want["return"], f"op {i}"
    if "state" in expected:
        state = {"history": log.history.to_list(), "token_count": log.token_count,
                 "token_count_with_pending": log.token_count_with_pending, "n_checkpoints": log.n_checkpoints,
                 "system_prompt": log.system_prompt}
        assert state == expected["state"]
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    if "files" in expected:
        assert set(after) == set(expected["files"])
        for name, data in expected["files"].items():
            if expected.get("file_compare") == "bytes":
                assert after[name] == data.encode("utf-8"), name
            else:
                assert json_lines(after[name].decode("utf-8")) == json_lines(data), name
    for name in expected.get("files_unchanged", []):
        assert after[name] == initial[name]


def cli(*args: str) -> str:
    return subprocess.run([strata_bin(), *args], check=True, capture_output=True, text=True).stdout


def test_a_log_written_from_python_restores_in_the_cli(tmp_path):
    path = tmp_path / "context.jsonl"
    with strata.ContextLog(str(path)) as log:
        log.write_system_prompt("You are 助手.")
        assert log.checkpoint() == 0
        log.append([{"role": "user", "content": [{"type": "text", "text": "Héllo"}]},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"type": "function", "id": "c1", "function": {"name": "find", "arguments": "{\"q\": 1}"}}]},
                    {"role": "tool", "content": "found", "tool_call_id": "c1"}])
        log.update_usage(321)
        assert log.checkpoint(user_message=True) == 1
    shown = json.loads(cli("context", "show", str(path)))
    assert shown["system_prompt"] == "You are 助手."
    assert shown["n_checkpoints"] == 2 and shown["token_count"] == 321
    assert shown["history"][0] == {"role": "user", "content": "Héllo"}
    assert shown["history"][1]["tool_calls"][0]["function"]["arguments"] == "{\"q\": 1}"
    assert shown["history"][3] == {"role": "user", "content": "<system>CHECKPOINT 1</system>"}
    # The CLI's exact figure agrees with Python's default estimator (o200k_base).
    assert shown["token_count_with_pending"] == strata.ContextLog(str(path), durability="none").token_count_with_pending


def test_a_log_written_by_the_cli_restores_in_python(tmp_path):
    path = str(tmp_path / "context.jsonl")
    cli("context", "system-prompt", path, "Be brief.")
    cli("context", "checkpoint", path)
    cli("context", "append", path, json.dumps([{"role": "user", "content": "one"},
                                               {"role": "assistant", "content": "two"}]))
    cli("context", "usage", path, "50")
    cli("context", "append", path, json.dumps({"role": "user", "content": "three"}))
    log = strata.ContextLog(path)
    assert log.system_prompt == "Be brief."
    assert log.history.to_list() == [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
                                     {"role": "user", "content": "three"}]
    assert log.token_count == 50 and log.token_count_with_pending > 50 and log.n_checkpoints == 1
    assert len(log.history) == 3 and log.history[-1]["content"] == "three" and log.history[0:2][1]["content"] == "two"
    assert [m["content"] for m in log.history] == ["one", "two", "three"]
    with pytest.raises(IndexError):
        log.history[3]
    log.revert_to(0)
    assert len(log.history) == 0 and Path(str(tmp_path / "context_1.jsonl")).exists()
    log.append({"role": "user", "content": "again"})
    log.close()
    assert json.loads(cli("context", "show", path))["history"] == [{"role": "user", "content": "again"}]


def test_a_torn_tail_is_cut_off_and_kept(tmp_path):
    path = tmp_path / "context.jsonl"
    path.write_bytes(b'{"role":"user","content":"whole"}\n{"role":"assistant","content":"cut mid-wr')
    log = strata.ContextLog(str(path))
    assert log.history.to_list() == [{"role": "user", "content": "whole"}]
    assert log.restore_report["torn_tail"] is True
    log.append({"role": "assistant", "content": "next"})
    log.close()
    assert json_lines(path.read_text()) == [{"role": "user", "content": "whole"}, {"role": "assistant", "content": "next"}]
    assert any(p.name.startswith("context.jsonl.torn") for p in tmp_path.iterdir())


def test_one_writer_per_file_and_bad_messages_name_the_field(tmp_path):
    path = str(tmp_path / "context.jsonl")
    first = strata.ContextLog(path)
    first.append({"role": "user", "content": "mine"})
    second = strata.ContextLog(path, restore=False)
    with pytest.raises(strata.UnavailableError):
        second.restore()
    with pytest.raises(strata.InvalidArgumentError, match=r"message\[1\]"):
        first.append([{"role": "user", "content": "ok"}, {"role": "user", "content": [{"type": "text"}]}])
    with pytest.raises(strata.InvalidArgumentError, match="not an int"):
        first.append(42)
    with pytest.raises(strata.InvalidArgumentError):
        first.update_usage(-1)
    with pytest.raises(strata.NotFoundError):
        first.revert_to(7)
    assert first.history.to_list() == [{"role": "user", "content": "mine"}], "a refused batch wrote nothing"


def test_history_dicts_are_what_the_file_holds_for_every_part_type(tmp_path):
    # The history's dicts are built field by field; they must equal the JSON the log writes.
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "name": "alice", "content": [{"type": "text", "text": "look"},
                                                      {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]},
        {"role": "assistant", "content": [{"type": "think", "think": "hmm", "encrypted": "sig"},
                                          {"type": "text", "text": "Calling."}],
         "tool_calls": [{"type": "function", "id": "c1", "function": {"name": "f", "arguments": "{}"}},
                        {"type": "function", "id": "c2", "function": {"name": "g", "arguments": None},
                         "extras": {"thought_signature": "abc"}}]},
        {"role": "tool", "content": [], "tool_call_id": "c1"},
        {"role": "assistant", "content": "Par", "partial": True},
        {"role": "user", "content": "é 世界 \\u0000 \\n"},
    ]
    path = tmp_path / "context.jsonl"
    with strata.ContextLog(str(path)) as log:
        log.append(messages)
        written = [json.loads(line) for line in path.read_text().splitlines()]
        assert log.history.to_list() == written
        assert [log.history[i] for i in range(len(messages))] == written


def test_count_tokens_without_the_vocabulary_warns(tmp_path):
    """Where the vocabulary is not installed, count_tokens counts characters / 4 and says so with a
    RuntimeWarning, in the words the server's "warning" carries (it returned the estimate silently, taken for
    an exact count). A fresh interpreter whose vocabulary search finds nothing."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("STRATA_VOCAB_DIR", "STRATA_NPM_CACHE", "STRATA_VOCAB_CACHE")}
    env["HOME"] = str(tmp_path)
    code = ("import warnings, strata\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    warnings.simplefilter('always')\n"
            "    n = strata.count_tokens('hello world!')\n"
            "print(n, '|', '; '.join(f'{w.category.__name__}: {w.message}' for w in seen))\n")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    count, said = run.stdout.strip().split(" | ")
    assert count == "3"
    assert said.startswith("RuntimeWarning: the o200k_base vocabulary is not installed here"), said
