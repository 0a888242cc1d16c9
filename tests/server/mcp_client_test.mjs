// The official MCP TypeScript client (`@modelcontextprotocol/sdk`, pinned in scripts/lib.sh) against
// `strata mcp` (stdio) and `strata serve`'s /mcp (Streamable HTTP). Run by ctest (server_mcp_client):
//   node mcp_client_test.mjs PATH/TO/strata        (STRATA_NPM_CACHE holds the pinned npm packages)
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { requireNpm, startStrata } from "./harness.mjs";

const { Client } = requireNpm("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = requireNpm("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = requireNpm("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { McpError } = requireNpm("@modelcontextprotocol/sdk/types.js");

const strataBin = process.argv[2];
const work = fs.mkdtempSync(path.join(os.tmpdir(), "strata-mcp-"));
const data = path.join(work, "data");
let client;

// The structured result of a tool call that must succeed.
async function call(name, args = {}, options = {}) {
  const result = await client.callTool({ name, arguments: args }, undefined, options);
  assert.equal(result.isError, false, `${name}: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

before(async () => {
  client = new Client({ name: "strata-test", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: strataBin, args: ["mcp", "--data", data, "--user", "alice"],
                                                 stderr: "ignore" }));
});

after(async () => {
  await client.close();
  fs.rmSync(work, { recursive: true, force: true });
});

test("the handshake negotiates 2025-11-25 and lists every tool with a schema", async () => {
  assert.equal(client.getServerVersion().name, "strata");
  assert.ok(client.getServerCapabilities().tools);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ["add_resource", "commit_session", "count_tokens", "edit", "find", "forget", "get_context",
                           "glob", "grep", "health", "list", "read", "remember", "search", "tree", "write"]);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object", t.name);
    assert.ok(t.description.length > 20, t.name);
  }
  // A client may run a tool announced as read-only without asking: every tool that writes says it does.
  const writers = tools.filter((t) => !t.annotations.readOnlyHint).map((t) => t.name).sort();
  assert.deepEqual(writers, ["add_resource", "commit_session", "edit", "forget", "remember", "write"]);
  // Over read-only data none of them is offered.
  const reader = new Client({ name: "strata-test-reader", version: "1.0.0" });
  await reader.connect(new StdioClientTransport({ command: strataBin, args: ["mcp", "--data", data, "--user", "alice",
                                                                             "--read-only"], stderr: "ignore" }));
  const offered = (await reader.listTools()).tools.map((t) => t.name);
  await reader.close();
  assert.deepEqual(offered.filter((name) => writers.includes(name)), []);
  assert.ok(offered.includes("find") && offered.includes("read"), JSON.stringify(offered));
  assert.deepEqual(await client.ping(), {});
});

test("remember → find → read, and every other tool", async () => {
  const health = await call("health");
  assert.equal(health.user, "alice", "identity comes from the transport");
  // What the identity reaches: "default" names both a user (stdio without --user) and the open account.
  assert.deepEqual(health.reach, ["strata://user/alice", "strata://resources", "strata://agent"]);
  const remembered = await call("remember", { text: "Alice prefers green tea in the afternoon.", category: "preferences" });
  assert.ok(remembered.uri.startsWith("strata://user/alice/memories/preferences/"), JSON.stringify(remembered));
  await call("write", { uri: "strata://user/alice/memories/travel/kyoto", content: "Alice flies to Kyoto in April.\nShe stays near Gion." });
  // What HTTP's fs/write takes: a category, metadata, and overwrite false to refuse replacing a node.
  const noted = await call("write", { uri: "strata://user/alice/memories/notes/seat", content: "Aisle seats.",
                                      category: "preferences", metadata: { source: "test" } });
  assert.equal(noted.category, "preferences");
  const kept = await client.callTool({ name: "write", arguments: { uri: "strata://user/alice/memories/notes/seat",
                                                                   content: "Window seats.", overwrite: false } });
  assert.equal(kept.isError, true);
  assert.match(kept.content[0].text, /^already_exists/);
  await call("forget", { uri: "strata://user/alice/memories/notes/seat" });
  const found = await call("find", { query: "what does Alice like to drink", limit: 3 });
  assert.equal(found.hits[0].uri, remembered.uri);
  const read = await call("read", { uris: [found.hits[0].uri, "strata://user/alice/memories/travel/kyoto"], level: 2 });
  assert.match(read.results[0].content, /green tea/);
  assert.match(read.results[1].content, /Gion/);
  const budgeted = await call("search", { query: "Kyoto trip", token_budget: 1 });
  assert.deepEqual(budgeted.hits, [], "nothing fits one token");
  assert.ok((await call("list", { uri: "strata://user/alice/memories" })).nodes.length >= 2);
  const cut = await call("list", { uri: "strata://user/alice/memories", limit: 1 });
  assert.equal(cut.nodes.length, 1);
  assert.equal(cut.truncated, true, "a listing cut at its limit says so");
  assert.ok((await call("tree")).nodes.some((n) => n.uri.endsWith("/travel/kyoto")));
  assert.equal((await call("grep", { pattern: "gion", ignore_case: true })).matches.length, 1);
  // Glob gives the node records HTTP's glob gives.
  const globbed = (await call("glob", { pattern: "memories/travel/*" })).nodes;
  assert.deepEqual(globbed.map((n) => n.uri), ["strata://user/alice/memories/travel/kyoto"]);
  assert.equal(globbed[0].is_dir, false);
  assert.equal(typeof globbed[0].abstract, "string");
  assert.equal((await call("find", { query: "Kyoto trip", type: "skill" })).hits.length, 0, "find filters by type");
  assert.equal((await call("count_tokens", { text: "hello world", encoding: "chars" })).encoding, "chars");
  assert.equal((await call("edit", { uri: "strata://user/alice/memories/travel/kyoto", old_text: "April", new_text: "May" })).replaced, 1);
  assert.match((await call("read", { uri: "strata://user/alice/memories/travel/kyoto" })).results[0].content, /in May/);
  assert.equal((await call("count_tokens", { text: "hello world" })).tokens, 2);
  const conversation = await call("remember", { messages: [{ role: "user", content: "I moved to Osaka." },
                                                            { role: "assistant", content: "Noted." }] });
  assert.ok(conversation.session && conversation.task_id > 0);
  const context = await call("get_context", { session: conversation.session, max_context_tokens: 4000 });
  assert.equal(context.budget, 3000);
  assert.equal((await call("forget", { uri: "strata://user/alice/memories/travel/kyoto" })).removed, 1);
  // A failing tool is a result the model can read, not a protocol error.
  const failed = await client.callTool({ name: "commit_session", arguments: { session: conversation.session } });
  assert.equal(failed.isError, true);
  assert.match(failed.content[0].text, /no messages to commit/);
  // Another user's scope is out of reach whatever the arguments say.
  const denied = await client.callTool({ name: "read", arguments: { uri: "strata://user/bob/memories/x" } });
  assert.equal(denied.isError, true);
  assert.match(denied.content[0].text, /permission_denied/);
});

test("resources and prompts", async () => {
  const { resources } = await client.listResources();
  const tea = resources.find((r) => r.uri.includes("/preferences/"));
  assert.ok(tea, JSON.stringify(resources));
  const full = await client.readResource({ uri: tea.uri });
  assert.match(full.contents[0].text, /green tea/);
  const abstract = await client.readResource({ uri: `${tea.uri}?level=0` });
  assert.ok(abstract.contents[0].text.length <= full.contents[0].text.length);
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.ok(resourceTemplates.some((t) => t.uriTemplate === "strata://{+path}?level={level}"));
  await assert.rejects(client.readResource({ uri: "strata://user/bob/memories/x" }), McpError);
  // Every leaf is listed, a page at a time: at most 500 (directories counted) were, with no cursor, and the
  // scopes after the first 500 nodes not at all.
  for (let i = 0; i < 620; i++) await call("write", { uri: `strata://resources/many/a/n${i}`, content: `note ${i}` });
  await call("write", { uri: "strata://resources/many/z/last", content: "the last scope's note" });
  // A name holding "?level=0" is its own resource, not another node's abstract.
  await call("write", { uri: "strata://resources/amb/q?level=0", content: "the node named q?level=0" });
  await call("write", { uri: "strata://resources/amb/q", content: "the plain q node" });
  const listed = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listResources(cursor === undefined ? {} : { cursor });
    listed.push(...page.resources.map((r) => r.uri));
    cursor = page.nextCursor;
    pages++;
  } while (cursor !== undefined && pages < 10);
  assert.ok(pages >= 2, `pages: ${pages}`);
  assert.equal(new Set(listed).size, listed.length, "no resource listed twice");
  assert.equal(listed.filter((u) => u.startsWith("strata://resources/many/a/")).length, 620);
  assert.ok(listed.includes("strata://resources/many/z/last"));
  assert.ok(listed.includes(tea.uri));
  const odd = "strata://resources/amb/q%3Flevel=0";
  assert.ok(listed.includes(odd), JSON.stringify(listed.filter((u) => u.includes("/amb/"))));
  assert.equal((await client.readResource({ uri: odd })).contents[0].text, "the node named q?level=0");
  assert.equal((await client.readResource({ uri: "strata://resources/amb/q?level=2" })).contents[0].text, "the plain q node");
  await assert.rejects(client.listResources({ cursor: "9 strata://nowhere" }), McpError);
  await assert.rejects(client.readResource({ uri: "strata://resources/amb/q?lvl=0" }), McpError);
  const { prompts } = await client.listPrompts();
  const summarize = prompts.find((p) => p.name === "session.summarize");
  assert.ok(summarize, JSON.stringify(prompts.map((p) => p.name)));
  assert.ok(summarize.arguments.some((a) => a.name === "transcript" && a.required));
  const rendered = await client.getPrompt({ name: "session.summarize", arguments: { transcript: "user: I moved to Osaka." } });
  assert.equal(rendered.messages[0].role, "user");
  assert.match(rendered.messages[0].content.text, /moved to Osaka/);
  await assert.rejects(client.getPrompt({ name: "session.summarize", arguments: {} }),
                       (e) => e instanceof McpError && /transcript/.test(e.message), "a missing required argument is named");
  await assert.rejects(client.getPrompt({ name: "no-such-prompt" }), McpError);
});

test("progress and cancellation", async () => {
  // The SDK drops a progress notification that reaches it in the same read as the result (it forgets the
  // token on the result before its notification handler runs), so whether `seen` fills is timing; the order
  // and tokens on the wire are checked with raw lines below.
  await call("find", { query: "tea" }, { onprogress: () => {} });
  const controller = new AbortController();
  const pending = client.callTool({ name: "find", arguments: { query: "Osaka" } }, undefined, { signal: controller.signal });
  controller.abort("changed my mind");
  await assert.rejects(pending);
  assert.deepEqual(await client.ping(), {}, "the server lives on after a cancellation");
});

test("bad requests are JSON-RPC errors and never kill the server", async () => {
  await assert.rejects(client.callTool({ name: "no_such_tool", arguments: {} }),
                       (e) => e instanceof McpError && e.code === -32602 && /unknown tool/.test(e.message));
  // A known tool's bad arguments are its result, which a model reads and corrects (SEP-1303, MCP
  // 2025-11-25), whether the schema or the engine refuses them.
  const wrongType = await client.callTool({ name: "find", arguments: { query: 42 } });
  assert.equal(wrongType.isError, true);
  assert.match(wrongType.content[0].text, /^invalid_argument: invalid arguments for find: \$\.query: expected string/);
  const extra = await client.callTool({ name: "find", arguments: { query: "x", extra: 1 } });
  assert.equal(extra.isError, true);
  assert.match(extra.content[0].text, /extra/);
  const overLimit = await client.callTool({ name: "find", arguments: { query: "x", limit: 1001 } });
  assert.equal(overLimit.isError, true);
  assert.match(overLimit.content[0].text, /limit/);
  // Raw lines no SDK would send, to a second server process.
  const raw = spawn(strataBin, ["mcp", "--data", data, "--user", "alice"], { stdio: ["pipe", "pipe", "ignore"] });
  let out = "";
  raw.stdout.on("data", (d) => (out += d));
  const lines = ["not json", "[1, 2]", '{"jsonrpc": "1.0", "id": 1, "method": "ping"}', '{"jsonrpc": "2.0", "id": {}, "method": "ping"}',
                 '{"jsonrpc": "2.0", "id": 7, "method": "no/such/method"}', `{"jsonrpc": "2.0", "id": 8, "method": "ping", "pad": "${"x".repeat(5 << 20)}"}`,
                 '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": []}', '{"jsonrpc": "2.0", "id": 10, "method": "ping"}',
                 '{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "health", "arguments": {}, "_meta": {"progressToken": "p-11"}}}'];
  raw.stdin.end(lines.join("\n") + "\n");
  const code = await new Promise((r) => raw.on("exit", r));
  assert.equal(code, 0);
  const replies = out.trim().split("\n").map((l) => JSON.parse(l));
  const byId = (id) => replies.find((r) => r.id === id);
  assert.equal(replies.filter((r) => r.error?.code === -32700).length, 1, "not json: parse error");
  assert.ok(replies.some((r) => r.error?.code === -32600 && /batches/.test(r.error.message)));
  assert.ok(replies.some((r) => r.error?.code === -32600 && /JSON-RPC 2.0/.test(r.error.message)));
  assert.ok(replies.some((r) => r.error?.code === -32600 && /"id"/.test(r.error.message)));
  assert.equal(byId(7).error.code, -32601);
  assert.ok(replies.some((r) => r.error?.code === -32600 && /bytes/.test(r.error.message)), "oversized message");
  assert.equal(byId(9).error.code, -32602);
  assert.deepEqual(byId(10).result, {}, "and it still answers");
  // Progress for a request with a progress token: its notifications carry the token and come before its result.
  const progress = replies.map((r, i) => [r, i]).filter(([r]) => r.method === "notifications/progress");
  assert.deepEqual(progress.map(([r]) => [r.params.progressToken, r.params.progress]), [["p-11", 0], ["p-11", 1]]);
  const resultAt = replies.findIndex((r) => r.id === 11);
  assert.equal(replies[resultAt].result.isError, false);
  assert.ok(progress.every(([, i]) => i < resultAt), "progress precedes the result");
});

test("Streamable HTTP on strata serve: the same loop with keys, isolation, and HTTP-level errors", async () => {
  const rootKey = "root-key-for-the-mcp-client-test";
  const strata = await startStrata(strataBin, [], { STRATA_ROOT_KEY: rootKey });
  try {
    const issue = async (user) => (await strata.call("POST", "/api/v1/admin/keys", rootKey, { user })).json.result.key;
    const alice = await issue("alice");
    const bob = await issue("bob");
    const connect = async (key) => {
      const c = new Client({ name: "strata-http-test", version: "1.0.0" });
      await c.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${strata.port}/mcp`),
                                                        { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
      return c;
    };
    const a = await connect(alice);
    assert.equal(a.getServerVersion().name, "strata");
    const r = await a.callTool({ name: "remember", arguments: { text: "Alice keeps her passport in the blue folder." } });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    const found = await a.callTool({ name: "find", arguments: { query: "where is the passport" } });
    const uri = found.structuredContent.hits[0].uri;
    assert.ok(uri.startsWith("strata://user/alice/"), uri);
    const read = await a.callTool({ name: "read", arguments: { uri } });
    assert.match(read.structuredContent.results[0].content, /blue folder/);
    assert.equal((await a.callTool({ name: "health", arguments: {} })).structuredContent.user, "alice");
    // Skills are prompts.
    const skill = "---\nname: deploy\ndescription: How to deploy safely\n---\nRun the canary first.\n";
    assert.equal((await strata.call("POST", "/api/v1/skills", alice, { agent: "coder", skill_md: skill })).status, 200);
    assert.ok((await a.listPrompts()).prompts.some((p) => p.name === "skill:coder/deploy"));
    const prompt = await a.getPrompt({ name: "skill:coder/deploy" });
    assert.match(prompt.messages[0].content.text, /Run the canary first/);
    await assert.rejects(a.callTool({ name: "no_such_tool", arguments: {} }), (e) => e instanceof McpError && e.code === -32602);
    // Bob's key reaches only bob: alice's memory is neither found nor read.
    const b = await connect(bob);
    const bobFinds = await b.callTool({ name: "find", arguments: { query: "passport" } });
    assert.deepEqual(bobFinds.structuredContent.hits, []);
    const bobReads = await b.callTool({ name: "read", arguments: { uri } });
    assert.equal(bobReads.isError, true);
    await a.close();
    await b.close();
    // Without a key nothing connects; raw HTTP errors are JSON-RPC where the body is the problem.
    await assert.rejects(connect("sk-strata-wrong"));
    const post = (body, headers = {}) => fetch(`http://127.0.0.1:${strata.port}/mcp`, {
      method: "POST", body, headers: { authorization: `Bearer ${alice}`, "content-type": "application/json",
                                       accept: "application/json, text/event-stream", ...headers } });
    const bad = await post("{not json");
    assert.equal(bad.status, 200);
    assert.equal((await bad.json()).error.code, -32700);
    const note = await post(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
    assert.equal(note.status, 202);
    assert.equal((await fetch(`http://127.0.0.1:${strata.port}/mcp`, { headers: { authorization: `Bearer ${alice}` } })).status, 405);
    const foreign = await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }), { origin: "http://evil.example" });
    assert.equal(foreign.status, 403, "a cross-origin page cannot drive the server");
    const oldVersion = await post(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }), { "mcp-protocol-version": "1999-01-01" });
    assert.equal(oldVersion.status, 400);
  } finally {
    await strata.stop();
  }
});
