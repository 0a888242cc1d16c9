"""strata.Client against a live `strata serve`: the Engine's flows over HTTP, the same records and the same
exception classes, keys and isolation, task events — and the same answers as an Engine in process."""

from __future__ import annotations

import copy
import os
import json
import pickle
import re
import subprocess

import pytest

import strata


def test_store_find_and_errors_over_http(server):
    alice = strata.Client(server.url, server.key("alice"))
    # The result, as every other call and the TypeScript client give it (it was the whole envelope).
    assert alice.health() == {"alive": True}
    assert alice.ready() == {"ready": True}
    node = alice.write("strata://user/alice/notes/build", "Run scripts/test before pushing.", abstract="How to test")
    assert isinstance(node, strata.Node) and node.abstract == "How to test"
    alice.write("strata://resources/notes/lunch", "Lunch is at noon in the big room.")
    assert alice.read("strata://user/alice/notes/build") == "Run scripts/test before pushing."
    assert alice.read("strata://user/alice/notes/build", level=0) == "How to test"
    assert isinstance(alice.stat("strata://user/alice/notes/build"), strata.NodeDetail)
    assert [n.uri for n in alice.ls("strata://user/alice/notes")] == ["strata://user/alice/notes/build"]
    # Without a URI, what the key may list: a user key's own scope (the root is refused to it).
    assert "strata://user/alice/notes" in [n.uri for n in alice.ls()]
    assert "strata://user/alice/notes/build" in [n.uri for n in alice.tree()]
    assert [m.uri for m in alice.grep("scripts/test")] == ["strata://user/alice/notes/build"]
    assert {n.uri for n in alice.glob("**/build")} == {"strata://user/alice/notes/build"}
    found = alice.find("how do I test before pushing")
    assert isinstance(found, strata.FindResult) and found[0].uri == "strata://user/alice/notes/build"
    assert found[0].tokens > 0 and found[0].reason and found.tokens == sum(h.tokens for h in found)
    # Without `under`, a user's find covers what it may read: its own scope and the shared resources.
    assert "strata://resources/notes/lunch" in [h.uri for h in alice.find("when is lunch")]
    alice.mv("strata://user/alice/notes/build", "strata://user/alice/notes/testing")
    assert alice.rm("strata://user/alice/notes", recursive=True) == 2

    with pytest.raises(strata.NotFoundError) as e:
        alice.read("strata://user/alice/notes/testing")
    assert e.value.status == 404 and e.value.code == "not_found" and e.value.request_id
    bob = strata.Client(server.url, server.key("bob"))
    with pytest.raises(strata.PermissionDeniedError) as e:
        bob.read("strata://resources/notes/lunch".replace("resources/notes/lunch", "user/alice/x"))
    assert e.value.status == 403
    with pytest.raises(strata.InvalidArgumentError, match="limit"):
        alice.find("x", limit=0)
    with pytest.raises(strata.UnauthenticatedError):
        strata.Client(server.url, "not-a-key").ls()
    with pytest.raises(strata.UnavailableError):
        strata.Client("http://127.0.0.1:9", timeout=2).ls()


def test_sessions_commit_and_task_events_over_http(server, tmp_path):
    alice = strata.Client(server.url, server.key("alice"))
    s = alice.create_session(session_id="trip")
    assert isinstance(s, strata.Session) and s.user == "alice"
    alice.add_messages("trip", [{"role": "user", "content": "I always take the aisle seat on long flights."},
                                {"role": "assistant", "content": "Noted."}])
    assert [m["role"] for m in alice.messages("trip")] == ["user", "assistant"]
    # A usage mark, as Engine.record_usage writes it (the client had no record_usage).
    alice.record_usage("trip", 93)
    assert alice.session_log("trip").usage_tokens == 93
    with pytest.raises(strata.InvalidArgumentError):
        alice.record_usage("trip", -1)
    assert alice.context("trip", max_context_tokens=4000).sent[0]["content"].startswith("I always")
    ticket = alice.commit("trip")
    assert isinstance(ticket, strata.CommitOutcome) and ticket.archive == 1 and ticket.task_id > 0
    states = [t.state for t in alice.task_events(ticket.task_id, timeout=60)]
    assert states[-1] == "done", states
    assert alice.task(ticket.task_id).finished
    status = alice.session_status("trip")
    assert isinstance(status, strata.SessionStatus) and status.archives[0].state == "done"
    hits = alice.find("which seat", under="strata://user/alice")
    assert hits[0].uri == "strata://user/alice/memories/preferences/seat"
    assert alice.history(hits[0].uri)[0].action == "create"
    # Another user sees neither the session nor its tasks.
    bob = strata.Client(server.url, server.key("bob"))
    with pytest.raises(strata.NotFoundError):
        bob.session_status("trip")
    with pytest.raises(strata.NotFoundError):
        bob.task(ticket.task_id)
    # Retry of one session, or (the root key's) of everything, as Engine.retry() in process.
    assert alice.retry("trip") == 0
    with pytest.raises(strata.PermissionDeniedError, match="root key"):
        alice.retry()
    assert strata.Client(server.url, server.root_key).retry() == 0
    # The task listing is the Engine's (it was the HTTP route's alone): the same answer in process.
    local = strata.Engine.open(str(tmp_path / "served"), read_only=True)
    over_http = [(t.id, t.state) for t in alice.tasks(session="trip")]
    assert over_http == [(t.id, t.state) for t in local.tasks(session="trip", user="alice")] == [(ticket.task_id, "done")]
    assert [t.id for t in alice.tasks(state="done")] == [t.id for t in local.tasks(state="done", user="alice")]
    assert bob.tasks() == local.tasks(user="bob") == []
    with pytest.raises(strata.NotFoundError):
        local.tasks(session="trip", user="bob")
    with pytest.raises(strata.NotFoundError):
        local.task(ticket.task_id, user="bob")
    assert local.task(ticket.task_id).id == ticket.task_id
    with pytest.raises(strata.InvalidArgumentError, match="between 1 and 10000"):
        local.tasks(limit=0)
    local.close()
    assert alice.count_tokens("hello world") == strata.count_tokens("hello world") == 2


def test_commit_wait_follows_the_task_to_its_end(server, tmp_path):
    alice = strata.Client(server.url, server.key("alice"))
    alice.create_session(session_id="s")
    alice.add_messages("s", {"role": "user", "content": "I always take the aisle seat."})
    outcome = alice.commit("s", wait=True, timeout=60)
    assert outcome.state == "done" and outcome.session == "s" and outcome.messages == 1
    # What phase 2 changed, as Engine.commit(wait=True) reports it in process.
    assert isinstance(outcome.diff, strata.CommitDiff)
    assert (outcome.diff.session, outcome.diff.archive, outcome.diff.candidates) == ("s", 1, 1)
    assert outcome.diff.summary == "Alice talked about seats."
    assert [(c.action, c.uri) for c in outcome.diff.changes] == [("create", "strata://user/alice/memories/preferences/seat")]
    local = strata.Engine.open(str(tmp_path / "served"), read_only=True)
    assert local.archive_diff("s", 1) == outcome.diff == alice.archive_diff("s", 1)
    local.close()
    with pytest.raises(strata.NotFoundError):
        alice.archive_diff("s", 2)
    with pytest.raises(strata.NotFoundError):
        strata.Client(server.url, server.key("bob")).archive_diff("s", 1)


def test_the_same_question_gets_the_same_answer_in_process_and_over_http(server, tmp_path):
    admin = strata.Client(server.url, server.key("ops", role="admin"))
    for i, text in enumerate(["Deploys go out on Tuesdays after the review.", "The staging database is rebuilt nightly.",
                              "Alerts page the on-call engineer within five minutes.",
                              "Deploy freezes start two days before a release."]):
        admin.write(f"strata://resources/ops/note{i}", text)
    # The server's own data, read in process (read-only beside the running server).
    local = strata.Engine.open(str(tmp_path / "served"), read_only=True)
    for query, budget in [("when do deploys happen", None), ("database", 12), ("who gets paged", None)]:
        over_http = admin.find(query, token_budget=budget)
        in_process = local.find(query, token_budget=budget)
        assert [(h.uri, h.tokens) for h in over_http] == [(h.uri, h.tokens) for h in in_process], query
        assert [round(h.score, 6) for h in over_http] == [round(h.score, 6) for h in in_process], query
    assert admin.stat("strata://resources/ops/note0") == local.stat("strata://resources/ops/note0")
    local.close()


def test_a_skill_is_added_and_refused_alike_in_process_and_over_http(server, tmp_path, engine):
    """SKILL.md's text is text on both: a line without front matter was a missing file in process
    (NotFoundError) and a missing front matter over HTTP; a path still works in process."""
    admin = strata.Client(server.url, server.key("ops", role="admin"))
    for text in ("no front matter", ""):
        with pytest.raises(strata.InvalidArgumentError) as local:
            engine.add_skill("bot", text)
        with pytest.raises(strata.InvalidArgumentError) as remote:
            admin.add_skill("bot", text)
        assert local.value.message == remote.value.message, text
    skill = "---\nname: brew\ndescription: Brews coffee.\n---\n\nGrind, then pour.\n"
    assert engine.add_skill("bot", skill) == admin.add_skill("bot", skill)
    (tmp_path / "tea").mkdir()
    (tmp_path / "tea" / "SKILL.md").write_text(skill.replace("brew", "steep").replace("coffee", "tea"))
    assert engine.add_skill("bot", str(tmp_path / "tea" / "SKILL.md")).endswith("/steep")


def _refused_alike(admin, local, cases):
    """Each (call, words): InvalidArgumentError with exactly `words` from the Client and from the Engine."""
    for call, words in cases:
        messages = []
        for api in (admin, local):
            with pytest.raises(strata.InvalidArgumentError) as error:
                call(api)
            messages.append(error.value.message)
        assert messages == [words, words], messages


def test_an_empty_uri_a_bad_level_and_an_empty_text_are_refused_alike_in_process_and_over_http(server, tmp_path):
    """In process an empty URI was "must start with strata://" where HTTP says "must not be empty"."""
    admin = strata.Client(server.url, server.key("ops", role="admin"))
    admin.write("strata://resources/ops/tea", "Green tea.")
    local = strata.Engine.open(str(tmp_path / "served"))
    _refused_alike(admin, local, [(lambda api: api.read(""), '"uri" must not be empty'),
                        (lambda api: api.stat(""), '"uri" must not be empty'),
                        (lambda api: api.write("", "x"), '"uri" must not be empty'),
                        (lambda api: api.mv("strata://resources/ops/tea", ""), '"to" must not be empty'),
                        (lambda api: api.read("strata://resources/ops/tea", level=3),
                         '"level" must be 0 (abstract), 1 (overview) or 2 (content), not 3'),
                        (lambda api: api.history(""), '"uri" must not be empty'),
                        (lambda api: api.consolidate(""), '"under" must not be empty'),
                        (lambda api: api.remember(" ", "strata://user/alice"), "remember: the text is empty"),
                        (lambda api: api.list_sessions(user=""), 'user: id "" is empty'),
                        (lambda api: api.list_sessions(user="alice/memories"),
                         'user: id "alice/memories" may contain only letters, digits, \'_\', \'-\' and \'.\''),
                        (lambda api: api.list_sessions(user="u" * 70 + "/"),
                         'user: id "' + "u" * 60 + '..." (71 bytes) may contain only letters, digits, \'_\', \'-\' and \'.\''),
                        (lambda api: api.list_sessions(user="é" * 70),
                         'user: id "' + "é" * 30 + '..." (140 bytes) is longer than 128 characters'),
                        (lambda api: api.list_skills("helper/memories"),
                         'agent: id "helper/memories" may contain only letters, digits, \'_\', \'-\' and \'.\'')])
    assert local.read("strata://resources/ops/tea") == "Green tea."
    local.close()


def test_flags_and_integers_are_read_alike_in_process_and_over_http(server, tmp_path):
    """A flag is True or False (None: its default) and an integer an integer, on both sides and in the same
    words: the Client sent recursive="" as a bare query flag, which the server read as true (a subtree
    removed), and the Engine took overwrite=0 and ordered=1 where HTTP refuses them."""
    admin = strata.Client(server.url, server.key("ops", role="admin"))
    local = strata.Engine.open(str(tmp_path / "served"))
    admin.write("strata://resources/keep/a", "A.")
    admin.create_session(user="alice", session_id="s-flags")
    _refused_alike(admin, local, [(lambda api: api.rm("strata://resources/keep", recursive=""), '"recursive" must be True or False, not str'),
                        (lambda api: api.rm("strata://resources/keep", recursive=1), '"recursive" must be True or False, not int'),
                        (lambda api: api.ls("strata://resources", recursive="yes"), '"recursive" must be True or False, not str'),
                        (lambda api: api.grep("A", ignore_case=""), '"ignore_case" must be True or False, not str'),
                        (lambda api: api.write("strata://resources/keep/a", "B.", overwrite=0), '"overwrite" must be True or False, not int'),
                        (lambda api: api.mkdir("strata://resources/seq", ordered=1), '"ordered" must be True or False, not int'),
                        (lambda api: api.delete_session("s-flags", force=""), '"force" must be True or False, not str'),
                        (lambda api: api.commit("s-flags", wait="yes"), '"wait" must be True or False, not str'),
                        (lambda api: api.find("A", rewrite="no"), '"rewrite" must be True or False, not str'),
                        (lambda api: api.read("strata://resources/keep/a", level="1"), '"level" must be an integer, not str'),
                        (lambda api: api.ls("strata://resources", limit="2"), '"limit" must be an integer, not str'),
                        (lambda api: api.read("strata://resources/keep/a", level=1.5), '"level" must be an integer, not float')])
    assert admin.read("strata://resources/keep/a") == "A."
    assert admin.get_session("s-flags").id == "s-flags"
    # A message may be its JSON text on both sides (the Client sent a str as a list of its characters);
    # variables are a dict; a value JSON cannot hold is the argument's error, not a TypeError.
    for api in (admin, local):
        api.add_messages("s-flags", '{"role": "user", "content": "hello"}')
    assert [m["content"] for m in admin.messages("s-flags")] == ["hello", "hello"]
    _refused_alike(admin, local, [(lambda api: api.render_prompt("session/summary", [1]), "variables must be a dict")])
    for api in (admin, local):
        for metadata in ({"a": float("nan")}, {"a": object()}):
            with pytest.raises(strata.InvalidArgumentError):
                api.write("strata://resources/keep/b", "x", metadata=metadata)
    # The largest limit lists everything on both sides (one more than it overflowed SQL's integers).
    assert len(local.ls("strata://resources", limit=2**63 - 1)) == len(admin.ls("strata://resources", limit=2**63 - 1)) > 0
    # None is the default on both sides (overwrite: True), and a whole float an integer.
    admin.write("strata://resources/keep/a", "B.", overwrite=None)
    local.write("strata://resources/keep/a", "C.", overwrite=None)
    assert admin.read("strata://resources/keep/a", level=2.0) == local.read("strata://resources/keep/a", level=2.0) == "C."
    local.close()


def test_find_takes_and_refuses_the_same_arguments_in_process_and_over_http(server, tmp_path):
    admin = strata.Client(server.url, server.key("ops", role="admin"))
    admin.write("strata://resources/ops/tea", "Green tea is brewed at 80 degrees.")
    admin.write("strata://user/alice/memories/preferences/tea", "Alice drinks green tea.")
    local = strata.Engine.open(str(tmp_path / "served"), read_only=True)
    # The defaults are the engine's on both sides (the client leaves them to the server).
    for kwargs in [{}, {"limit": 1000}, {"token_budget": 0}, {"type": "memory"}, {"type": "resource"}]:
        over_http = admin.find("green tea", **kwargs)
        in_process = local.find("green tea", **kwargs)
        assert [h.uri for h in over_http] == [h.uri for h in in_process], kwargs
        assert over_http, kwargs
        if "type" in kwargs:
            kind = "/memories/" if kwargs["type"] == "memory" else "strata://resources/"
            assert all(kind in h.uri for h in over_http), kwargs
    # The same refusals, the same class, the same words.
    for kwargs, names in [({"limit": 0}, '"limit" must be between 1 and 1000, not 0'),
                          ({"limit": 1001}, '"limit" must be between 1 and 1000, not 1001'),
                          ({"type": "memories"}, 'unknown context type "memories"'),
                          ({"max_queries": 9}, '"max_queries" must be between 1 and 8, not 9'),
                          ({"max_queries": -1}, '"max_queries" must be between 1 and 8, not -1'),
                          ({"rerank_candidates": 1}, '"rerank_candidates" must be between 2 and 100, not 1')]:
        with pytest.raises(strata.InvalidArgumentError) as http_error:
            admin.find("green tea", **kwargs)
        with pytest.raises(strata.InvalidArgumentError) as local_error:
            local.find("green tea", **kwargs)
        assert names in str(http_error.value) and names in str(local_error.value), (kwargs, http_error.value,
                                                                                     local_error.value)
    # A negative limit of a listing is the same InvalidArgumentError, not a TypeError in process.
    for call, names in [(lambda api: api.ls("strata://resources", limit=-1), '"limit" must be 0 (no limit) or more, not -1'),
                        (lambda api: api.tree("strata://resources", limit=-1), '"limit" must be 0 (no limit) or more, not -1'),
                        (lambda api: api.changes(limit=-1), '"limit" must be between 1 and 1000')]:
        for api in (admin, local):
            with pytest.raises(strata.InvalidArgumentError) as error:
                call(api)
            assert names in str(error.value), (api, error.value)
    # An integer is read as the server reads JSON: 2.0 is 2, a bool or a number past 64 bits is refused naming
    # the argument, on both sides (in process True was 1, 2.0 a TypeError and 2**70 a RuntimeError).
    assert [h.uri for h in local.find("green tea", limit=2.0)] == [h.uri for h in admin.find("green tea", limit=2.0)]
    for kwargs in [{"limit": True}, {"limit": 2**70}, {"limit": 2.5}, {"limit": "3"}]:
        for api in (admin, local):
            with pytest.raises(strata.InvalidArgumentError) as error:
                api.find("green tea", **kwargs)
            assert '"limit" must be an integer' in str(error.value), (api, kwargs, error.value)
    with pytest.raises(strata.InvalidArgumentError, match='"level" must be an integer'):
        local.read("strata://resources/ops/tea", level=True)
    local.close()


CHATGPT_EXPORT = json.dumps([{
    "id": "c1", "title": "Pasta", "create_time": 1768425500.5, "update_time": 1768425600.0, "current_node": "a",
    "mapping": {
        "r": {"id": "r", "message": None, "parent": None, "children": ["u"]},
        "u": {"id": "u", "parent": "r", "children": ["a"], "message": {
            "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["Boil time for penne?"]},
            "recipient": "all"}},
        "a": {"id": "a", "parent": "u", "children": [], "message": {
            "author": {"role": "assistant"}, "content": {"content_type": "text", "parts": ["About 11 minutes."]},
            "recipient": "all"}}}}])


def test_a_chat_export_is_imported_once_in_process_and_over_http(server, tmp_path):
    alice = strata.Client(server.url, server.key("alice"))
    first = alice.import_sessions("chatgpt", CHATGPT_EXPORT)
    assert isinstance(first, strata.ChatImportReport)
    assert [(i.title, i.messages) for i in first.imported] == [("Pasta", 2)]
    session = alice.get_session(first.imported[0].session, messages=True)
    assert (session.user, session.title, session.created_ms) == ("alice", "Pasta", 1768425500500)
    assert alice.import_sessions("chatgpt", CHATGPT_EXPORT).unchanged == [first.imported[0].session]
    with pytest.raises(strata.InvalidArgumentError) as e:
        alice.import_sessions("bard", CHATGPT_EXPORT)
    assert "openai-jsonl" in e.value.message
    # In process: the same import for the same owner names the same session.
    local = strata.Engine.open(str(tmp_path / "local"))
    report = local.import_sessions("chatgpt", CHATGPT_EXPORT, "alice", commit=True)
    assert report.imported[0].session == first.imported[0].session
    assert report.imported[0].archive == 1
    assert local.import_sessions("chatgpt", CHATGPT_EXPORT, "alice").unchanged == [report.imported[0].session]
    # Bytes are taken on both (the client raised a bare TypeError); bytes that are not UTF-8 are refused.
    encoded = CHATGPT_EXPORT.encode("utf-8")
    assert alice.import_sessions("chatgpt", encoded).unchanged == [first.imported[0].session]
    assert local.import_sessions("chatgpt", encoded, "alice").unchanged == [report.imported[0].session]
    with pytest.raises(strata.InvalidArgumentError) as e:
        alice.import_sessions("chatgpt", b"[\xff]")
    assert "byte 1" in e.value.message
    # In process, an export's bytes are read as the CLI reads the file: a kimi context with a Latin-1 byte is
    # imported with U+FFFD and the damage reported (the whole export was refused as "a name that is not UTF-8").
    latin1 = b'{"role": "user", "content": "caf\xe9"}\n{"role": "assistant", "content": "ok"}\n'
    kimi = local.import_sessions("kimi", latin1, "alice")
    assert [i.messages for i in kimi.imported] == [2]
    assert kimi.skipped and "UTF-8" in str(kimi.skipped), kimi.skipped
    path = tmp_path / "export"
    path.write_bytes(latin1)
    cli = subprocess.run([os.environ["STRATA_BIN"], "session", "import", str(path), "--format", "kimi", "--user",
                          "alice", "--data", str(tmp_path / "cli")], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    said = json.loads(cli.stdout)
    assert said["imported"][0]["session"] == kimi.imported[0].session
    assert [s["reason"] for s in said["skipped"]] == [s.reason for s in kimi.skipped]
    # Only the content is taken as it is: a name that is not UTF-8 is still refused before the import.
    with pytest.raises(strata.InvalidArgumentError, match=r"'name' is not UTF-8"):
        local.import_sessions("kimi", latin1, "bob", name=b"export\xff")
    assert local.list_sessions(user="bob") == []
    # Another argument's refusal is not laid on the content.
    with pytest.raises(TypeError, match="incompatible function arguments"):
        local.import_sessions("kimi", latin1, None)
    local.close()


def test_documents_are_added_once_in_process_and_over_http(server, tmp_path):
    tree = tmp_path / "tree"
    (tree / "docs").mkdir(parents=True)
    (tree / "docs" / "plan.md").write_text("# Plan\n\nPlant the cherry trees in March.\n")
    (tree / "tool.py").write_text("def plant():\n    return 'march'\n")
    local = strata.Engine.open(str(tmp_path / "local"))
    report = local.add_resources([str(tree)], "strata://resources/garden")
    assert isinstance(report, strata.AddReport)
    assert report.added == ["docs/plan.md", "tool.py"] and report.chunks == 2
    assert local.add_resources([str(tree)], "strata://resources/garden").unchanged == ["docs/plan.md", "tool.py"]
    hits = local.find("when are the cherry trees planted", under="strata://resources/garden")
    assert hits.hits[0].uri.startswith("strata://resources/garden/docs/plan.md/")
    local.close()
    alice = strata.Client(server.url, server.key("alice"))
    sent = alice.add_resources({"notes/a.md": "# A\n\nApples in autumn.\n", "blob.bin": b"\x00\x01binary"},
                               "strata://user/alice/notes")
    assert sent.added == ["notes/a.md"]
    assert [(s.path, s.reason) for s in sent.skipped] == [("blob.bin", "binary")]
    assert alice.add_resources({"notes/a.md": "# A\n\nApples in autumn.\n"}, "strata://user/alice/notes").unchanged == [
        "notes/a.md"]


def test_compaction_over_http(tmp_path):
    from conftest import KYOTO_SUMMARY, Server, plan_kyoto, script
    served = Server(tmp_path / "compacted", "--provider", "scripted", "--script",
                    script(tmp_path / "summary.json", KYOTO_SUMMARY))
    try:
        alice = strata.Client(served.url, served.key("alice"))
        alice.create_session(session_id="trip")
        plan_kyoto(alice.add_messages, "trip")
        done = alice.compact("trip")
        assert isinstance(done, strata.Compaction) and isinstance(done.session, strata.Session)
        assert done.session.id == "trip" and done.summary == KYOTO_SUMMARY
        assert done.compacted > 0 and not done.pruned_fallback and done.tokens_after < done.tokens_before
        assert alice.context("trip", max_context_tokens=4000).summary_included
    finally:
        served.stop()


def test_a_checkpoint_from_before_a_commit_is_refused_alike_in_process_and_over_http(server, tmp_path, engine):
    """A checkpoint id is reused after a commit; the Checkpoint that checkpoint() returned carries its tag,
    and revert and fork given it refuse the checkpoint that took the id (FailedPreconditionError)."""
    alice = strata.Client(server.url, server.key("alice"))
    for front, session_id in [(alice, "over-http"), (engine, "in-process")]:
        if front is alice:
            front.create_session(session_id=session_id)
        else:
            front.create_session("alice", session_id=session_id)
        front.add_messages(session_id, {"role": "user", "content": "First question."})
        old = front.checkpoint(session_id)
        assert isinstance(old, strata.Checkpoint) and old == 0 and old.messages == 1 and len(old.tag) == 32
        assert [c["tag"] for c in front.session_log(session_id).checkpoints] == [old.tag]
        front.commit(session_id)
        front.add_messages(session_id, {"role": "user", "content": "Second question."})
        new = front.checkpoint(session_id)
        assert new == old and new.messages == old.messages and new.tag != old.tag
        front.add_messages(session_id, {"role": "assistant", "content": "Second answer."})
        with pytest.raises(strata.FailedPreconditionError, match="no longer the one tagged"):
            front.revert(session_id, old)
        with pytest.raises(strata.FailedPreconditionError):
            front.revert(session_id, 0, tag=old.tag)
        with pytest.raises(strata.FailedPreconditionError):
            front.fork(session_id, "stale-" + session_id, checkpoint=old)
        with pytest.raises(strata.InvalidArgumentError):
            front.fork(session_id, "untagged-" + session_id, tag=old.tag)
        # A copy (or a pickle sent to another process) keeps the tag, and so is refused alike.
        for kept in (copy.deepcopy(old), pickle.loads(pickle.dumps(old))):
            assert isinstance(kept, strata.Checkpoint) and kept.to_dict() == old.to_dict()
            with pytest.raises(strata.FailedPreconditionError):
                front.revert(session_id, kept)
        assert len(front.messages(session_id)) == 2
        # Ids that cannot be are the same mistake on both sides, in the same words (in process they were
        # "no checkpoint -1", NotFound, and the task and archive ones NotFound too).
        for call, words in [(lambda: front.revert(session_id, -1), '"checkpoint" must be a checkpoint id, 0 or more, not -1'),
                            (lambda: front.fork(session_id, "neg-" + session_id, checkpoint=-1),
                             '"checkpoint" must be a checkpoint id, 0 or more, not -1'),
                            (lambda: front.task(-1), 'the task id "-1" is not a positive integer'),
                            (lambda: front.archive_diff(session_id, 0), 'the archive number "0" is not a positive integer')]:
            with pytest.raises(strata.InvalidArgumentError) as error:
                call()
            assert words in str(error.value), (front, error.value)
        front.revert(session_id, new)
        assert len(front.messages(session_id)) == 1
    # The server's own data read in process gives the tags the server gave.
    served = alice.checkpoint("over-http")
    local = strata.Engine.open(str(tmp_path / "served"), read_only=True)
    assert [c["tag"] for c in local.session_log("over-http").checkpoints] == [served.tag]
    local.close()


def test_text_that_is_not_unicode_and_ids_that_are_no_id_are_refused_alike(server, tmp_path, engine):
    """A lone surrogate (os.fsdecode of bytes that are not UTF-8) is InvalidArgumentError in process and
    over HTTP, naming the character (it was pybind11's TypeError and urllib's UnicodeEncodeError); an id
    holding '/' or no id at all never reaches another route (get_session("s1/status") answered s1's
    status)."""
    client = strata.Client(server.url, server.key("ops", role="admin"))
    bad = "strata://resources/u/\udcff"
    for call in (lambda: engine.read(bad), lambda: engine.write(bad, "x"), lambda: engine.find("q\udcff", limit=3),
                 lambda: strata.count_tokens("\udcff"), lambda: strata.ContextLog(str(tmp_path / "c\udcff.jsonl")),
                 lambda: client.read(bad), lambda: client.write("strata://resources/u/a", "x\udcff"),
                 lambda: client.get_session("s\udcff"),
                 lambda: engine.add_resources([str(tmp_path / "ok.txt"), str(tmp_path / "bad\udcff.txt")],
                                              "strata://resources/e")):
        with pytest.raises(strata.InvalidArgumentError, match=r"'\\udcff' at index \d+ is a lone surrogate"):
            call()
    # The client names the argument as the engine does (it quoted a slice of the request's body).
    with pytest.raises(strata.InvalidArgumentError, match=r"^Client\.write: argument 2 is not valid Unicode: "
                                                         r"'\\udcff' at index 1 is a lone surrogate"):
        client.write("strata://resources/u/a", "x\udcff")
    with pytest.raises(strata.InvalidArgumentError, match=r"^Engine\.write: argument 2 is not valid Unicode: "
                                                         r"'\\udcff' at index 1 is a lone surrogate"):
        engine.write("strata://resources/u/a", "x\udcff")
    # A list's item is named by its place (it was pybind11's TypeError); bytes that are not UTF-8 alike (they
    # were a bare UnicodeDecodeError), and a pathlib.Path is taken as its text (it was a TypeError).
    with pytest.raises(strata.InvalidArgumentError, match=r"argument 1\[1\] is not valid Unicode"):
        engine.add_resources([str(tmp_path / "ok.txt"), str(tmp_path / "bad\udcff.txt")], "strata://resources/e")
    with pytest.raises(strata.InvalidArgumentError, match=r"argument 1\[0\] is not UTF-8: byte 0xff"):
        engine.add_resources([os.fsencode(str(tmp_path / "bad\udcff.txt"))], "strata://resources/e")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nPaths as Path objects.\n")
    assert engine.add_resources([tmp_path / "docs"], "strata://resources/paths").added == ["a.md"]
    client.create_session(session_id="s1")
    for session_id in ("s1/status", "s1/log", "../s1", "", ".", ".."):
        with pytest.raises(strata.InvalidArgumentError):
            client.get_session(session_id)
        with pytest.raises(strata.InvalidArgumentError):
            engine.get_session(session_id)
    # In the TypeScript client's words (the server's for a missing parameter), naming the route and parameter.
    for session_id, says in (("", 'must not be empty'), (".", 'must not be "."'), ("..", 'must not be ".."')):
        with pytest.raises(strata.InvalidArgumentError, match="^" + re.escape('GET /api/v1/sessions/{id}: "id" ' + says) + "$"):
            client.get_session(session_id)
    # What is not a text problem is still the error it was.
    with pytest.raises(TypeError):
        engine.read(42)


def test_a_listing_the_limit_cut_says_so_in_process_and_over_http(server, tmp_path):
    """ls and tree with a limit return a NodeList whose truncated says whether there are more (MCP's list said
    so; HTTP, Python and TypeScript returned a bare list)."""
    admin = strata.Client(server.url, server.key("ops", role="admin"))
    for i in range(3):
        admin.write(f"strata://resources/cut/n{i}", f"note {i}")
    local = strata.Engine.open(str(tmp_path / "served"), read_only=True)
    for front in (admin, local):
        two = front.ls("strata://resources/cut", limit=2)
        assert isinstance(two, strata.NodeList) and len(two) == 2 and two.truncated, front
        assert not front.ls("strata://resources/cut", limit=3).truncated, front
        assert not front.ls("strata://resources/cut").truncated, front
        assert front.tree("strata://resources", limit=1).truncated, front
        assert [n.uri for n in front.ls("strata://resources/cut", limit=2)] == [n.uri for n in two]
    local.close()


def test_a_text_argument_that_is_no_text_is_the_same_type_error_in_process_and_over_http(server, engine, tmp_path):
    """A number or a list where a URI or id goes is TypeError on both sides (the client sent its JSON value or
    repr and raised the server's InvalidArgumentError, or wrote under "strata://resources/42"); UTF-8 bytes
    are taken as their text on both."""
    client = strata.Client(server.url, server.key("ops", role="admin"))
    for api in (engine, client):
        for call in (lambda: api.read(42), lambda: api.write(["strata://resources/t/a"], "x"),
                     lambda: api.write("strata://resources/t/a", 7), lambda: api.get_session(3),
                     lambda: api.find("tea", under=5)):
            with pytest.raises(TypeError) as error:
                call()
            assert not isinstance(error.value, strata.StrataError), (api, error.value)
    with pytest.raises(strata.NotFoundError):
        client.read("strata://resources/t/a")
    # Text given as UTF-8 bytes is the text it holds, alike; bytes that are not UTF-8 are refused alike.
    for api in (engine, client):
        api.write(b"strata://resources/t/bytes", "held as bytes")
        assert api.read(b"strata://resources/t/bytes") == "held as bytes"
        with pytest.raises(strata.InvalidArgumentError, match="not UTF-8"):
            api.read(b"strata://resources/t/\xff")
