// The official `@anthropic-ai/sdk` npm client, unmodified, against `strata serve`'s /v1/messages, with a
// fake Anthropic upstream on loopback. Run by ctest (server_anthropic_client):
//   node anthropic_client_test.mjs PATH/TO/strata        (STRATA_NPM_CACHE holds the pinned npm packages)
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { fakeUpstream, header, requireNpm, startProxy, writeSlowly } from "./harness.mjs";

const sdk = requireNpm("@anthropic-ai/sdk");
const Anthropic = sdk.default ?? sdk.Anthropic ?? sdk;

const strataBin = process.argv[2];
const rootKey = "root-key-for-the-anthropic-client-test";
const received = [];  // Requests the fake upstream got.
let strata, userKey;

// The fake upstream answers like Anthropic: a whole message, or its events (text, or a tool_use whose
// input arrives in pieces); model "broken" gets a 429 in Anthropic's error shape.
const upstreamHandler = fakeUpstream(received, { type: "error", error: { type: "rate_limit_error", message: "Rate limit reached" } }, (request, res) => {
  const last = request.messages[request.messages.length - 1];
  const lastIsText = typeof last.content === "string" || last.content.every((b) => b.type === "text");
  const wantsTool = Array.isArray(request.tools) && request.tools.length > 0 && lastIsText;
  const message = { id: "msg_1", type: "message", role: "assistant", model: request.model, stop_sequence: null };
  if (!request.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ...message, content: [{ type: "text", text: "Whole reply." }], stop_reason: "end_turn",
                             usage: { input_tokens: 21, output_tokens: 5 } }));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  const event = (data) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
  const parts = [event({ type: "message_start", message: { ...message, content: [], stop_reason: null,
                                                            usage: { input_tokens: 21, output_tokens: 1 } } })];
  if (request.model === "overloaded") {
    // The upstream's own error event, mid-stream.
    parts.push(event({ type: "error", error: { type: "overloaded_error", message: "Overloaded (fake)" } }));
    writeSlowly(res, parts);
    return;
  }
  if (wantsTool) {
    parts.push(event({ type: "content_block_start", index: 0,
                       content_block: { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} } }),
               event({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "{\"city\":" } }),
               event({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "\"Kyoto\"}" } }),
               event({ type: "content_block_stop", index: 0 }),
               event({ type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 9 } }));
  } else {
    parts.push(event({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
               event({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hello" } }),
               event({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: ", Alice." } }),
               event({ type: "content_block_stop", index: 0 }),
               event({ type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 5 } }));
  }
  parts.push(event({ type: "message_stop" }));
  if (request.model === "slow") {
    // A pause longer than Strata's sign-of-life interval (2 s) in the middle of the reply.
    res.write(parts.slice(0, 3).join(""));
    setTimeout(() => res.end(parts.slice(3).join("")), 2_600);
    return;
  }
  writeSlowly(res, parts);
});

const client = (key, headers = {}) =>
  new Anthropic({ baseURL: `http://127.0.0.1:${strata.port}`, apiKey: key, maxRetries: 0, defaultHeaders: headers });

let proxy;
before(async () => {
  proxy = await startProxy(strataBin, { handler: upstreamHandler, provider: "anthropic", model: "fake-claude", rootKey,
                                        extra: ["--commit-after-idle", "2"] });
  ({ strata, userKey } = proxy);
});

after(() => proxy.stop());

test("without a session it is a transparent proxy (streamed and not)", async () => {
  const whole = await client(userKey).messages.create({ model: "fake-claude", max_tokens: 100,
                                                        messages: [{ role: "user", content: "Hi" }] });
  assert.equal(whole.content[0].text, "Whole reply.");
  assert.equal(whole.usage.output_tokens, 5);
  const sent = received.at(-1);
  assert.equal(sent.headers["x-api-key"], "upstream-secret", "the upstream's key, not the client's");
  assert.ok(sent.headers["anthropic-version"], "the client's API version goes upstream");
  assert.deepEqual(sent.body.messages, [{ role: "user", content: "Hi" }], "forwarded as it is");

  const stream = client(userKey).messages.stream({ model: "fake-claude", max_tokens: 100,
                                                   messages: [{ role: "user", content: "Hi" }] });
  let text = "";
  stream.on("text", (t) => (text += t));
  const final = await stream.finalMessage();
  assert.equal(text, "Hello, Alice.");
  assert.equal(final.stop_reason, "end_turn");
});

test("with a session the client sends only its new turn; Strata logs both sides and assembles the history", async () => {
  const remembered = await strata.call("POST", "/api/v1/fs/write", userKey,
                                       { uri: "strata://user/alice/memories/profile/name", content: "The user's full name is Alice Liddell." });
  assert.equal(remembered.status, 200);
  const inSession = client(userKey, { "X-Strata-Session": "claude-1" });
  const first = inSession.messages.stream({ model: "fake-claude", max_tokens: 100, system: "You are terse.",
                                            messages: [{ role: "user", content: "My name is Alice." }] });
  assert.equal((await first.finalMessage()).content[0].text, "Hello, Alice.");
  const second = await inSession.messages.create({ model: "fake-claude", max_tokens: 100, system: "You are terse.",
                                                   messages: [{ role: "user", content: "What is my name?" }] });
  assert.equal(second.content[0].text, "Whole reply.");
  const sent = received.findLast((r) => JSON.stringify(r.body.messages).includes("What is my name?")).body;
  const system = Array.isArray(sent.system) ? sent.system.map((b) => b.text).join("") : sent.system;
  assert.match(system, /You are terse\./);
  assert.match(system, /Alice Liddell/, "a relevant memory joins the system prompt");
  const text = (m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text ?? "").join(""));
  assert.deepEqual(sent.messages.map((m) => [m.role, text(m)]),
                   [["user", "My name is Alice."], ["assistant", "Hello, Alice."], ["user", "What is my name?"]],
                   "the earlier turn comes from Strata's log");
  const logged = await strata.call("GET", "/api/v1/sessions/claude-1/log", userKey);
  assert.equal(logged.status, 200);
  assert.deepEqual(logged.json.result.messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
  assert.ok(logged.json.result.usage_tokens > 0, "the upstream's usage is recorded");
  // Strata marks the system prompt and the last message for caching, but never past Anthropic's limit of
  // four breakpoints: a client's own three (on its tools) come first.
  const count = (j) => (j && typeof j === "object"
    ? (Object.hasOwn(j, "cache_control") ? 1 : 0) + Object.values(j).reduce((n, v) => n + count(v), 0) : 0);
  assert.equal(count(sent), 2, "the system prompt and the last message");
  const tool = (name) => ({ name, input_schema: { type: "object" }, cache_control: { type: "ephemeral" } });
  const cached = await inSession.messages.create({ model: "fake-claude", max_tokens: 100, system: "You are terse.",
                                                   tools: [tool("t1"), tool("t2"), tool("t3")],
                                                   messages: [{ role: "user", content: "And now?" }] });
  assert.equal(cached.content[0].text, "Whole reply.");
  assert.equal(count(received.at(-1).body), 4, JSON.stringify(received.at(-1).body));
  assert.equal(count(received.at(-1).body.tools), 3, "the client's own are kept");
  // A document block reaches the upstream and the log as it came (it was refused in a session).
  const document = { type: "document", source: { type: "text", media_type: "text/plain", data: "The lease ends in May." } };
  const read = await client(userKey, { "X-Strata-Session": "claude-doc" }).messages.create({
    model: "fake-claude", max_tokens: 100,
    messages: [{ role: "user", content: [document, { type: "text", text: "When does the lease end?" }] }] });
  assert.equal(read.content[0].text, "Whole reply.");
  const forwarded = received.at(-1).body.messages.at(-1).content;
  assert.deepEqual(forwarded[0].source, document.source, JSON.stringify(forwarded));
  const kept = await strata.call("GET", "/api/v1/sessions/claude-doc/messages", userKey);
  assert.equal(kept.json.result[0].content[0].type, "document", JSON.stringify(kept.json.result));
});

test("streamed tool use reaches the client whole, and the tool result goes back with its call", async () => {
  const inSession = client(userKey, { "X-Strata-Session": "claude-tools" });
  const tools = [{ name: "get_weather", description: "Weather for a city",
                   input_schema: { type: "object", properties: { city: { type: "string" } } } }];
  const stream = inSession.messages.stream({ model: "fake-claude", max_tokens: 100, tools,
                                             messages: [{ role: "user", content: "Weather in Kyoto?" }] });
  const message = await stream.finalMessage();
  const use = message.content.find((b) => b.type === "tool_use");
  assert.equal(use.name, "get_weather");
  assert.deepEqual(use.input, { city: "Kyoto" });
  const answer = await inSession.messages.create({ model: "fake-claude", max_tokens: 100, tools, messages: [
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "Sunny, 21 C" }] }] });
  assert.equal(answer.content[0].text, "Whole reply.");
  // (Found by content: the upstream is also the phase-2 model, whose requests may come in between.)
  const sent = received.findLast((r) => JSON.stringify(r.body.messages).includes("tool_result")).body.messages;
  assert.deepEqual(sent.map((m) => m.role), ["user", "assistant", "user"]);
  assert.equal(sent[1].content.find((b) => b.type === "tool_use").id, "toolu_1");
  assert.deepEqual(sent[1].content.find((b) => b.type === "tool_use").input, { city: "Kyoto" });
  assert.equal(sent[2].content[0].type, "tool_result");
  assert.equal(sent[2].content[0].tool_use_id, "toolu_1");
});

test("a tool result holding an image (a screenshot) is taken and sent back with its image", async () => {
  const inSession = client(userKey, { "X-Strata-Session": "claude-shot" });
  const tools = [{ name: "get_weather", description: "Weather for a city",
                   input_schema: { type: "object", properties: { city: { type: "string" } } } }];
  const message = await inSession.messages.stream({ model: "fake-claude", max_tokens: 100, tools,
                                                    messages: [{ role: "user", content: "Weather in Kyoto?" }] }).finalMessage();
  const use = message.content.find((b) => b.type === "tool_use");
  const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } };
  const answer = await inSession.messages.create({ model: "fake-claude", max_tokens: 100, tools, messages: [
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id,
                                content: [{ type: "text", text: "The forecast page:" }, image] }] }] });
  assert.equal(answer.content[0].text, "Whole reply.");
  const sent = received.findLast((r) => JSON.stringify(r.body.messages).includes("The forecast page:")).body.messages;
  const result = sent.at(-1).content[0];
  assert.equal(result.type, "tool_result");
  assert.deepEqual(result.content.map((b) => b.type), ["text", "image"], JSON.stringify(result));
  assert.deepEqual(result.content[1].source, image.source);
});

test("a reply with a long pause in it reaches the SDK whole (the signs of life between events are skipped)", { timeout: 20_000 }, async () => {
  const raw = await fetch(`http://127.0.0.1:${strata.port}/v1/messages`, {
    method: "POST", headers: { "content-type": "application/json", "x-api-key": userKey, "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ model: "slow", max_tokens: 100, stream: true, messages: [{ role: "user", content: "Wait." }] }) });
  assert.match(await raw.text(), /\n\n: keep-alive\n\n/, "a comment went out between two events during the pause");
  const inSession = client(userKey, { "X-Strata-Session": "claude-slow" });
  const reply = inSession.messages.stream({ model: "slow", max_tokens: 100, messages: [{ role: "user", content: "Take your time." }] });
  assert.equal((await reply.finalMessage()).content[0].text, "Hello, Alice.");
  const logged = await strata.call("GET", "/api/v1/sessions/claude-slow/messages", userKey);
  assert.deepEqual(logged.json.result.map((m) => m.role), ["user", "assistant"]);
});

test("a session idle for --commit-after-idle is committed into memory", async () => {
  const inSession = client(userKey, { "X-Strata-Session": "claude-idle" });
  await inSession.messages.create({ model: "fake-claude", max_tokens: 10, messages: [{ role: "user", content: "I like tea." }] });
  let archives = [];
  for (let i = 0; i < 150 && archives.length === 0; ++i) {  // Idle for 2 s; the worker looks every 2 s.
    await new Promise((r) => setTimeout(r, 100));
    archives = (await strata.call("GET", "/api/v1/sessions/claude-idle/status", userKey)).json.result.archives;
  }
  assert.equal(archives.length, 1, "committed once idle");
  assert.equal(archives[0].messages, 2);
  const current = await strata.call("GET", "/api/v1/sessions/claude-idle/messages", userKey);
  assert.deepEqual(current.json.result, []);
});

test("errors arrive as the SDK's own error classes", async () => {
  await assert.rejects(client(userKey).messages.create({ model: "broken", max_tokens: 10, messages: [{ role: "user", content: "x" }] }),
                       (e) => e instanceof Anthropic.RateLimitError && /Rate limit reached/.test(e.message) &&
                              header(e, "anthropic-ratelimit-requests-remaining") === "0");
  await assert.rejects(client("sk-strata-wrong").messages.create({ model: "fake-claude", max_tokens: 10,
                                                                   messages: [{ role: "user", content: "x" }] }),
                       (e) => e instanceof Anthropic.AuthenticationError);
  await assert.rejects(client(userKey).messages.create({ model: "fake-claude", max_tokens: 10, messages: [] }),
                       (e) => e instanceof Anthropic.BadRequestError && /messages/.test(e.message));
  // A block the format does not allow where it stands is named.
  await assert.rejects(client(userKey, { "X-Strata-Session": "claude-bad" }).messages.create({
    model: "fake-claude", max_tokens: 10,
    messages: [{ role: "user", content: [{ type: "tool_use", id: "t", name: "n", input: {} }] }] }),
                       (e) => e instanceof Anthropic.BadRequestError && /messages\[0\]\.content\[0\]/.test(e.message));
  // The upstream's own error event mid-stream reaches a session's client as it was sent, its type kept (the
  // server put its own "could not be read whole" api_error in its place).
  await assert.rejects(async () => {
    const stream = await client(userKey, { "X-Strata-Session": "claude-overloaded" }).messages.create({
      model: "overloaded", max_tokens: 10, stream: true, messages: [{ role: "user", content: "x" }] });
    for await (const _ of stream) { /* drain */ }
  }, (e) => e instanceof Anthropic.APIError && /Overloaded \(fake\)/.test(e.message) && /overloaded_error/.test(e.message)
            && !/read whole/.test(e.message));
  // Another user's session is not there.
  const bob = (await strata.call("POST", "/api/v1/admin/keys", rootKey, { user: "bob" })).json.result.key;
  await assert.rejects(client(bob, { "X-Strata-Session": "claude-1" }).messages.create({
    model: "fake-claude", max_tokens: 10, messages: [{ role: "user", content: "x" }] }),
                       (e) => e instanceof Anthropic.NotFoundError);
});
