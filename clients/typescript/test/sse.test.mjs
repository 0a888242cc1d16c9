// The Server-Sent Events parser of @strata/client (src/sse.ts) against the event-stream rules of the HTML
// standard, fed in awkward chunks. Run by test/run.sh (STRATA_CLIENT_DIST: the built dist/).
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

const { parseSse } = await import(pathToFileURL(path.join(process.env.STRATA_CLIENT_DIST, "sse.js")).href);

// A byte stream that delivers `chunks` (strings or byte arrays) one read at a time; `cancelled` records a
// cancellation by the reader.
function streamOf(chunks) {
  const encoder = new TextEncoder();
  const state = { cancelled: false };
  let i = 0;
  const stream = new ReadableStream({
    pull(controller) {
      if (i === chunks.length) return controller.close();
      const chunk = chunks[i++];
      controller.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state };
}

async function parse(chunks) {
  const events = [];
  for await (const e of parseSse(streamOf(chunks).stream)) events.push(e);
  return events;
}

test("events with names, multi-line data, ids and comments", async () => {
  const events = await parse([
    ": a comment\n\n",
    "event: task\ndata: {\"id\": 1,\ndata:  \"state\": \"running\"}\nid: 7\n\n",
    "data: plain\n\n",
    ":keep-alive\n\nevent: end\ndata: {}\n\n",
  ]);
  assert.deepEqual(events, [
    { event: "task", data: "{\"id\": 1,\n \"state\": \"running\"}", id: "7" },
    { event: "message", data: "plain", id: "7" },
    { event: "end", data: "{}", id: "7" },
  ]);
  assert.deepEqual(JSON.parse(events[0].data), { id: 1, state: "running" });
});

test("CRLF, CR and LF line ends, a CRLF split across chunks, and lines split anywhere", async () => {
  const events = await parse(["event: a\r", "\ndata: 1\r\n\r", "\nevent: b\rdata: 2\r\rda", "ta: 3\n", "\n"]);
  assert.deepEqual(events.map((e) => [e.event, e.data]), [["a", "1"], ["b", "2"], ["message", "3"]]);
});

test("a multi-byte character split across chunks, and a leading byte-order mark", async () => {
  const bytes = new TextEncoder().encode("\uFEFFdata: caf\u00e9 \u{1F375}\n\n");
  const events = await parse([bytes.slice(0, 2), bytes.slice(2, 12), bytes.slice(12, 15), bytes.slice(15)]);
  assert.deepEqual(events.map((e) => e.data), ["caf\u00e9 \u{1F375}"]);
});

test("fields without a colon or a space, unknown fields, retry, and events without data", async () => {
  const events = await parse([
    "data\n\n",                           // An empty data line: an event with "" as data.
    "data:x\nfoo: bar\nretry: 1500\n\n",  // No space after the colon; an unknown field; a retry.
    "retry: soon\nevent: ignored\n\n",    // No data: nothing is dispatched (and the name is reset).
    "data: y\n\n",
    "id: a\u0000b\ndata: z\n\n",          // An id with NUL is ignored.
  ]);
  assert.deepEqual(events, [
    { event: "message", data: "", id: "" },
    { event: "message", data: "x", id: "", retry: 1500 },
    { event: "message", data: "y", id: "", retry: 1500 },
    { event: "message", data: "z", id: "", retry: 1500 },
  ]);
});

test("an event the stream ends in the middle of is discarded", async () => {
  assert.deepEqual(await parse(["data: whole\n\n", "event: task\ndata: {\"half\""]), [
    { event: "message", data: "whole", id: "" },
  ]);
  assert.deepEqual(await parse(["data: no blank line\n"]), []);
});

test("stopping early cancels the stream", async () => {
  const { stream, state } = streamOf(["data: 1\n\n", "data: 2\n\n", "data: 3\n\n"]);
  for await (const e of parseSse(stream)) {
    assert.equal(e.data, "1");
    break;
  }
  assert.equal(state.cancelled, true);
});

test("a stream that fails mid-way rejects with its error", async () => {
  let sent = false;
  const stream = new ReadableStream({
    pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(new TextEncoder().encode("data: 1\n\n"));
      } else {
        controller.error(new Error("connection reset"));
      }
    },
  });
  const seen = [];
  await assert.rejects(async () => {
    for await (const e of parseSse(stream)) seen.push(e.data);
  }, /connection reset/);
  assert.deepEqual(seen, ["1"]);
});
