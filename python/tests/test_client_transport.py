"""strata.Client's transport against a scripted HTTP server: what a proxy, a broken connection, a busy event
stream or an odd argument make of a call, answered as the TypeScript client answers it (clients/typescript:
its client.test.mjs holds the same cases)."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

import strata


class Stub:
    """An HTTP server on a free port answering each request with `routes[(method, path)](handler)`; every
    request's method and path is kept in `seen`."""

    def __init__(self, routes):
        stub = self
        self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # Quiet.
                pass

            def handle_one(self):
                path = self.path.split("?")[0]
                stub.seen.append((self.command, path))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                answer = routes.get((self.command, path))
                if answer is None:
                    self.reply(404, {"status": "error", "error": {"code": "not_found", "message": "no route " + path}})
                else:
                    answer(self)

            do_GET = do_POST = do_DELETE = handle_one

            def reply(self, status, body, content_type="application/json", length=None):
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(raw) if length is None else length))
                self.end_headers()
                self.wfile.write(raw)
                self.wfile.flush()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def ok(result):
    return lambda h: h.reply(200, {"status": "ok", "result": result})


@pytest.fixture
def stub():
    made = []

    def make(routes):
        s = Stub(routes)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def test_an_answer_without_stratas_envelope_is_unavailable_with_its_status(stub):
    """A proxy's error page is not Strata's answer: a 404 page was NotFoundError ("no such node"), a 502 page
    InternalError; both are now the retryable UnavailableError carrying the status, as in TypeScript."""
    s = stub({("GET", "/api/v1/fs/read"): lambda h: h.reply(404, b"<html>not here</html>", "text/html"),
              ("GET", "/api/v1/fs/stat"): lambda h: h.reply(502, b"<html>bad gateway</html>", "text/html"),
              ("GET", "/health"): lambda h: h.reply(200, b"<html>portal</html>", "text/html"),
              ("GET", "/ready"): lambda h: h.reply(200, {"no": "envelope"})})
    client = strata.Client(s.url)
    for call, status in [(lambda: client.read("strata://resources/a"), 404),
                         (lambda: client.stat("strata://resources/a"), 502),
                         (client.health, 200), (client.ready, 200)]:
        with pytest.raises(strata.UnavailableError) as error:
            call()
        assert error.value.status == status, error.value
    # Strata's own error envelope keeps its code.
    s2 = stub({})
    with pytest.raises(strata.NotFoundError):
        strata.Client(s2.url).read("strata://resources/a")


def test_a_body_cut_short_is_unavailable_not_a_bare_incomplete_read(stub):
    s = stub({("GET", "/api/v1/fs/read"): lambda h: h.reply(200, b'{"status": "ok", "res', length=100)})
    client = strata.Client(s.url, timeout=5)
    with pytest.raises(strata.UnavailableError):
        client.read("strata://resources/a")


def test_commit_wait_asks_for_the_task_when_its_stream_is_refused_or_ends_early(stub):
    """The server holds a limited number of event streams (429 when all are taken): the commit is made by
    then, so the wait asks for the task instead of raising (a caller's retry would commit again). A stream
    that ends before the task is finished is followed by asking too."""
    polls = {"n": 0}

    def task(h):
        polls["n"] += 1
        state = "done" if polls["n"] >= 3 else "running"
        h.reply(200, {"status": "ok", "result": {"id": 7, "state": state, "kind": "commit", "key": "s1"}})

    routes = {
        ("POST", "/api/v1/sessions/s1/commit"): ok({"session": "s1", "archive": 1, "task_id": 7, "state": "pending"}),
        ("GET", "/api/v1/tasks/7/events"): lambda h: h.reply(
            429, {"status": "error", "error": {"code": "resource_exhausted", "message": "too many streams"}}),
        ("GET", "/api/v1/tasks/7"): task,
        ("GET", "/api/v1/sessions/s1/status"): ok({"session": "s1", "archives": [{"archive": 1, "state": "done"}]}),
        ("GET", "/api/v1/sessions/s1/archives/1/diff"): ok({"archive": 1, "summary": "S", "changes": []}),
    }
    s = stub(routes)
    outcome = strata.Client(s.url).commit("s1", wait=True)
    assert outcome.state == "done" and outcome.diff is not None
    assert polls["n"] == 3
    assert [p for p in s.seen if p[1] == "/api/v1/sessions/s1/commit"] == [("POST", "/api/v1/sessions/s1/commit")]
    # A stream that ends (the server's hour) with the task still running.
    polls["n"] = 0
    routes[("GET", "/api/v1/tasks/7/events")] = lambda h: h.reply(
        200, b'event: task\ndata: {"id": 7, "state": "running"}\n\nevent: end\ndata: {}\n\n', "text/event-stream")
    s2 = stub(routes)
    assert strata.Client(s2.url).commit("s1", wait=True).state == "done"
    assert polls["n"] == 3
    # Other failures of the stream are still raised.
    routes[("GET", "/api/v1/tasks/7/events")] = lambda h: h.reply(
        403, {"status": "error", "error": {"code": "permission_denied", "message": "no"}})
    with pytest.raises(strata.PermissionDeniedError):
        strata.Client(stub(routes).url).commit("s1", wait=True)


def test_a_task_event_that_is_not_a_json_object_is_unavailable(stub):
    """The event stream is the server's answer too: an event whose data is not JSON (a proxy's page cut in)
    or not an object was a bare ValueError (or a Task of nothing), where TypeScript raises unavailable."""
    for data in (b"<html>", b"[1, 2]"):
        s = stub({("GET", "/api/v1/tasks/7/events"): lambda h, data=data: h.reply(
            200, b"event: task\ndata: " + data + b"\n\n", "text/event-stream")})
        with pytest.raises(strata.UnavailableError) as error:
            list(strata.Client(s.url, timeout=5).task_events(7))
        assert "task event" in str(error.value) and error.value.status == 200, error.value


def test_timeouts_of_none_and_zero_mean_no_limit(stub):
    """timeout=None made commit(wait=True) a bare TypeError (max(None, 30.0)), and timeout=0 a socket that
    never waited; both now mean no limit, as the TypeScript client's timeoutMs 0."""
    routes = {
        ("GET", "/health"): ok({"alive": True}),
        ("POST", "/api/v1/sessions/s1/commit"): ok({"session": "s1", "archive": 1, "task_id": 7, "state": "pending"}),
        ("GET", "/api/v1/tasks/7/events"): lambda h: h.reply(
            200, b'event: task\ndata: {"id": 7, "state": "done"}\n\n', "text/event-stream"),
        ("GET", "/api/v1/sessions/s1/status"): ok({"session": "s1", "archives": [{"archive": 1, "state": "done"}]}),
        ("GET", "/api/v1/sessions/s1/archives/1/diff"): ok({"archive": 1, "summary": "S", "changes": []}),
    }
    s = stub(routes)
    for timeout in (None, 0):
        client = strata.Client(s.url, timeout=timeout)
        assert client.timeout is None
        assert client.health() == {"alive": True}
        assert client.commit("s1", wait=True).state == "done"
    assert strata.Client(s.url).timeout == 120.0


def test_ids_in_paths_and_base_urls_are_read_strictly(stub):
    s = stub({("GET", "/api/v1/tasks/1"): ok({"id": 1, "state": "done"})})
    client = strata.Client(s.url)
    assert client.task(1).state == "done"
    assert client.task(1.0).state == "done"  # A whole number, as the Engine reads one in process.
    # task(1.9) asked for task 1, task(True) too; the Engine refuses both in process, naming the argument.
    for bad, said in ((1.9, "not float"), (True, "not a bool"), ("1", "not str"), (2**70, "at most 64 bits")):
        with pytest.raises(strata.InvalidArgumentError, match=f'"task_id" must be an integer.*{said}'):
            client.task(bad)
        with pytest.raises(strata.InvalidArgumentError, match=f'"archive" must be an integer.*{said}'):
            client.archive_diff("s1", bad)
    assert [p for p in s.seen if p[1].startswith("/api/v1/tasks")] == [("GET", "/api/v1/tasks/1")] * 2
    with pytest.raises(strata.InvalidArgumentError, match="timeout"):
        strata.Client(s.url, timeout=-1)
    # A base URL's query or fragment would be glued to every path; its scheme is read in any case.
    for bad in ("http://h:1/?x=1", "http://h:1/#top", "ftp://h:1", "http://", "h:1"):
        with pytest.raises(strata.InvalidArgumentError):
            strata.Client(bad)
    upper = strata.Client(s.url.replace("http://", "HTTP://") + "/")
    assert upper.base_url == s.url
    assert upper.task(1).state == "done"


def test_a_count_without_the_servers_vocabulary_warns_as_in_process(stub):
    """A server without the vocabulary counts characters / 4 and says so in "warning": the Client passes it on
    as a RuntimeWarning (as strata.count_tokens does in process), not a bare number taken for exact."""
    said = "the o200k_base vocabulary is not installed here; tokens are counted as characters / 4"
    s = stub({("POST", "/api/v1/tokens/count"): ok({"encoding": "o200k_base", "tokens": 3, "warning": said})})
    with pytest.warns(RuntimeWarning, match="not installed here"):
        assert strata.Client(s.url).count_tokens("hello world!") == 3
    exact = stub({("POST", "/api/v1/tokens/count"): ok({"encoding": "o200k_base", "tokens": 3})})
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert strata.Client(exact.url).count_tokens("hello world!") == 3
