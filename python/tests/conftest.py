"""Shared by the Python tests: engines over temporary data, scripted models, and a live `strata serve`.

Run by ctest (python_module): PYTHONPATH=<build>/python STRATA_BIN=<build>/bin/strata pytest python/tests
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

import strata

# What phase 2 asks a scripted model for, in order: the archive's summary, then the memories in it.
SEAT_MEMORY = {"memories": [{"category": "preferences", "key": "seat", "abstract": "Prefers aisle seats",
                             "content": "Alice prefers aisle seats on long flights."}]}


def script(path: Path, *replies: str) -> str:
    """Writes a scripted model's replies (texts, in order) and returns the file's path."""
    path.write_text(json.dumps({"replies": [{"text": r} for r in replies]}))
    return str(path)


KYOTO_SUMMARY = "Kyoto week: days 1-2 planned (temples)."


def plan_kyoto(add_messages, session_id: str) -> None:
    """Nine messages planning a week in Kyoto (enough for a compaction to fold the older turns), added
    through `add_messages` (an Engine's or a Client's)."""
    add_messages(session_id, {"role": "user", "content": "Plan a week in Kyoto."})
    for day in range(1, 5):
        add_messages(session_id, [{"role": "assistant", "content": f"Day {day}: temples."},
                                  {"role": "user", "content": f"And day {day + 1}?"}])


@pytest.fixture
def engine(tmp_path):
    e = strata.Engine.open(str(tmp_path / "data"), provider="scripted",
                           script=script(tmp_path / "script.json", "Alice talked about seats.", json.dumps(SEAT_MEMORY)))
    yield e
    e.close()


def strata_bin() -> str:
    path = os.environ.get("STRATA_BIN")
    if not path:
        pytest.fail("STRATA_BIN must name the strata program (ctest sets it)")
    return path


class Server:
    """`strata serve` on a free loopback port over `data`, with a root key."""

    def __init__(self, data: Path, *extra: str) -> None:
        self.root_key = "root-" + secrets.token_hex(8)
        env = dict(os.environ, STRATA_ROOT_KEY=self.root_key)
        self.process = subprocess.Popen([strata_bin(), "serve", "--data", str(data), "--listen", "127.0.0.1:0", *extra],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            err += line
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                return
        self.process.kill()
        raise RuntimeError(f"strata serve did not start: {err}")

    def key(self, user: str | None = None, role: str = "user") -> str:
        admin = strata.Client(self.url, self.root_key)
        body = {"user": user or "admin", "role": role}
        return admin._call("POST", "/api/v1/admin/keys", body=body)["key"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "served", "--provider", "scripted", "--script",
               script(tmp_path / "served-script.json", "Alice talked about seats.", json.dumps(SEAT_MEMORY)))
    yield s
    s.stop()
