"""strata.Engine in process: the store, find, sessions and commits with a scripted model, the memory-managed
turn, errors as exceptions, and one engine shared by many threads."""

from __future__ import annotations

import json
import threading

import pytest

import strata
from conftest import KYOTO_SUMMARY, SEAT_MEMORY, plan_kyoto, script


def test_store_round_trip(engine):
    node = engine.write("strata://resources/notes/build", "Run scripts/test before pushing.",
                        abstract="How to test", metadata={"team": "core"})
    assert isinstance(node, strata.Node)
    assert (node.uri, node.abstract, node.is_dir) == ("strata://resources/notes/build", "How to test", False)
    assert engine.read("strata://resources/notes/build") == "Run scripts/test before pushing."
    assert engine.read("strata://resources/notes/build", level=0) == "How to test"
    detail = engine.stat("strata://resources/notes/build")
    assert isinstance(detail, strata.NodeDetail) and detail.metadata == {"team": "core"}
    assert [n.uri for n in engine.ls("strata://resources/notes")] == ["strata://resources/notes/build"]
    assert "strata://resources/notes/build" in [n.uri for n in engine.tree("strata://resources")]
    assert [n.uri for n in engine.glob("notes/*", "strata://resources")] == ["strata://resources/notes/build"]
    matches = engine.grep("scripts/test", "strata://resources")
    assert [(m.uri, m.line) for m in matches] == [("strata://resources/notes/build", 1)]
    engine.mv("strata://resources/notes/build", "strata://resources/notes/testing")
    assert engine.read("strata://resources/notes/testing").startswith("Run")
    engine.mkdir("strata://resources/chat", ordered=True)
    assert engine.stat("strata://resources/chat").metadata == {"ordered": True}
    assert engine.rm("strata://resources/notes", recursive=True) == 2
    with pytest.raises(strata.NotFoundError) as e:
        engine.read("strata://resources/notes/testing")
    assert e.value.code == "not_found" and "strata://resources/notes/testing" in e.value.message


def test_records_are_objects_and_dicts(engine):
    node = engine.write("strata://resources/a", "alpha")
    assert node["uri"] == node.uri and "uri" in node
    d = node.to_dict()
    d["uri"] = "changed"
    assert node.uri == "strata://resources/a", "to_dict() is a copy"
    with pytest.raises(AttributeError, match="has no member"):
        node.no_such_member
    with pytest.raises(AttributeError):
        node.uri = "x"
    assert json.loads(json.dumps(node.to_dict()))["uri"] == node.uri


def test_find_hits_carry_uri_score_abstract_reason_tokens(engine):
    engine.write("strata://resources/notes/build", "Run scripts/test before pushing.")
    engine.write("strata://resources/notes/lunch", "Lunch is at noon in the big room.")
    engine.write("strata://user/alice/memories/prefs/seat", "Alice prefers aisle seats.")
    result = engine.find("how do I test before pushing")
    assert isinstance(result, strata.FindResult)
    best = result[0]
    assert best.uri == "strata://resources/notes/build"
    assert best.score > 0 and best.tokens > 0 and best.abstract and best.reason
    assert result.tokens == sum(h.tokens for h in result)
    # Narrowed, budgeted, and as a user (who does not reach another user's scope).
    assert all(h.uri.startswith("strata://user/alice") for h in engine.find("seat", under="strata://user/alice"))
    assert len(engine.find("notes", token_budget=1)) <= 1
    assert all(not h.uri.startswith("strata://user/alice") for h in engine.find("aisle seats", user="bob"))
    assert any(h.uri.startswith("strata://user/alice") for h in engine.find("aisle seats", user="alice"))
    with pytest.raises(strata.InvalidArgumentError):
        engine.find("x", limit=0)
    # A user id is checked as the other front ends check it: "" reached everyone's data, "alice/memories"
    # alice's memories (while under= that scope was refused), "." nobody's.
    for bad in ["", "alice/memories", "."]:
        with pytest.raises(strata.InvalidArgumentError, match="user: id"):
            engine.find("aisle seats", user=bad)
        with pytest.raises(strata.InvalidArgumentError, match="user: id"):
            engine.glob("**", user=bad)
        with pytest.raises(strata.InvalidArgumentError, match="user: id"):
            engine.list_sessions(user=bad)


def test_errors_are_the_status_classes(engine):
    with pytest.raises(strata.InvalidArgumentError) as e:
        engine.write("not a uri", "x")
    assert isinstance(e.value, ValueError) and isinstance(e.value, strata.StrataError)
    engine.write("strata://resources/x", "one")
    with pytest.raises(strata.AlreadyExistsError):
        engine.write("strata://resources/x", "two", overwrite=False)
    with pytest.raises(strata.NotFoundError):
        engine.session_status("no-such-session")
    with pytest.raises(strata.InvalidArgumentError, match=r"messages\[1\]"):
        engine.create_session("alice", "s")
        engine.add_messages("s", [{"role": "user", "content": "ok"}, {"role": "nobody", "content": 1}])
    # Plain words where a message goes are said to be that, not "invalid JSON at byte 0".
    with pytest.raises(strata.InvalidArgumentError, match=r"messages\[0\]: a message is a dict .* this str is not one"):
        engine.add_messages("s", ["hello"])
    with pytest.raises(strata.InvalidArgumentError, match=r'"metadata" must be an object'):
        engine.write("strata://resources/y", "x", metadata=["not", "a", "dict"])
    with pytest.raises(strata.InvalidArgumentError, match="JSON cannot hold"):
        engine.write("strata://resources/y", "x", metadata={"when": object()})
    with pytest.raises(strata.InvalidArgumentError, match="unknown option"):
        strata.Engine.open(engine.data, no_such_option=1)
    # Options are read as the CLI reads its flags, each error naming the option (a lease of inf reached a
    # cast to int64_t, 0 let any worker take a running job, "5" was pybind's "Unable to cast").
    for options, said in [({"job_lease": float("inf")}, '"job_lease" must be a number of seconds from 1 to 86400, not inf'),
                          ({"job_lease": 0}, '"job_lease" must be a number of seconds from 1 to 86400, not 0'),
                          ({"busy_timeout": 1e9}, '"busy_timeout" must be a number of seconds from 0 to 86400'),
                          ({"busy_timeout": "5"}, '"busy_timeout" must be a number of seconds from 0 to 86400, not str'),
                          ({"commit_after_idle": float("nan")}, '"commit_after_idle" must be a number of seconds'),
                          ({"commit_after_tokens": -5}, '"commit_after_tokens" must be 0 or more, not -5'),
                          ({"commit_after_turns": 2**64}, '"commit_after_turns" must be an integer of at most 64 bits'),
                          ({"commit_after_turns": True}, '"commit_after_turns" must be an integer, not a bool'),
                          ({"read_only": "yes"}, '"read_only" must be True or False, not str'),
                          ({"prompt_dirs": "dir"}, '"prompt_dirs" must be a list of directories, not str')]:
        with pytest.raises(strata.InvalidArgumentError) as error:
            strata.Engine.open(engine.data, **options)
        assert said in str(error.value), (options, str(error.value))
    engine.close()
    with pytest.raises(strata.FailedPreconditionError, match="closed"):
        engine.read("strata://resources/x")


def test_sessions_commit_and_memories_with_a_scripted_model(engine):
    s = engine.create_session("alice", "trip")
    assert isinstance(s, strata.Session) and (s.id, s.user) == ("trip", "alice")
    engine.add_messages("trip", [{"role": "user", "content": "I always take the aisle seat on long flights."},
                                 {"role": "assistant", "content": "Noted."}])
    assert [m["role"] for m in engine.messages("trip")] == ["user", "assistant"]
    ctx = engine.context("trip", max_context_tokens=4000)
    assert isinstance(ctx, strata.SessionContext) and [m["content"] for m in ctx.sent][0].startswith("I always")
    outcome = engine.commit("trip", wait=True)
    assert isinstance(outcome, strata.CommitOutcome)
    assert (outcome.session, outcome.archive, outcome.messages, outcome.state) == ("trip", 1, 2, "done")
    assert [c["uri"] for c in outcome.diff["changes"]] == ["strata://user/alice/memories/preferences/seat"]
    assert engine.archive_diff("trip", 1) == outcome.diff
    status = engine.session_status("trip")
    assert status.archives[0].state == "done" and status.jobs[0].finished
    assert engine.task(outcome.task_id).state == "done"
    hits = engine.find("which seat does alice like", under="strata://user/alice")
    assert hits[0].uri == "strata://user/alice/memories/preferences/seat"
    history = engine.history("strata://user/alice/memories/preferences/seat")
    assert history[0].action == "create" and history[0].session == "trip"
    assert engine.changes("strata://user/alice")[0].uri == "strata://user/alice/memories/preferences/seat"
    engine.add_messages("trip", {"role": "user", "content": "And a window seat on short ones."})
    assert engine.commit("trip").archive == 2
    with pytest.raises(strata.FailedPreconditionError, match="archive 2 is archived"):
        engine.archive_diff("trip", 2)
    with pytest.raises(strata.NotFoundError):
        engine.archive_diff("trip", 3)
    engine.delete_session("trip", force=True)
    with pytest.raises(strata.NotFoundError):
        engine.get_session("trip")


def test_the_memory_managed_turn(tmp_path):
    e = strata.Engine.open(str(tmp_path / "data"), commit_after_turns=2, commit_after_tokens=0, commit_after_idle=0)
    e.write("strata://user/alice/memories/preferences/seat", "Alice prefers aisle seats on long flights.",
            abstract="Prefers aisle seats on long flights")
    with e.begin_turn("chat", {"role": "user", "content": "Which seat should I book?"}, user="alice",
                      system="You are a travel agent.") as turn:
        assert turn.system_prompt.startswith("You are a travel agent.")
        assert "Prefers aisle seats" in turn.system_prompt
        assert turn.messages == [{"role": "user", "content": "Which seat should I book?"}]
        assert e.messages("chat") == [], "nothing is logged before the model takes the turn"
        with pytest.raises(strata.FailedPreconditionError, match="turn in progress"):
            e.begin_turn("chat", {"role": "user", "content": "again"}, user="alice")
        turn.accept()
        with pytest.raises(strata.InvalidArgumentError, match="unknown member 'input'"):
            turn.finish({"role": "assistant", "content": "The aisle."}, usage={"input": 90, "output_tokens": 3})
        assert turn.active, "a refused finish leaves the turn open"
        # A negative count was taken and then dropped in silence by the usage mark; counts whose sum
        # overflows 64 bits were too; a key that is not Unicode was pybind's "Unable to cast".
        for usage, says in [({"input_tokens": -5}, '"usage.input_tokens" must be 0 or more, not -5'),
                            ({"input_tokens": 2**62, "prompt_tokens": 2**62}, '"usage.input_tokens" must be below 2\\^53'),
                            ({"output_tokens": 1.5}, '"usage.output_tokens" must be an integer'),
                            ({"\ud800": 1}, "unknown member")]:
            with pytest.raises(strata.InvalidArgumentError, match=says):
                turn.finish({"role": "assistant", "content": "The aisle."}, usage=usage)
            assert turn.active
        first = turn.finish({"role": "assistant", "content": "The aisle."}, usage={"input_tokens": 90, "output_tokens": 3})
    assert isinstance(first, strata.TurnOutcome) and not first.committed
    assert e.session_log("chat").usage_tokens == 93
    # A refused turn (released without accept) logs nothing.
    with e.begin_turn("chat", {"role": "user", "content": "refused"}, user="alice"):
        pass
    assert len(e.messages("chat")) == 2
    # Another user's session is not there.
    with pytest.raises(strata.NotFoundError):
        e.begin_turn("chat", {"role": "user", "content": "let me in"}, user="bob")
    second = e.begin_turn("chat", {"role": "user", "content": "And on short flights?"}, user="alice")
    assert len(second.messages) == 3
    outcome = second.finish({"role": "assistant", "content": "Still the aisle."})
    assert outcome.committed and outcome.job_id > 0
    assert not second.active
    with pytest.raises(strata.FailedPreconditionError, match="ended"):
        second.accept()
    e.close()


def test_one_engine_from_many_threads(engine):
    errors = []

    def worker(n):
        try:
            for i in range(20):
                engine.write(f"strata://resources/t{n}/n{i}", f"note {n} {i} about threads")
                engine.find(f"note {n}")
        except Exception as ex:  # noqa: BLE001 - collected and asserted below
            errors.append(ex)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(engine.tree("strata://resources")) == 6 * 21


def test_prompts_and_tokens(engine):
    text = engine.render_prompt("session.summarize", {"transcript": "[user] hi"}, max_words=12)
    assert "[user] hi" in text and "at most 12 words" in text
    with pytest.raises(strata.InvalidArgumentError, match="transcript"):
        engine.render_prompt("session.summarize")
    with pytest.raises(strata.NotFoundError):
        engine.render_prompt("no.such.prompt")
    assert strata.count_tokens("hello world") == 2
    assert strata.count_tokens({"role": "user", "content": "hello world"}) > 2
    assert strata.decode(strata.encode("héllo wörld")) == "héllo wörld"
    assert strata.count_tokens("hello", encoding="chars") == 2
    with pytest.raises(strata.InvalidArgumentError, match="encoding must be"):
        strata.count_tokens("x", encoding="nope")
    with pytest.raises(strata.InvalidArgumentError):
        strata.decode([1 << 30])


def test_compaction_folds_the_older_turns_into_a_summary(tmp_path):
    e = strata.Engine.open(str(tmp_path / "data"), provider="scripted",
                           script=script(tmp_path / "summary.json", KYOTO_SUMMARY))
    e.create_session("alice", "trip")
    plan_kyoto(e.add_messages, "trip")
    done = e.compact("trip")
    assert isinstance(done, strata.Compaction) and isinstance(done.session, strata.Session)
    assert done.session.id == "trip" and done.summary == KYOTO_SUMMARY
    assert done.compacted > 0 and not done.pruned_fallback
    assert len(e.session_log("trip").rotations) == 1, "the log before compaction is kept"
    sent = e.context("trip", max_context_tokens=4000)
    assert sent.summary_included
    with pytest.raises(strata.NotFoundError):
        e.compact("nope")
    e.close()
