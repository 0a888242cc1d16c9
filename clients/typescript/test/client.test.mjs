// @strata/client against a live `strata serve` (keys on, phase 2 with a scripted model): the store,
// retrieval, sessions and their phase 2 followed through the task event stream, memories, tokens, prompts,
// skills, keys, and every kind of failure as a StrataError. Run by test/run.sh:
//   STRATA_BIN=PATH/TO/strata STRATA_CLIENT_DIST=DIR node --test client.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { startStrata } from "../../../tests/server/harness.mjs";

const { StrataClient, StrataError, NotFoundError, InvalidArgumentError, UnavailableError, isStrataError } =
  await import(pathToFileURL(path.join(process.env.STRATA_CLIENT_DIST, "index.js")).href);

const kRootKey = "root-key-of-the-typescript-client-test";
// Phase 2 asks the model for a summary, then for the memories in the archive; a memory with no similar one
// needs no dedup call. Two commits: the first extracts a preference, the second nothing.
const kScript = {
  replies: [
    { text: "Alice asked for tea and talked about her Kyoto trip." },
    { text: JSON.stringify({ memories: [{ category: "preferences", key: "drink",
                                          content: "Alice prefers green tea in the afternoon." }] }) },
    { text: "Alice asked about trains to Osaka." },
    { text: JSON.stringify({ memories: [] }) },
  ],
};

let server;
let scratch;
let baseUrl;
let root;   // The root key.
let alice;  // A user key of alice.
let bob;    // A user key of bob.

before(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), "strata-ts-test-"));
  fs.writeFileSync(path.join(scratch, "script.json"), JSON.stringify(kScript));
  server = await startStrata(process.env.STRATA_BIN,
                             ["--provider", "scripted", "--script", path.join(scratch, "script.json")],
                             { STRATA_ROOT_KEY: kRootKey });
  baseUrl = `http://127.0.0.1:${server.port}`;
  root = new StrataClient({ baseUrl, apiKey: kRootKey });
  alice = new StrataClient({ baseUrl, apiKey: (await root.issueKey({ user: "alice" })).key });
  bob = new StrataClient({ baseUrl, apiKey: (await root.issueKey({ user: "bob" })).key });
});

after(async () => {
  await server?.stop();
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

// Asserts that `promise` rejects with a StrataError of `code` and HTTP `status` whose message matches
// `message`; returns the error.
async function rejectsWith(promise, code, status, message) {
  let caught;
  await assert.rejects(promise, (error) => {
    caught = error;
    return true;
  });
  assert.ok(caught instanceof StrataError, `not a StrataError: ${caught?.stack ?? caught}`);
  assert.equal(caught.code, code, caught.message);
  const className = code.split("_").map((w) => w[0].toUpperCase() + w.slice(1)).join("") + "Error";
  assert.equal(caught.name, className, "the code's own class");
  assert.equal(caught.status, status, caught.message);
  if (message) assert.match(caught.message, message);
  return caught;
}

test("health and readiness answer without a key", async () => {
  const anonymous = new StrataClient({ baseUrl: `${baseUrl}/` });
  assert.deepEqual(await anonymous.health(), { alive: true });
  assert.deepEqual(await anonymous.ready(), { ready: true });
});

test("the store: write, read, ls, tree, stat, mkdir, link, glob, grep, mv, export, import, rm", async () => {
  const kyoto = "strata://user/alice/notes/kyoto";
  const written = await alice.write(kyoto, "Alice flies to Kyoto in April.\nShe stays near Gion.",
                                    { metadata: { source: "test" } });
  assert.equal(written.uri, kyoto);
  assert.equal(written.is_dir, false);
  assert.equal(written.type, "resource");
  assert.equal(written.abstract, "Alice flies to Kyoto in April.");
  assert.equal(typeof written.created_ms, "number");

  assert.equal(await alice.read(kyoto), "Alice flies to Kyoto in April.\nShe stays near Gion.");
  assert.equal(await alice.read(kyoto, { level: 0 }), "Alice flies to Kyoto in April.");

  assert.deepEqual((await alice.ls("strata://user/alice/notes")).map((n) => n.uri), [kyoto]);
  const own = await alice.ls();
  assert.ok(own.length > 0 && own.every((n) => n.uri.startsWith("strata://user/alice/")),
            "ls without a URI: the key's own scope");
  assert.ok((await alice.ls("strata://user/alice", { recursive: true })).some((n) => n.uri === kyoto));
  assert.ok((await alice.tree("strata://user/alice")).some((n) => n.uri === kyoto));
  const cut = await alice.tree("strata://user/alice", { limit: 1 });
  assert.equal(cut.length, 1);
  assert.equal(cut.truncated, true, "the limit cut the listing, and it says so");
  assert.equal(JSON.stringify(cut), JSON.stringify([...cut]), "truncated stays out of the JSON");
  assert.equal((await alice.ls("strata://user/alice/notes", { limit: 5 })).truncated, false);
  assert.equal((await alice.ls("strata://user/alice/notes")).truncated, false);

  const detail = await alice.stat(kyoto);
  assert.equal(detail.overview, "Alice flies to Kyoto in April.\nShe stays near Gion.");
  assert.deepEqual(detail.metadata, { source: "test" });
  assert.deepEqual(detail.relations, []);

  const chats = await alice.mkdir("strata://user/alice/chats", { ordered: true });
  assert.equal(chats.is_dir, true);
  assert.deepEqual((await alice.stat(chats.uri)).metadata, { ordered: true });

  assert.deepEqual(await alice.link(kyoto, chats.uri, { reason: "planned in chat" }),
                   { from: kyoto, to: chats.uri, reason: "planned in chat" });
  assert.deepEqual((await alice.stat(kyoto)).relations, [{ from: kyoto, to: chats.uri, reason: "planned in chat" }]);
  await alice.unlink(kyoto, chats.uri);
  assert.deepEqual((await alice.stat(kyoto)).relations, []);

  assert.deepEqual((await alice.glob("**/kyoto")).map((n) => n.uri), [kyoto]);
  assert.deepEqual((await alice.glob("notes/*", "strata://user/alice")).map((n) => n.uri), [kyoto]);
  assert.deepEqual(await alice.grep("gion", undefined, { ignoreCase: true }),
                   [{ uri: kyoto, line: 2, text: "She stays near Gion.", superseded: false }]);
  assert.deepEqual(await alice.grep("gion"), [], "case-sensitive by default");

  const moved = "strata://user/alice/notes/kyoto-trip";
  assert.deepEqual(await alice.mv(kyoto, moved), { from: kyoto, to: moved });
  assert.match(await alice.read(moved), /Gion/);
  await rejectsWith(alice.read(kyoto), "not_found", 404, /does not exist/);

  const tree = await alice.exportFiles("strata://user/alice/notes");
  assert.equal(tree.leaves, 1);
  assert.ok(tree.files.some((f) => f.path === "kyoto-trip.md" && f.content.includes("Gion")), JSON.stringify(tree.files));
  const imported = await alice.importFiles(tree.files, "strata://user/alice/copy");
  assert.equal(imported.leaves, 1);
  assert.deepEqual(imported.skipped, []);
  assert.match(await alice.read("strata://user/alice/copy/kyoto-trip"), /Gion/);

  assert.deepEqual(await alice.rm("strata://user/alice/copy/kyoto-trip"), { removed: 1 });
  await rejectsWith(alice.rm("strata://user/alice/notes"), "failed_precondition", 409);
  assert.ok((await alice.rm("strata://user/alice/notes", { recursive: true })).removed >= 2);
  await alice.rm("strata://user/alice/copy", { recursive: true });
  await alice.rm(chats.uri);
});

test("find: hits with their tokens, under, limit, a token budget, a session's follow-up", async () => {
  await alice.write("strata://user/alice/travel/hotel", "Alice's Kyoto hotel is near Gion, by the river.");
  await alice.write("strata://user/alice/travel/flight", "Alice's flight to Osaka leaves at nine.");
  await alice.write("strata://resources/guides/kyoto", "A guide to Kyoto's temples.");

  const found = await alice.find("Kyoto hotel");
  assert.ok(found.hits.length >= 2, JSON.stringify(found));
  const [best] = found.hits;
  assert.equal(best.uri, "strata://user/alice/travel/hotel");
  assert.equal(typeof best.score, "number");
  assert.equal(best.abstract, "Alice's Kyoto hotel is near Gion, by the river.");
  assert.match(best.reason, /lexical/);
  assert.ok(best.tokens > 0);
  assert.equal(found.tokens, found.hits.reduce((sum, h) => sum + h.tokens, 0));
  assert.ok(found.hits.some((h) => h.uri === "strata://resources/guides/kyoto"), "shared resources rank with the user's own");

  const under = await alice.find("Kyoto", { under: "strata://resources" });
  assert.ok(under.hits.length > 0 && under.hits.every((h) => h.uri.startsWith("strata://resources/")), JSON.stringify(under));
  assert.equal((await alice.find("Kyoto", { limit: 1 })).hits.length, 1);
  // The type filter every front end takes: resources only (no memory or skill), then none (no skill mentions Kyoto).
  const resources = await alice.find("Kyoto", { type: "resource" });
  assert.ok(resources.hits.some((h) => h.uri === "strata://resources/guides/kyoto"), JSON.stringify(resources));
  assert.ok(resources.hits.every((h) => !/\/(memories|skills)\//.test(h.uri)), JSON.stringify(resources));
  assert.deepEqual((await alice.find("Kyoto", { type: "skill" })).hits, []);

  assert.deepEqual((await alice.find("Kyoto hotel", { tokenBudget: 1 })).hits, [], "nothing fits one token");
  const budgeted = await alice.find("Kyoto hotel", { tokenBudget: best.tokens });
  assert.ok(budgeted.hits.length >= 1 && budgeted.tokens <= best.tokens, JSON.stringify(budgeted));

  await alice.createSession({ id: "trip" });
  await alice.addMessages("trip", { role: "user", content: "Where is my Kyoto hotel?" });
  const followUp = await alice.find("and the river?", { session: "trip" });
  assert.match(followUp.searched, /Kyoto hotel/);
  assert.equal(followUp.hits[0].uri, "strata://user/alice/travel/hotel");
  await alice.deleteSession("trip");
  await alice.rm("strata://user/alice/travel", { recursive: true });
  await root.rm("strata://resources/guides", { recursive: true });
});

test("addResources: documents become chunked resources, unchanged ones are not written again", async () => {
  const files = [{ path: "guide/plant.md", content: "# Planting\n\nPlant the cherry trees in March.\n" },
                 { path: "blob.bin", content: Buffer.from([0, 1, 2, 3]).toString("base64"), encoding: "base64" }];
  const first = await alice.addResources("strata://user/alice/garden", files);
  assert.deepEqual(first.added, ["guide/plant.md"]);
  assert.deepEqual(first.skipped, [{ path: "blob.bin", reason: "binary" }]);
  const found = await alice.find("when are cherry trees planted", { under: "strata://user/alice/garden" });
  assert.ok(found.hits[0].uri.startsWith("strata://user/alice/garden/guide/plant.md/"), JSON.stringify(found));
  const again = await alice.addResources("strata://user/alice/garden", files.slice(0, 1));
  assert.deepEqual(again.unchanged, ["guide/plant.md"]);
  assert.equal(again.chunks, 0);
  await rejectsWith(alice.addResources("strata://user/bob/garden", files), "permission_denied", 403);
  await alice.rm("strata://user/alice/garden", { recursive: true });
});

test("importSessions: a chat export becomes the user's sessions once, with its title and times", async () => {
  const content = '{"messages": [{"role": "user", "content": "Book the Kyoto ryokan."}, ' +
                  '{"role": "assistant", "content": "Booked for April."}]}\n';
  const first = await alice.importSessions("openai-jsonl", content, { name: "chats.jsonl" });
  assert.equal(first.imported.length, 1, JSON.stringify(first));
  assert.equal(first.imported[0].messages, 2);
  const id = first.imported[0].session;
  const session = await alice.getSession(id);
  assert.equal(session.user, "alice");
  assert.equal(session.source, first.imported[0].source);
  const again = await alice.importSessions("openai-jsonl", content);
  assert.deepEqual(again.unchanged, [id]);
  assert.deepEqual(again.imported, []);
  await rejectsWith(alice.importSessions("openai-jsonl", content, { user: "bob" }), "permission_denied", 403);
  await rejectsWith(alice.importSessions("bard", content), "invalid_argument", 400);
  await alice.deleteSession(id);
});

test("a session: messages, context, commit, phase 2 followed to the end, the memory found and audited", async () => {
  const created = await alice.createSession({ id: "tea", agent: "barista" });
  assert.equal(created.id, "tea");
  assert.equal(created.user, "alice", "a user key creates its own user's session");
  assert.equal(created.agent, "barista");

  const messages = [
    { role: "user", content: "I'd like green tea in the afternoon, please." },
    { role: "assistant", content: null,
      tool_calls: [{ type: "function", id: "c1", function: { name: "menu", arguments: "{}" } }] },
    { role: "tool", content: "green tea, black tea", tool_call_id: "c1" },
    { role: "assistant", content: "Green tea it is." },
  ];
  const session = await alice.addMessages("tea", messages);
  assert.equal(session.stats.messages, 4);
  assert.equal((await alice.getSession("tea")).messages.length, 4);
  assert.deepEqual((await alice.messages("tea"))[2], messages[2]);
  assert.ok((await alice.listSessions()).some((s) => s.id === "tea"));
  assert.deepEqual(await bob.listSessions(), [], "bob does not see alice's sessions");

  const context = await alice.context("tea", { maxContextTokens: 2000, reserveForReply: 500 });
  assert.equal(context.session, "tea");
  assert.equal(context.window, 2000);
  assert.equal(context.budget, 1500);
  assert.equal(context.encoding, "o200k_base");
  assert.equal(context.messages.length, 4);
  assert.ok(context.messages.every((m) => m.included && m.tokens > 0));
  const { reply, ...sent } = context.sections;
  assert.equal(reply, 500);
  assert.equal(Object.values(sent).reduce((a, b) => a + b, 0), context.total_tokens);
  const counted = await alice.countTokens(messages);
  assert.equal(counted.tokens, context.sections.history, "the history counted as countTokens counts messages");

  const committed = await alice.commit("tea");
  assert.equal(committed.archive, 1);
  assert.equal(committed.messages, 4);
  assert.equal(typeof committed.task_id, "number");
  const states = [];
  for await (const task of alice.taskEvents(committed.task_id)) {
    assert.equal(task.id, committed.task_id);
    assert.equal(task.session, "tea");
    states.push(task.state);
  }
  assert.equal(states.at(-1), "done", `states: ${states}`);

  const status = await alice.sessionStatus("tea");
  assert.deepEqual(status.archives.map((a) => [a.archive, a.state]), [[1, "done"]]);
  assert.deepEqual(status.jobs.map((j) => j.id), [committed.task_id]);
  assert.equal((await alice.task(committed.task_id)).state, "done");
  assert.deepEqual((await alice.tasks({ session: "tea" })).map((t) => t.id), [committed.task_id]);
  assert.ok((await alice.tasks({ state: "done" })).some((t) => t.id === committed.task_id));
  assert.deepEqual(await alice.messages("tea"), [], "the commit moved the messages into the archive");

  const memory = "strata://user/alice/memories/preferences/drink";
  const recalled = await alice.find("what does Alice like to drink");
  assert.equal(recalled.hits[0].uri, memory, JSON.stringify(recalled));
  assert.match(await alice.read(memory), /green tea/);
  const [created_] = await alice.history(memory);
  assert.equal(created_.action, "create");
  assert.equal(created_.session, "tea");
  assert.match(created_.after, /green tea/);
  assert.ok((await alice.changes()).some((e) => e.uri === memory));
  assert.deepEqual((await alice.changes({ under: "strata://user/alice/memories", limit: 1 })).map((e) => e.uri), [memory]);

  // The second commit, waited for: it resolves with the finished task.
  await alice.addMessages("tea", [{ role: "user", content: "Is there a train to Osaka?" },
                                  { role: "assistant", content: "Hourly." }]);
  const waited = await alice.commit("tea", { wait: true });
  assert.equal(waited.archive, 2);
  assert.equal(waited.task.id, waited.task_id);
  assert.equal(waited.task.state, "done");
  assert.equal(waited.state, "done");
  assert.equal(waited.error, undefined);
  // With the archive's diff, as the in-process Engine's commit with wait returns it.
  assert.deepEqual(waited.diff, await alice.archiveDiff("tea", 2));
  assert.equal(waited.diff.session, "tea");
  assert.equal(waited.diff.archive, 2);
  assert.equal(typeof waited.diff.summary, "string");
  assert.ok(Array.isArray(waited.diff.changes));
  const first = await alice.archiveDiff("tea", 1);
  assert.deepEqual(first.changes.map((c) => [c.action, c.uri]), [["create", memory]]);
  await rejectsWith(alice.archiveDiff("tea", 3), "not_found", 404);
  await rejectsWith(bob.archiveDiff("tea", 1), "not_found", 404);
  assert.deepEqual(await alice.retry("tea"), { session: "tea", requeued: 0 });
  // Everything of the account, as `strata session retry` without an id: the root key's alone.
  await rejectsWith(alice.retryAll(), "permission_denied", 403, /root key/);
  assert.deepEqual(await root.retryAll(), { requeued: 0 });

  // Bob cannot see any of it: another user's session and task are answered as missing.
  await rejectsWith(bob.getSession("tea"), "not_found", 404, /^no session tea$/);
  await rejectsWith(bob.task(committed.task_id), "not_found", 404);
  await rejectsWith(bob.find("tea", { session: "tea" }), "not_found", 404, /no session tea/);
  assert.deepEqual(await bob.tasks(), []);

  assert.deepEqual(await alice.deleteSession("tea"), { deleted: "tea" });
  await rejectsWith(alice.sessionStatus("tea"), "not_found", 404);
});

test("a session's log: checkpoint, revert, fork, system prompt, compact", async () => {
  await alice.createSession({ id: "draft" });
  await alice.addMessages("draft", { role: "user", content: "First question." });
  const cp = await alice.checkpoint("draft");
  assert.deepEqual({ ...cp, tag: undefined }, { session: "draft", checkpoint: 0, messages: 1, tag: undefined });
  assert.match(cp.tag, /^[0-9a-f]{32}$/);
  await alice.addMessages("draft", [{ role: "assistant", content: "First answer." }]);
  assert.deepEqual(await alice.setSystemPrompt("draft", "Be brief."), { session: "draft", system_prompt: "Be brief." });

  assert.deepEqual(await alice.recordUsage("draft", 93), { session: "draft", tokens: 93 });
  const log = await alice.sessionLog("draft");
  assert.equal(log.system_prompt, "Be brief.");
  assert.equal(log.messages.length, 2);
  assert.deepEqual(log.checkpoints, [{ id: 0, messages: 1, tag: cp.tag }]);
  assert.equal(log.usage_tokens, 93);
  assert.match((await alice.context("draft")).system_prompt, /Be brief\./);

  const fork = await alice.fork("draft", { newId: "draft-copy", checkpoint: cp });
  assert.equal(fork.id, "draft-copy");
  assert.equal(fork.stats.messages, 1);
  assert.equal((await alice.revert("draft", cp)).stats.messages, 1);
  const compacted = await alice.compact("draft");
  assert.equal(compacted.session.id, "draft");
  assert.equal(compacted.compacted, 0, "one message: nothing to fold");

  // After a commit checkpoint 0 marks a point in the next conversation: the checkpoint from before is
  // refused there (its tag), while an id alone would take whichever checkpoint has it now.
  await alice.commit("draft");
  await alice.addMessages("draft", { role: "user", content: "Second question." });
  const again = await alice.checkpoint("draft");
  assert.equal(again.checkpoint, cp.checkpoint);
  assert.notEqual(again.tag, cp.tag);
  await alice.addMessages("draft", { role: "assistant", content: "Second answer." });
  await rejectsWith(alice.revert("draft", cp), "failed_precondition", 409);
  await rejectsWith(alice.fork("draft", { newId: "draft-stale", checkpoint: cp }), "failed_precondition", 409);
  assert.equal((await alice.sessionLog("draft")).messages.length, 2);
  await alice.revert("draft", again);
  assert.equal((await alice.sessionLog("draft")).messages.length, 1);
  await alice.deleteSession("draft", { force: true });
  await alice.deleteSession("draft-copy", { force: true });
});

test("remember and its audit trail", async () => {
  const changes = await bob.remember("Bob takes the night train to Osaka.",
                                     { scope: "strata://user/bob", category: "events" });
  assert.equal(changes.length, 1);
  assert.equal(changes[0].action, "create");
  assert.match(changes[0].uri, /^strata:\/\/user\/bob\/memories\/events\//);
  const [entry] = await bob.history(changes[0].uri);
  assert.equal(entry.action, "create");
  assert.equal(entry.after, "Bob takes the night train to Osaka.");
  assert.match(entry.source, /^remember#/);
  assert.equal(entry.session, "");
  assert.deepEqual((await bob.changes()).map((e) => e.uri), [changes[0].uri]);
  await rejectsWith(bob.remember("Alice is tall.", { scope: "strata://user/alice" }), "permission_denied", 403);
  assert.deepEqual(await bob.consolidate("strata://user/bob/memories"), []);
});

test("tokens, prompts and skills", async () => {
  assert.deepEqual(await alice.countTokens("hello world"), { encoding: "o200k_base", tokens: 2 });
  assert.equal((await alice.countTokens("hello world", { encoding: "chars" })).encoding, "chars");
  const counted = await alice.countTokens([{ role: "user", content: "hello world" }], { encoding: "cl100k_base" });
  assert.equal(counted.encoding, "cl100k_base");
  assert.ok(counted.tokens > 2, "a message counts its framing too");
  await rejectsWith(alice.countTokens("x", { encoding: "nope" }), "invalid_argument", 400,
                    /o200k_base, cl100k_base or chars/);

  assert.match(await alice.renderPrompt("session.summarize", { transcript: "[user] hello" }), /\[user\] hello/);
  await rejectsWith(alice.renderPrompt("session.summarize"), "invalid_argument", 400, /'transcript' is required/);

  const skillMd = "---\nname: deploy\ndescription: How to deploy the service safely\n---\nRun the canary first.\n";
  assert.equal(await alice.addSkill("coder", skillMd), "strata://agent/coder/skills/deploy");
  assert.deepEqual((await alice.listSkills("coder")).map((n) => n.uri), ["strata://agent/coder/skills/deploy"]);
  assert.match(await alice.showSkill("coder", "deploy"), /^---\nname: deploy\n[^]*Run the canary first\./);
  await rejectsWith(alice.showSkill("coder", "undeploy"), "not_found", 404);
  await rejectsWith(alice.addSkill("coder", "no front matter"), "invalid_argument", 400);
});

test("the server's errors: code, HTTP status, its message and request id", async () => {
  const missing = await rejectsWith(alice.read("strata://user/alice/nothing"), "not_found", 404,
                                    /^strata:\/\/user\/alice\/nothing does not exist$/);
  assert.match(missing.requestId, /^req-/);
  assert.equal(missing.method, "GET");
  assert.match(missing.url, /\/api\/v1\/fs\/read\?uri=strata%3A%2F%2Fuser%2Falice%2Fnothing/);
  assert.ok(isStrataError(missing) && isStrataError(missing, "not_found", "permission_denied"));
  assert.ok(!isStrataError(missing, "internal") && !isStrataError(new Error("x")));
  assert.ok(missing instanceof NotFoundError && !(missing instanceof InvalidArgumentError));
  assert.equal(missing.name, "NotFoundError");
  assert.equal(missing.retryable, false);

  const stranger = new StrataClient({ baseUrl, apiKey: "sk-strata-000000000000000000000000000000000000000000000000" });
  await rejectsWith(stranger.ls(), "unauthenticated", 401, /not valid/);
  await rejectsWith(new StrataClient({ baseUrl }).ls(), "unauthenticated", 401, /an API key is required/);
  await rejectsWith(alice.read("strata://user/bob/memories"), "permission_denied", 403, /strata:\/\/user\/bob\/memories/);
  await rejectsWith(alice.issueKey({ user: "mallory" }), "permission_denied", 403, /root key/);
  await rejectsWith(alice.metrics(), "permission_denied", 403);
  await rejectsWith(alice.find("x", { limit: 0 }), "invalid_argument", 400, /^"limit" must be between 1 and 1000, not 0$/);
  await rejectsWith(alice.read("kyoto"), "invalid_argument", 400, /must start with strata:\/\//);
  await alice.write("strata://user/alice/once", "first");
  await rejectsWith(alice.write("strata://user/alice/once", "second", { overwrite: false }), "already_exists", 409);
  assert.equal(await alice.read("strata://user/alice/once"), "first");
  await rejectsWith(alice.task(999999), "not_found", 404, /no task 999999/);
  await rejectsWith(alice.taskEvents(999999).next(), "not_found", 404, /no task 999999/);
  // A flag is a boolean: "" was sent as a bare ?recursive, read as true, and the subtree went.
  await rejectsWith(alice.rm("strata://user/alice", { recursive: "" }), "invalid_argument", 0,
                    /"recursive" must be true or false, not string/);
  await rejectsWith(alice.ls("strata://user/alice", { recursive: 1 }), "invalid_argument", 0,
                    /"recursive" must be true or false, not number/);
  assert.equal(await alice.read("strata://user/alice/once"), "first");
  // An empty path parameter is refused before any request is made.
  await rejectsWith(alice.getSession(""), "invalid_argument", 0, /"id" must not be empty/);
  // "." and ".." would be dot segments of the URL: /sessions/./messages asked for the session "messages".
  await rejectsWith(alice.messages("."), "invalid_argument", 0, /"id" must not be "\."/);
  await rejectsWith(alice.getSession(".."), "invalid_argument", 0, /"id" must not be "\.\."/);
  // A lone surrogate (no UTF-8 holds it) in a path, a query or a body is refused before anything is sent, as
  // the Python client refuses it: a path's was a bare URIError, and a query's went out as U+FFFD (another
  // URI); a pair is text like any other.
  let sent = 0;
  const aliceKey = (await root.issueKey({ user: "alice" })).key;
  const counting = new StrataClient({ baseUrl, apiKey: aliceKey, fetch: (...args) => { sent += 1; return fetch(...args); } });
  await rejectsWith(counting.getSession("s\uDC80"), "invalid_argument", 0, /"id" is not valid Unicode: '\\udc80' at index 1/);
  await rejectsWith(counting.read("strata://user/alice/a\uDC80"), "invalid_argument", 0, /"uri" is not valid Unicode/);
  await rejectsWith(counting.write("strata://user/alice/a", "x\uD800"), "invalid_argument", 0,
                    /body\.content is not valid Unicode: '\\ud800' at index 1/);
  assert.equal(sent, 0);
  await counting.write("strata://user/alice/pair", "x\uD83D\uDE00");
  assert.equal(await counting.read("strata://user/alice/pair"), "x\u{1F600}");
  assert.equal(sent, 2);
});

test("failures on the way: no server, not Strata's answer, a timeout, a cancelled call", async () => {
  const closed = http.createServer();
  await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = closed.address().port;
  await new Promise((resolve) => closed.close(resolve));
  const down = await rejectsWith(new StrataClient({ baseUrl: `http://127.0.0.1:${port}` }).health(), "unavailable", 0,
                                 new RegExp(`GET http://127\\.0\\.0\\.1:${port}/health: .*ECONNREFUSED`));
  assert.equal(down.retryable, true);
  assert.ok(down instanceof UnavailableError);
  assert.ok(down.cause);

  const answering = (status, type, body) => new StrataClient({
    baseUrl: "http://strata.example", fetch: async () => new Response(body, { status, headers: { "content-type": type } }),
  });
  const proxied = await rejectsWith(answering(502, "text/html", "<html><body>Bad gateway</body></html>").stat("strata://user/a"),
                                    "unavailable", 502, /HTTP 502 with a body that is not JSON \(text\/html\): <html><body>Bad gateway/);
  assert.ok(proxied.message.startsWith("GET http://strata.example/api/v1/fs/stat?uri=strata%3A%2F%2Fuser%2Fa: "), proxied.message);
  await rejectsWith(answering(200, "application/json", "{\"hits\": []}").find("x"), "unavailable", 200,
                    /^POST http:\/\/strata\.example\/api\/v1\/search\/find: HTTP 200 without Strata's envelope/);
  await rejectsWith(answering(200, "application/json", "").health(), "unavailable", 200, /not JSON .*: empty$/);

  // A fetch that answers only when aborted.
  const hanging = (_url, init) => new Promise((_resolve, reject) => {
    if (init.signal.aborted) reject(init.signal.reason);
    init.signal.addEventListener("abort", () => reject(init.signal.reason), { once: true });
  });
  const slow = new StrataClient({ baseUrl: "http://strata.example", fetch: hanging, timeoutMs: 50 });
  const late = await rejectsWith(slow.health(), "deadline_exceeded", 0,
                                 /^GET http:\/\/strata\.example\/health: no answer within 50 ms$/);
  assert.equal(late.retryable, true);
  await rejectsWith(slow.health({ timeoutMs: 20 }), "deadline_exceeded", 0, /within 20 ms/);

  const controller = new AbortController();
  const patient = new StrataClient({ baseUrl: "http://strata.example", fetch: hanging, timeoutMs: 0 });
  const pending = patient.health({ signal: controller.signal });
  controller.abort(new Error("user gave up"));
  const cancelled = await rejectsWith(pending, "cancelled", 0, /^GET http:\/\/strata\.example\/health: cancelled$/);
  assert.equal(cancelled.cause.message, "user gave up");
  await rejectsWith(patient.health({ signal: AbortSignal.abort() }), "cancelled", 0);

  // As the Python client's constructor: InvalidArgumentError, status 0, naming the option.
  for (const [options, message] of [[{ baseUrl: "strata.example" }, /baseUrl must be an http\(s\) URL/],
                                    [{ baseUrl: "ftp://strata.example" }, /baseUrl must be an http\(s\) URL/],
                                    [{ baseUrl: "http://strata.example/?a=1" }, /baseUrl must not have a query/],
                                    [{ baseUrl: "http://strata.example", timeoutMs: -1 }, /timeoutMs must be 0 or more/]]) {
    assert.throws(() => new StrataClient(options),
                  (e) => e instanceof InvalidArgumentError && e.code === "invalid_argument" && e.status === 0 &&
                         message.test(e.message));
  }
});

// A fetch that answers an event stream from `parts`, each written when the previous one was read; once they
// are out it holds the stream open until the request is aborted. `state.cancelled` records that the client
// closed it.
function streamingFetch(parts, state) {
  return async (_url, init) => {
    const encoder = new TextEncoder();
    let i = 0;
    const body = new ReadableStream({
      pull(controller) {
        if (i < parts.length) return controller.enqueue(encoder.encode(parts[i++]));
        return new Promise((_resolve, reject) => init.signal.addEventListener("abort", () => reject(init.signal.reason)));
      },
      cancel() {
        state.cancelled = true;
      },
    });
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  };
}

test("taskEvents: multi-line data, comments, a terminal state, closing the stream, its signal", async () => {
  const state = {};
  const client = new StrataClient({ baseUrl: "http://strata.example", fetch: streamingFetch([
    ": keep-alive\n\n",
    "event: task\ndata: {\"id\": 7,\ndata:  \"state\": \"running\"}\n\n",
    "event: task\r\ndata: {\"id\": 7, \"state\": \"done\"}\r\n\r\n",
    "event: task\ndata: {\"id\": 7, \"state\": \"never read\"}\n\n",
  ], state) });
  const seen = [];
  for await (const task of client.taskEvents(7)) seen.push(task.state);
  assert.deepEqual(seen, ["running", "done"]);
  assert.equal(state.cancelled, true, "the stream is closed after the terminal state");

  const early = {};
  const pending = "event: task\ndata: {\"id\": 7, \"state\": \"pending\"}\n\n";
  const breaking = new StrataClient({ baseUrl: "http://strata.example", fetch: streamingFetch([pending], early) });
  for await (const task of breaking.taskEvents(7)) {
    assert.equal(task.state, "pending");
    break;
  }
  assert.equal(early.cancelled, true, "breaking out closes the stream");

  const controller = new AbortController();
  const running = "event: task\ndata: {\"id\": 7, \"state\": \"running\"}\n\n";
  const waiting = new StrataClient({ baseUrl: "http://strata.example", timeoutMs: 50, fetch: streamingFetch([running], {}) });
  const iterator = waiting.taskEvents(7, { signal: controller.signal });
  assert.equal((await iterator.next()).value.state, "running");
  await new Promise((resolve) => setTimeout(resolve, 100));  // Past timeoutMs: it bounds opening the stream only.
  const next = iterator.next();
  controller.abort();
  await rejectsWith(next, "cancelled", 0, /tasks\/7\/events: cancelled/);

  const garbled = new StrataClient({ baseUrl: "http://strata.example",
                                     fetch: streamingFetch(["event: task\ndata: {oops\n\n"], {}) });
  await rejectsWith(garbled.taskEvents(7).next(), "unavailable", 200, /the task event's data is not a JSON object: \{oops/);
  // JSON that is not an object is as broken: no Task of a number or of nothing.
  for (const data of ["7", "null", "[1]", "\"done\""]) {
    const odd = new StrataClient({ baseUrl: "http://strata.example",
                                   fetch: streamingFetch([`event: task\ndata: ${data}\n\n`], {}) });
    await rejectsWith(odd.taskEvents(7).next(), "unavailable", 200, /the task event's data is not a JSON object/);
  }
  const notAStream = new StrataClient({ baseUrl: "http://strata.example",
                                        fetch: async () => Response.json({ status: "ok", result: {} }) });
  await rejectsWith(notAStream.taskEvents(7).next(), "unavailable", 200, /expected an event stream, got application\/json/);
});

// A client whose fetch answers by path (`answer(pathname)`), each request's method and path kept in `asked`.
function routedClient(asked, answer) {
  return new StrataClient({ baseUrl: "http://strata.example", fetch: async (url, init) => {
    const { pathname } = new URL(url);
    asked.push(`${init.method} ${pathname}`);
    return answer(pathname);
  } });
}

test("commit's wait asks for the task when the server has no stream to spare", async () => {
  const asked = [];
  const states = ["running", "done"];
  const client = routedClient(asked, (pathname) => {
    if (pathname === "/api/v1/sessions/s/commit") {
      return Response.json({ status: "ok", result: { task_id: 9, archive: 1, messages: 2 } });
    }
    if (pathname === "/api/v1/tasks/9/events") {
      const error = { code: "resource_exhausted", message: "too many streams", request_id: "req-1" };
      return Response.json({ status: "error", error }, { status: 429 });
    }
    if (pathname === "/api/v1/sessions/s/archives/1/diff") {
      return Response.json({ status: "ok", result: { session: "s", archive: 1, summary: "", candidates: 0, changes: [] } });
    }
    if (pathname === "/api/v1/sessions/s/status") {
      return Response.json({ status: "ok", result: { session: "s", jobs: [],
                                                     archives: [{ archive: 1, messages: 2, state: "done" }] } });
    }
    return Response.json({ status: "ok", result: { id: 9, state: states.shift() } });
  });
  const waited = await client.commit("s", { wait: true });
  assert.deepEqual(waited, { task_id: 9, archive: 1, messages: 2, task: { id: 9, state: "done" }, state: "done",
                             diff: { session: "s", archive: 1, summary: "", candidates: 0, changes: [] } });
  assert.deepEqual(asked, ["POST /api/v1/sessions/s/commit", "GET /api/v1/tasks/9/events", "GET /api/v1/tasks/9",
                           "GET /api/v1/tasks/9", "GET /api/v1/sessions/s/status", "GET /api/v1/sessions/s/archives/1/diff"]);
});

test("commit's wait reports a phase 2 that failed for good as the Python client does", async () => {
  const asked = [];
  const client = routedClient(asked, (pathname) => {
    if (pathname === "/api/v1/sessions/s/commit") {
      return Response.json({ status: "ok", result: { task_id: 4, archive: 2, messages: 3 } });
    }
    if (pathname === "/api/v1/tasks/4/events") {
      return new Response("event: task\ndata: {\"id\": 4, \"state\": \"dead\", \"last_error\": \"HTTP 401\"}\n\n",
                          { headers: { "content-type": "text/event-stream" } });
    }
    if (pathname === "/api/v1/sessions/s/status") {
      return Response.json({ status: "ok", result: { session: "s", jobs: [], archives: [
        { archive: 1, messages: 2, state: "done" }, { archive: 2, messages: 3, state: "failed", error: "the key was revoked" }] } });
    }
    return Response.json({ status: "error", error: { code: "not_found", message: pathname, request_id: "r" } }, { status: 404 });
  });
  const waited = await client.commit("s", { wait: true });
  assert.equal(waited.state, "failed");
  assert.equal(waited.error, "the key was revoked");
  assert.equal(waited.diff, undefined);
  assert.deepEqual(asked, ["POST /api/v1/sessions/s/commit", "GET /api/v1/tasks/4/events", "GET /api/v1/sessions/s/status"]);
});

test("watch follows the account's revision", async () => {
  const controller = new AbortController();
  const revisions = alice.watch({ signal: controller.signal });
  const first = (await revisions.next()).value.revision;
  assert.equal(typeof first, "number");
  await alice.write("strata://user/alice/watched", "a change");
  const second = (await revisions.next()).value.revision;
  assert.ok(second > first, `${second} after ${first}`);
  await revisions.return();
});

test("keys, accounts and metrics with the root key", async () => {
  const issued = await root.issueKey({ user: "carol", role: "admin" });
  assert.match(issued.key, /^sk-strata-[0-9a-f]{48}$/);
  assert.equal(issued.role, "admin");
  const listed = await root.listKeys();
  const carolKey = listed.find((k) => k.id === issued.id);
  assert.equal(carolKey.user, "carol");
  assert.equal(carolKey.key, undefined, "a listed key has no secret");
  const carol = new StrataClient({ baseUrl, apiKey: issued.key });
  assert.ok(Array.isArray(await carol.ls()));
  assert.deepEqual(await root.revokeKey(issued.id), { revoked: issued.id });
  await rejectsWith(carol.ls(), "unauthenticated", 401);

  const team = new StrataClient({ baseUrl, apiKey: kRootKey, account: "team" });
  await team.write("strata://resources/handbook", "The team's handbook.");
  assert.equal(await team.read("strata://resources/handbook"), "The team's handbook.");
  await rejectsWith(root.read("strata://resources/handbook"), "not_found", 404, /does not exist/);

  assert.match(await root.metrics(), /strata_http_requests_total/);
});
