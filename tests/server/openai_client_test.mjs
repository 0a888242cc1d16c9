// The official `openai` npm client, unmodified, against `strata serve`'s /v1/chat/completions, with a fake
// OpenAI-compatible upstream on loopback. Run by ctest (server_openai_client):
//   node openai_client_test.mjs PATH/TO/strata        (STRATA_NPM_CACHE holds the pinned npm packages)
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { fakeUpstream, header, requireNpm, startProxy, writeSlowly } from "./harness.mjs";

const OpenAI = requireNpm("openai").default ?? requireNpm("openai");

const strataBin = process.argv[2];
const rootKey = "root-key-for-the-openai-client-test";
const received = [];  // Bodies the fake upstream got.
let strata, serverPort, userKey, call;

const silentReplies = [];  // Upstream replies of model "silent", ended when the tests end.
// Resolved when the client of the "paused" test has the model's first words.
let firstWordsArrived;
const firstWordsSeen = new Promise((resolve) => { firstWordsArrived = resolve; });

// The fake upstream answers like OpenAI: streamed chunks (text, or a tool call split over chunks) or a whole
// completion; a request for model "broken" gets a 429 in OpenAI's error shape.
const upstreamHandler = fakeUpstream(received, { error: { message: "Rate limit reached", type: "rate_limit_error", code: "rate_limited" } }, (request, res) => {
  const last = request.messages[request.messages.length - 1];
  const wantsTool = Array.isArray(request.tools) && request.tools.length > 0 && last.role === "user";
  const usage = { prompt_tokens: 21, completion_tokens: 5, total_tokens: 26 };
  if (!request.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({
      id: "cmpl-1", object: "chat.completion", created: 1, model: request.model,
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "Whole reply." } }], usage,
    }));
    return;
  }
  if (request.model === "slowjson") {
    // An upstream that answers a streamed request with a whole JSON body, after a pause.
    res.writeHead(200, { "content-type": "application/json" });
    setTimeout(() => res.end(JSON.stringify({ id: "cmpl-8", object: "chat.completion", created: 1, model: "slowjson",
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "Whole." } }] })), 2_600);
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  if (request.model === "cut") {
    // A stream the upstream breaks after its first words (the connection dies mid-reply).
    res.write(`data: ${JSON.stringify({ id: "cmpl-3", object: "chat.completion.chunk", created: 1, model: "cut",
                                        choices: [{ index: 0, delta: { role: "assistant", content: "Hel" }, finish_reason: null }] })}\n\n`);
    setTimeout(() => res.socket.destroy(), 20);
    return;
  }
  if (request.model === "paused") {
    // The model writes its first words, then pauses (thinking) until the client has them: a proxy that held
    // them back until the next chunk would wait here for good (the test's timeout).
    res.write(`data: ${JSON.stringify({ id: "cmpl-5", object: "chat.completion.chunk", created: 1, model: "paused",
                                        choices: [{ index: 0, delta: { role: "assistant", content: "Hello" }, finish_reason: null }] })}\n\n`);
    firstWordsSeen.then(() => {
      res.write(`data: ${JSON.stringify({ id: "cmpl-5", object: "chat.completion.chunk", created: 1, model: "paused",
                                          choices: [{ index: 0, delta: { content: " again." }, finish_reason: "stop" }] })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
    return;
  }
  if (request.model === "silent") {
    // The model writes its first words, then nothing more until the test ends (a model reasoning at length).
    res.write(`data: ${JSON.stringify({ id: "cmpl-6", object: "chat.completion.chunk", created: 1, model: "silent",
                                        choices: [{ index: 0, delta: { role: "assistant", content: "Hmm" }, finish_reason: null }] })}\n\n`);
    silentReplies.push(res);
    return;
  }
  if (request.model === "slow") {
    // A pause longer than Strata's sign-of-life interval (2 s) between two chunks of one reply.
    const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: "cmpl-7", object: "chat.completion.chunk", created: 1,
                                                                       model: "slow", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.write(chunk({ role: "assistant", content: "Slow" }));
    setTimeout(() => { res.write(chunk({ content: " reply." }, "stop")); res.end("data: [DONE]\n\n"); }, 2_600);
    return;
  }
  if (request.model === "nodone") {
    // A stream the upstream ends cleanly, but before a finish_reason or [DONE]: a cut reply all the same.
    res.end(`data: ${JSON.stringify({ id: "cmpl-4", object: "chat.completion.chunk", created: 1, model: "nodone",
                                      choices: [{ index: 0, delta: { role: "assistant", content: "Partial ans" }, finish_reason: null }] })}\n\n`);
    return;
  }
  const chunk = (delta, finish = null, extra = {}) =>
    `data: ${JSON.stringify({ id: "cmpl-2", object: "chat.completion.chunk", created: 1, model: request.model,
                             choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;
  const parts = wantsTool
    ? [chunk({ role: "assistant", content: null, tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
       chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"city\":" } }] }),
       chunk({ tool_calls: [{ index: 0, function: { arguments: "\"Kyoto\"}" } }] }),
       chunk({}, "tool_calls")]
    : [chunk({ role: "assistant", content: "" }), chunk({ content: "Hello" }), chunk({ content: ", Alice." }), chunk({}, "stop")];
  // As OpenAI does: the usage chunk (no choices) only when the request asked for it.
  if (request.stream_options?.include_usage === true) {
    parts.push(`data: ${JSON.stringify({ id: "cmpl-2", object: "chat.completion.chunk", created: 1, model: request.model, choices: [], usage })}\n\n`);
  }
  parts.push("data: [DONE]\n\n");
  writeSlowly(res, parts);
});

let proxy;
before(async () => {
  proxy = await startProxy(strataBin, { handler: upstreamHandler, provider: "openai", model: "fake-model", rootKey });
  ({ strata, userKey } = proxy);
  serverPort = strata.port;
  call = strata.call;
});

after(() => { for (const res of silentReplies) res.destroy(); return proxy.stop(); });

test("without a session it is a transparent proxy (streamed and not)", async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey });
  const whole = await client.chat.completions.create({ model: "fake-model", messages: [{ role: "user", content: "Hi" }] });
  assert.equal(whole.choices[0].message.content, "Whole reply.");
  assert.equal(whole.usage.total_tokens, 26);
  const sent = received.at(-1);
  assert.equal(sent.headers.authorization, "Bearer upstream-secret", "the upstream's key, not the client's");
  assert.deepEqual(sent.body.messages, [{ role: "user", content: "Hi" }], "forwarded as it is");

  const stream = await client.chat.completions.create({ model: "fake-model", stream: true, messages: [{ role: "user", content: "Hi" }] });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(text, "Hello, Alice.");
});

test("with a session the client sends only its new turn; Strata logs both sides and assembles the history", async () => {
  const remembered = await call("POST", "/api/v1/fs/write", userKey,
                                { uri: "strata://user/alice/memories/profile/name", content: "The user's full name is Alice Liddell." });
  assert.equal(remembered.status, 200);
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey,
                              defaultHeaders: { "X-Strata-Session": "chat-1" } });
  const first = await client.chat.completions.create({
    model: "fake-model", stream: true,
    messages: [{ role: "system", content: "You are terse." }, { role: "user", content: "My name is Alice." }] });
  let text = "";
  const chunks = [];
  for await (const chunk of first) {
    chunks.push(chunk);
    text += chunk.choices[0]?.delta?.content ?? "";
  }
  assert.equal(text, "Hello, Alice.");
  // Strata asked for the reply's usage (the session's usage mark) and kept the chunk the client did not ask for.
  assert.equal(received.at(-1).body.stream_options?.include_usage, true);
  assert.ok(chunks.every((c) => c.choices.length > 0), "no usage-only chunk reached the client");
  const afterFirst = await call("GET", "/api/v1/sessions/chat-1/log", userKey);
  assert.equal(afterFirst.json.result.usage_tokens, 26, JSON.stringify(afterFirst.json.result));
  // A client that asks for usage gets it; several choices cannot be logged as one reply.
  const other = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey, maxRetries: 0,
                             defaultHeaders: { "X-Strata-Session": "chat-usage" } });
  const counted = await other.chat.completions.create({
    model: "fake-model", stream: true, stream_options: { include_usage: true },
    messages: [{ role: "user", content: "Count me." }] });
  let usage = null;
  for await (const chunk of counted) usage = chunk.usage ?? usage;
  assert.equal(usage?.total_tokens, 26);
  await assert.rejects(other.chat.completions.create({ model: "fake-model", n: 2, messages: [{ role: "user", content: "x" }] }),
                       (e) => e.status === 400 && /"n" must be 1 with X-Strata-Session/.test(e.message));
  const second = await client.chat.completions.create({
    model: "fake-model", messages: [{ role: "system", content: "You are terse." }, { role: "user", content: "What is my name?" }] });
  assert.equal(second.choices[0].message.content, "Whole reply.");
  const sent = received.at(-1).body.messages;
  assert.equal(sent[0].role, "system");
  assert.match(sent[0].content, /You are terse\./);
  assert.match(sent[0].content, /Alice Liddell/, "a relevant memory joins the system prompt");
  assert.deepEqual(sent.slice(1).map((m) => [m.role, m.content]),
                   [["user", "My name is Alice."], ["assistant", "Hello, Alice."], ["user", "What is my name?"]],
                   "the earlier turn comes from Strata's log");
  const session = await call("GET", "/api/v1/sessions/chat-1/messages", userKey);
  assert.equal(session.status, 200);
  assert.deepEqual(session.json.result.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
  assert.equal(session.json.result[3].content, "Whole reply.");
});

test("a client that sends the whole conversation every time has each message logged and sent once", async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey,
                              defaultHeaders: { "X-Strata-Session": "chat-resend" } });
  const history = [{ role: "system", content: "You are terse." }, { role: "user", content: "My name is Alice." }];
  const first = await client.chat.completions.create({ model: "fake-model", messages: history });
  history.push(first.choices[0].message, { role: "user", content: "What is my name?" });
  await client.chat.completions.create({ model: "fake-model", messages: history });
  const sent = received.at(-1).body.messages.map((m) => m.role);
  assert.equal(sent.filter((r) => r === "user").length, 2, `the first question went upstream once: ${sent}`);
  const log = await call("GET", "/api/v1/sessions/chat-resend/log", userKey);
  assert.deepEqual(log.json.result.messages.map((m) => m.role), ["user", "assistant", "user", "assistant"],
                   JSON.stringify(log.json.result.messages));
});

test("streamed tool calls reach the client whole and are logged", async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey,
                              defaultHeaders: { "X-Strata-Session": "chat-tools" } });
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather for a city",
                                                 parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  const stream = await client.chat.completions.create({ model: "fake-model", stream: true, tools,
                                                        messages: [{ role: "user", content: "Weather in Kyoto?" }] });
  let args = "";
  let name = "";
  for await (const chunk of stream) {
    for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
      name ||= call.function?.name ?? "";
      args += call.function?.arguments ?? "";
    }
  }
  assert.equal(name, "get_weather");
  assert.deepEqual(JSON.parse(args), { city: "Kyoto" });
  // The tool result comes back in the next turn, and the whole group goes upstream.
  const answer = await client.chat.completions.create({ model: "fake-model", tools,
    messages: [{ role: "tool", tool_call_id: "call_1", content: "Sunny, 21 C" }] });
  assert.equal(answer.choices[0].message.content, "Whole reply.");
  const sent = received.at(-1).body.messages;
  assert.deepEqual(sent.map((m) => m.role), ["user", "assistant", "tool"]);
  assert.equal(sent[1].tool_calls[0].id, "call_1");
  assert.equal(sent[2].tool_call_id, "call_1");
});

test("errors: the upstream's error reaches the client as an APIError; bad keys and another user's session are refused", async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey, maxRetries: 0 });
  await assert.rejects(client.chat.completions.create({ model: "broken", messages: [{ role: "user", content: "x" }] }),
                       (e) => e.status === 429 && /Rate limit reached/.test(e.message) &&
                              header(e, "retry-after") === "7" && header(e, "x-ratelimit-remaining-requests") === "0");
  // A refused request leaves the session as it was (the turn is logged only once the upstream takes it).
  const inSession = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey, maxRetries: 0,
                                 defaultHeaders: { "X-Strata-Session": "chat-refused" } });
  await assert.rejects(inSession.chat.completions.create({ model: "broken", messages: [{ role: "user", content: "lost?" }] }),
                       (e) => e.status === 429);
  const logged = await call("GET", "/api/v1/sessions/chat-refused/messages", userKey);
  assert.deepEqual(logged.json.result, []);
  const stranger = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: "sk-strata-wrong", maxRetries: 0 });
  await assert.rejects(stranger.chat.completions.create({ model: "fake-model", messages: [{ role: "user", content: "x" }] }),
                       (e) => e.status === 401);
  const bob = (await call("POST", "/api/v1/admin/keys", rootKey, { user: "bob" })).json.result.key;
  const bobClient = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: bob, maxRetries: 0,
                                 defaultHeaders: { "X-Strata-Session": "chat-1" } });
  await assert.rejects(bobClient.chat.completions.create({ model: "fake-model", messages: [{ role: "user", content: "x" }] }),
                       (e) => e.status === 404);
  await assert.rejects(client.chat.completions.create({ model: "fake-model", messages: [] }), (e) => e.status === 400);
});

test("images keep their detail, and audio and file parts are taken in a session", async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey, maxRetries: 0,
                              defaultHeaders: { "X-Strata-Session": "chat-media" } });
  const png = "data:image/png;base64,iVBORw0KGgo=";
  const reply = await client.chat.completions.create({ model: "fake-model", messages: [{ role: "user", content: [
    { type: "text", text: "What is in these?" },
    { type: "image_url", image_url: { url: png, detail: "high" } },
    { type: "input_audio", input_audio: { data: "UklGRg==", format: "wav" } },
    { type: "file", file: { file_id: "file-abc", filename: "lease.pdf" } }] }] });
  assert.equal(reply.choices[0].message.content, "Whole reply.");
  const parts = received.at(-1).body.messages.at(-1).content;
  assert.equal(parts[1].image_url.detail, "high", JSON.stringify(parts));
  assert.deepEqual(parts[2], { type: "input_audio", input_audio: { data: "UklGRg==", format: "wav" } });
  assert.deepEqual(parts[3], { type: "file", file: { file_id: "file-abc", filename: "lease.pdf" } });
  const logged = (await call("GET", "/api/v1/sessions/chat-media/messages", userKey)).json.result[0].content;
  assert.equal(logged[1].image_url.detail, "high", "the log keeps the detail for later turns");
});

test("a stream the upstream breaks is an error to the client, and its retry is logged once", async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey, maxRetries: 0,
                              defaultHeaders: { "X-Strata-Session": "chat-cut" } });
  const ask = (model) => client.chat.completions.create({ model, stream: true, messages: [{ role: "user", content: "What is 2+2?" }] });
  // It ended cleanly before, the client taking "Hel" for the whole reply.
  await assert.rejects(async () => {
    let text = "";
    for await (const chunk of await ask("cut")) text += chunk.choices[0]?.delta?.content ?? "";
    return text;
  }, (e) => e instanceof OpenAI.APIError && /stream broke/.test(e.message));
  let text = "";
  for await (const chunk of await ask("fake-model")) text += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(text, "Hello, Alice.");
  assert.equal(received.at(-1).body.messages.filter((m) => m.content === "What is 2+2?").length, 1, "sent once");
  const logged = (await call("GET", "/api/v1/sessions/chat-cut/messages", userKey)).json.result;
  assert.deepEqual(logged.map((m) => [m.role, m.content]), [["user", "What is 2+2?"], ["assistant", "Hello, Alice."]]);
});

test("the model's words reach the client while the model pauses", { timeout: 20_000 }, async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey,
                              defaultHeaders: { "X-Strata-Session": "chat-paused" } });
  const stream = await client.chat.completions.create({ model: "paused", stream: true,
                                                        messages: [{ role: "user", content: "Say hello." }] });
  let text = "";
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    if (text === "Hello") firstWordsArrived();  // Held back until the next chunk, this never came.
  }
  assert.equal(text, "Hello again.");
  const logged = (await call("GET", "/api/v1/sessions/chat-paused/messages", userKey)).json.result;
  assert.deepEqual(logged.map((m) => [m.role, m.content]), [["user", "Say hello."], ["assistant", "Hello again."]]);
});

test("a client that leaves while the model is silent frees its session within seconds", { timeout: 30_000 }, async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey, maxRetries: 0,
                              defaultHeaders: { "X-Strata-Session": "chat-left" } });
  const stream = await client.chat.completions.create({ model: "silent", stream: true,
                                                        messages: [{ role: "user", content: "Think hard." }] });
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta?.content === "Hmm") break;  // Leaves: the SDK aborts the request.
  }
  // The upstream never speaks again. The session was held until it did: every next turn was refused with a
  // 409 for as long as the model stayed silent. Now the server finds the client gone at its next sign of life
  // (every 2 s of silence), and a turn sent again a few seconds later is taken.
  let next;
  for (let attempt = 0; !next; ++attempt) {
    try {
      next = await client.chat.completions.create({ model: "fake-model",
                                                    messages: [{ role: "user", content: "Then say hello." }] });
    } catch (e) {
      if (!(e instanceof OpenAI.APIError && e.status === 409) || attempt >= 40) throw e;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  assert.equal(next.choices[0].message.content, "Whole reply.");
  const logged = (await call("GET", "/api/v1/sessions/chat-left/messages", userKey)).json.result;
  assert.deepEqual(logged.map((m) => [m.role, m.content]),
                   [["user", "Think hard."], ["user", "Then say hello."], ["assistant", "Whole reply."]],
                   "nothing of the left reply is logged");
});

test("a reply with a long pause in it reaches the client whole (the signs of life are skipped)", { timeout: 20_000 }, async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey,
                              defaultHeaders: { "X-Strata-Session": "chat-slow" } });
  const response = await client.chat.completions.create({ model: "slow", stream: true,
                                                          messages: [{ role: "user", content: "Take your time." }] }).asResponse();
  const raw = await response.text();
  assert.match(raw, /^: keep-alive$/m, "a sign of life went out during the pause");
  const text = raw.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "").join("");
  assert.equal(text, "Slow reply.");
  const again = await client.chat.completions.create({ model: "slow", stream: true,
                                                       messages: [{ role: "user", content: "Once more." }] });
  let sdkText = "";
  for await (const chunk of again) sdkText += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(sdkText, "Slow reply.", "the SDK skips the comments");
});

test("a body that is not a stream gets no signs of life, however long the upstream takes", { timeout: 20_000 }, async () => {
  const raw = await fetch(`http://127.0.0.1:${serverPort}/v1/chat/completions`, {
    method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${userKey}` },
    body: JSON.stringify({ model: "slowjson", stream: true, messages: [{ role: "user", content: "Hi." }] }) });
  const body = await raw.text();
  assert.equal(JSON.parse(body).choices[0].message.content, "Whole.", body);
  // In a session the whole body is the reply the session logs (it was decoded as a stream, and not logged).
  const inSession = await fetch(`http://127.0.0.1:${serverPort}/v1/chat/completions`, {
    method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${userKey}`, "X-Strata-Session": "chat-json" },
    body: JSON.stringify({ model: "slowjson", stream: true, messages: [{ role: "user", content: "Hi." }] }) });
  const sessionBody = await inSession.text();
  assert.equal(JSON.parse(sessionBody).choices[0].message.content, "Whole.", sessionBody);
  const logged = (await call("GET", "/api/v1/sessions/chat-json/messages", userKey)).json.result;
  assert.deepEqual(logged.map((m) => [m.role, m.content]), [["user", "Hi."], ["assistant", "Whole."]]);
});

test("a stream that ends before the upstream marks it complete is an error to the client, not a whole reply", async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${serverPort}/v1`, apiKey: userKey, maxRetries: 0,
                              defaultHeaders: { "X-Strata-Session": "chat-nodone" } });
  // It ended cleanly before: the client held "Partial ans" as the reply while the session logged none.
  let text = "";
  await assert.rejects(async () => {
    const stream = await client.chat.completions.create({ model: "nodone", stream: true,
                                                          messages: [{ role: "user", content: "Tell me all." }] });
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  }, (e) => e instanceof OpenAI.APIError && /could not be read whole/.test(e.message) && /chat-nodone/.test(e.message));
  // What came before the cut went out as it came (text is never held back from the client), the error after it.
  assert.equal(text, "Partial ans", "the reply's text as far as it came, then the error");
  const logged = (await call("GET", "/api/v1/sessions/chat-nodone/messages", userKey)).json.result;
  assert.deepEqual(logged.map((m) => m.role), ["user"], "no reply logged, and the client was told");
});

test("commits by policy wait for a reply without tool calls, and one session takes one turn at a time", async () => {
  // A second server that commits after every user turn.
  const eager = await startProxy(strataBin, { handler: upstreamHandler, provider: "openai", model: "fake-model",
                                             rootKey, extra: ["--commit-after-turns", "1"] });
  try {
    const c = new OpenAI({ baseURL: `http://127.0.0.1:${eager.strata.port}/v1`, apiKey: eager.userKey, maxRetries: 0,
                           defaultHeaders: { "X-Strata-Session": "loop" } });
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: {} } } }];
    const messages = async () => (await eager.strata.call("GET", "/api/v1/sessions/loop/messages", eager.userKey)).json.result;
    const stream = await c.chat.completions.create({ model: "fake-model", stream: true, tools,
                                                     messages: [{ role: "user", content: "Weather?" }] });
    for await (const _ of stream) { /* drain */ }
    assert.deepEqual((await messages()).map((m) => m.role), ["user", "assistant"], "the open tool call is not archived");
    await c.chat.completions.create({ model: "fake-model", tools,
                                      messages: [{ role: "tool", tool_call_id: "call_1", content: "Sunny" }] });
    // (The upstream is also the server's phase-2 model: the commit's summary request may come after.)
    const toolTurn = received.findLast((r) => r.body.messages.some((m) => m.role === "tool"));
    assert.deepEqual(toolTurn.body.messages.map((m) => m.role), ["user", "assistant", "tool"]);
    assert.deepEqual(await messages(), [], "committed once the group was closed by a reply without calls");
    // Two turns at once on one session: the second is refused instead of interleaving with the first.
    const slow = c.chat.completions.create({ model: "fake-model", stream: true, messages: [{ role: "user", content: "a" }] });
    const second = c.chat.completions.create({ model: "fake-model", messages: [{ role: "user", content: "b" }] });
    const outcomes = await Promise.allSettled([slow.then(async (s) => { for await (const _ of s) {} }), second]);
    assert.ok(outcomes.some((o) => o.status === "fulfilled"), "one of them runs");
    for (const o of outcomes) if (o.status === "rejected") assert.equal(o.reason.status, 409, String(o.reason));
  } finally {
    await eager.stop();
  }
});
