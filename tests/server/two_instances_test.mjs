// Two `strata serve` instances on one PostgreSQL database (issue 17):
//  1. writes through both at once are all visible through both, and a key issued by one works on the other;
//  2. the commits of many sessions, made through both, each run phase 2 exactly once (no memory twice);
//  3. the instance in the middle of a commit's phase 2 is SIGKILLed: the other takes the job over once its
//     lease expires and finishes it, with no memory lost or duplicated;
//  4. the database restarts (pg_ctl restart): the survivor reconnects and every acknowledged write is there;
//  5. (issue 28) the same fact committed through both at the same moment is stored once, the second
//     decision recorded as a skip: dedup and apply of one owner are serialised across instances;
//  6. (issue 28) a phase 2 longer than the job lease runs once: its lease is renewed while it works.
// The model is a fake OpenAI-compatible upstream that answers the summary, extraction and dedup prompts.
// The test restarts the database, so it runs a cluster of its own (tests/pg_cluster.sh), not the suite's.
//   node two_instances_test.mjs STRATA_BIN PG_CLUSTER_SCRIPT
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

const [strataBin, clusterScript] = process.argv.slice(2);
assert.ok(strataBin && clusterScript, "usage: two_instances_test.mjs STRATA_BIN PG_CLUSTER_SCRIPT");
// A short path: the server's Unix socket lives in it.
const pgDir = fs.mkdtempSync("/tmp/strata-pg2-");
execFileSync("bash", [clusterScript, "start", pgDir], { stdio: "inherit" });
const rootKey = "root-key-for-the-two-instance-test";
const leaseSeconds = 5;  // Longer than any phase 2 here takes, also under the sanitizers.

// ---- The database ----
const psqlCandidates = ["/usr/lib/postgresql/15/bin/psql", "/usr/bin/psql"];
const psql = psqlCandidates.find((p) => fs.existsSync(p));
assert.ok(psql, "psql not found");
function sql(db, statement) {
  return execFileSync(psql, ["-h", pgDir, "-U", "strata", "-d", db, "-At", "-c", statement], { encoding: "utf8" }).trim();
}
const dbName = `two_instances_${process.pid}`;
sql("postgres", `CREATE DATABASE ${dbName}`);
const url = `postgresql:///${dbName}?host=${encodeURIComponent(pgDir)}&user=strata`;

// ---- The fake model ----
const hung = [];        // Requests held open (the kill test).
let holdTag = null;     // Requests whose transcript holds this tag are held.
const extractions = {}; // tag -> extraction requests answered.
const byInstance = { a: 0, b: 0 };
const extractedBy = {};   // tag -> instances whose extraction it was.
const sameFactHeld = [];  // Extractions of the "same fact" sessions, answered together once both arrived.
let slowMs = 0;           // Extractions of TAG-slow are answered this late.
function answer(res, request, reply) {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ id: "x", object: "chat.completion", model: request.model,
                           choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: reply } }],
                           usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 } }));
}
const upstream = http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    const request = JSON.parse(body);
    const instance = req.url.startsWith("/a/") ? "a" : "b";
    byInstance[instance]++;
    const text = request.messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n");
    const tag = (text.match(/TAG-[a-z0-9-]+/) || ["TAG-none"])[0];
    if (holdTag && tag === holdTag) {
      hung.push({ instance, res });
      return;
    }
    if (text.includes("You maintain an agent's long-term memory")) {
      extractions[tag] = (extractions[tag] || 0) + 1;
      (extractedBy[tag] ||= []).push(instance);
      if (tag.startsWith("TAG-same")) {
        // One fact in two sessions' words, under two keys: only dedup can tell they agree.
        const reply = JSON.stringify({ memories: [{ category: "events", key: tag.toLowerCase(), abstract: "Peanut allergy",
                                                    content: "Alice is allergic to peanuts." }] });
        sameFactHeld.push(() => answer(res, request, reply));
        if (sameFactHeld.length === 2) for (const release of sameFactHeld.splice(0)) release();
        return;
      }
      const reply = JSON.stringify({ memories: [{ category: "events", key: tag.toLowerCase(), abstract: `Event ${tag}`,
                                                  content: `The user reported event ${tag}.` }] });
      if (tag === "TAG-slow") {
        setTimeout(() => answer(res, request, reply), slowMs);
        return;
      }
      answer(res, request, reply);
    } else if (text.includes("A new memory was extracted")) {
      answer(res, request, JSON.stringify(text.includes("allergic to peanuts")
        ? { decision: "skip", reason: "the same allergy is already known" }
        : { decision: "create", reason: "a different event" }));
    } else {
      answer(res, request, `The user talked about ${tag}.\n\nA short conversation about ${tag}.`);
    }
  });
});
await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
const upstreamPort = upstream.address().port;

// ---- The instances ----
function start(name) {
  const child = spawn(strataBin, ["serve", "--data", url, "--listen", "127.0.0.1:0", "--provider", "openai", "--model", "fake",
                                  "--base-url", `http://127.0.0.1:${upstreamPort}/${name}/v1`, "--api-key-env", "FAKE_KEY",
                                  "--no-stream", "--job-lease", String(leaseSeconds)],
                      { env: { ...process.env, STRATA_ROOT_KEY: rootKey, FAKE_KEY: "k" }, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = new Promise((resolve, reject) => {
    child.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", (code) => reject(new Error(`instance ${name} exited ${code}: ${log}`)));
  });
  return { name, child, port, log: () => log };
}
async function call(instance, method, url_, key, body) {
  const port = await instance.port;
  const r = await fetch(`http://127.0.0.1:${port}${url_}`, {
    method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}
// Retries a call the database restart made unavailable (503); any other answer is returned.
async function callRetrying(instance, method, url_, key, body) {
  for (let attempt = 0; ; attempt++) {
    const r = await call(instance, method, url_, key, body);
    if (r.status !== 503 || attempt >= 20) return r;
    await new Promise((res) => setTimeout(res, 200));
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, predicate, seconds) {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

const a = start("a");
const b = start("b");
let failed = false;
try {
  await Promise.all([a.port, b.port]);
  // A key issued through one instance works on the other.
  const issued = await call(a, "POST", "/api/v1/admin/keys", rootKey, { user: "alice" });
  assert.equal(issued.status, 200, JSON.stringify(issued.json));
  const key = issued.json.result.key;
  assert.equal((await call(b, "GET", "/api/v1/sessions", key)).status, 200);

  // 1. Concurrent writes through both.
  const writes = [];
  for (let i = 0; i < 60; i++) {
    writes.push(call(i % 2 ? a : b, "POST", "/api/v1/fs/write", key,
                     { uri: `strata://user/alice/notes/n${i}`, content: `note ${i} written through ${i % 2 ? "a" : "b"}` }));
  }
  for (const w of await Promise.all(writes)) assert.equal(w.status, 200, JSON.stringify(w.json));
  for (const instance of [a, b]) {
    const ls = await call(instance, "GET", "/api/v1/fs/ls?uri=" + encodeURIComponent("strata://user/alice/notes"), key);
    assert.equal(ls.status, 200);
    assert.equal(ls.json.result.length, 60, `instance ${instance.name} lists ${ls.json.result.length} notes`);
    const read = await call(instance, "GET", "/api/v1/fs/read?uri=" + encodeURIComponent("strata://user/alice/notes/n7"), key);
    assert.equal(read.json.result.content, "note 7 written through a");
  }
  const found = await call(b, "POST", "/api/v1/search/find", key, { query: "note 41 written through a", limit: 3 });
  assert.equal(found.status, 200, JSON.stringify(found.json));
  assert.ok(JSON.stringify(found.json.result).includes("strata://user/alice/notes/n41"), JSON.stringify(found.json));
  console.log("ok 1 - 60 concurrent writes through two instances, all visible through both");

  // 2. Commits through both: phase 2 of each exactly once.
  const sessions = [];
  for (let i = 0; i < 8; i++) {
    const through = i % 2 ? a : b;
    const id = `trip-${i}`;
    assert.equal((await call(through, "POST", "/api/v1/sessions", key, { id, agent: "planner" })).status, 200);
    const msgs = [{ role: "user", content: `Remember TAG-s${i}: I went to place number ${i}.` },
                  { role: "assistant", content: `Noted TAG-s${i}.` }];
    assert.equal((await call(through === a ? b : a, "POST", `/api/v1/sessions/${id}/messages`, key, { messages: msgs })).status, 200);
    const committed = await call(through, "POST", `/api/v1/sessions/${id}/commit`, key, {});
    assert.equal(committed.status, 200, JSON.stringify(committed.json));
    sessions.push(id);
  }
  const archiveState = async (instance, id) => {
    const s = await call(instance, "GET", `/api/v1/sessions/${id}/status`, key);
    return s.json.result.archives.map((x) => x.state);
  };
  await waitFor("every commit's phase 2", async () => {
    for (const id of sessions) if ((await archiveState(a, id))[0] !== "done") return false;
    return true;
  }, 60);
  for (let i = 0; i < 8; i++) assert.equal(extractions[`TAG-s${i}`], 1, `extraction of session ${i} ran ${extractions[`TAG-s${i}`]} times`);
  assert.ok(byInstance.a > 0 && byInstance.b > 0, `both instances ran phase 2 (a ${byInstance.a}, b ${byInstance.b})`);
  const events = await call(b, "GET", "/api/v1/fs/ls?uri=" + encodeURIComponent("strata://user/alice/memories/events"), key);
  // Events are appended: each name is the key and a hash of the content.
  const eventNames = events.json.result.map((n) => n.uri.split("/").pop().replace(/-[0-9a-f]{8}$/, "")).sort();
  assert.deepEqual(eventNames, sessions.map((_, i) => `tag-s${i}`).sort());
  console.log(`ok 2 - 8 commits through both instances, phase 2 once each (model calls: a ${byInstance.a}, b ${byInstance.b})`);

  // 5. The same fact, committed through both instances at once: both extractions are answered together,
  // so both dedups run at the same moment; one stores the fact, the other finds it and skips.
  for (const [through, id] of [[a, "same-a"], [b, "same-b"]]) {
    assert.equal((await call(through, "POST", "/api/v1/sessions", key, { id })).status, 200);
    await call(through, "POST", `/api/v1/sessions/${id}/messages`, key,
               { messages: [{ role: "user", content: `TAG-${id}: I am allergic to peanuts.` }] });
  }
  await Promise.all([call(a, "POST", "/api/v1/sessions/same-a/commit", key, {}),
                     call(b, "POST", "/api/v1/sessions/same-b/commit", key, {})]);
  await waitFor("both same-fact commits", async () =>
    (await archiveState(a, "same-a"))[0] === "done" && (await archiveState(a, "same-b"))[0] === "done", 60);
  const sameBy = [...(extractedBy["TAG-same-a"] || []), ...(extractedBy["TAG-same-b"] || [])].sort();
  assert.deepEqual(sameBy, ["a", "b"], `each instance ran one of the two phase 2s (${sameBy})`);
  const allergy = (await call(b, "GET", "/api/v1/fs/ls?uri=" + encodeURIComponent("strata://user/alice/memories/events"), key))
    .json.result.filter((n) => /\/tag-same-/.test(n.uri));
  assert.equal(allergy.length, 1, `the fact is stored ${allergy.length} times: ${JSON.stringify(allergy)}`);
  const sameChanges = (await call(a, "GET", "/api/v1/memories/changes?under=" + encodeURIComponent("strata://user/alice/memories/events"), key))
    .json.result.filter((c) => /^same-[ab]@/.test(c.source));
  assert.deepEqual(sameChanges.map((c) => c.action).sort(), ["create", "skip"], JSON.stringify(sameChanges));
  console.log("ok 5 - one fact committed through both instances at once: stored once, the other decision a skip");

  // 6. A phase 2 that outlasts the lease (its extraction answers after two and a half leases): the lease is
  // renewed while it works, so the other instance never claims it, and it runs once.
  slowMs = leaseSeconds * 2500;
  assert.equal((await call(a, "POST", "/api/v1/sessions", key, { id: "slow" })).status, 200);
  await call(a, "POST", "/api/v1/sessions/slow/messages", key, { messages: [{ role: "user", content: "TAG-slow: a long one." }] });
  assert.equal((await call(a, "POST", "/api/v1/sessions/slow/commit", key, {})).status, 200);
  await waitFor("the slow commit", async () => (await archiveState(b, "slow"))[0] === "done", leaseSeconds * 6 + 30);
  assert.equal(extractions["TAG-slow"], 1, `the slow extraction ran ${extractions["TAG-slow"]} times`);
  const slowJob = (await call(b, "GET", "/api/v1/sessions/slow/status", key)).json.result.jobs[0];
  assert.equal(slowJob.state, "done");
  assert.equal(slowJob.attempts, 1, "claimed once");
  console.log(`ok 6 - a phase 2 of ${slowMs / 1000} s with a ${leaseSeconds} s lease ran once`);

  // 3. SIGKILL the instance in the middle of a phase 2; the other finishes it.
  holdTag = "TAG-killed";
  assert.equal((await call(a, "POST", "/api/v1/sessions", key, { id: "killed", agent: "planner" })).status, 200);
  await call(a, "POST", "/api/v1/sessions/killed/messages", key,
             { messages: [{ role: "user", content: "Remember TAG-killed: my flight is at 9." }] });
  assert.equal((await call(a, "POST", "/api/v1/sessions/killed/commit", key, {})).status, 200);
  await waitFor("a model call of the commit", () => hung.length > 0, 30);
  const victim = hung[0].instance === "a" ? a : b;
  const survivor = victim === a ? b : a;
  victim.child.kill("SIGKILL");
  await new Promise((r) => (victim.child.exitCode !== null || victim.child.signalCode ? r() : victim.child.on("exit", r)));
  for (const h of hung.splice(0)) h.res.destroy();
  holdTag = null;
  await waitFor("the survivor to finish the killed commit", async () => (await archiveState(survivor, "killed"))[0] === "done",
                leaseSeconds + 60);
  const status = await call(survivor, "GET", "/api/v1/sessions/killed/status", key);
  const job = status.json.result.jobs.find((j) => j.state === "done");
  assert.ok(job, JSON.stringify(status.json));
  assert.equal(job.attempts, 2, "claimed by the victim, then by the survivor");
  const killedMemories = (await call(survivor, "GET", "/api/v1/fs/ls?uri=" + encodeURIComponent("strata://user/alice/memories/events"), key))
    .json.result.filter((n) => /\/tag-killed(-[0-9a-f]{8})?$/.test(n.uri));
  assert.equal(killedMemories.length, 1);
  console.log(`ok 3 - instance ${victim.name} killed mid-commit; ${survivor.name} finished it after the lease, one memory`);

  // 4. The database restarts; the survivor reconnects and keeps every acknowledged write.
  const before = await callRetrying(survivor, "POST", "/api/v1/fs/write", key, { uri: "strata://user/alice/notes/before-restart", content: "x" });
  assert.equal(before.status, 200);
  execFileSync("bash", [clusterScript, "restart", pgDir], { stdio: "inherit" });
  const after = await callRetrying(survivor, "POST", "/api/v1/fs/write", key, { uri: "strata://user/alice/notes/after-restart", content: "y" });
  assert.equal(after.status, 200, JSON.stringify(after.json));
  const ls = await callRetrying(survivor, "GET", "/api/v1/fs/ls?uri=" + encodeURIComponent("strata://user/alice/notes"), key);
  assert.equal(ls.json.result.length, 62);
  const commitAfter = await callRetrying(survivor, "GET", "/api/v1/sessions/trip-3/status", key);
  assert.equal(commitAfter.json.result.archives[0].state, "done");
  console.log("ok 4 - the database restarted; the survivor reconnected with all 62 notes and every archive");
} catch (e) {
  failed = true;
  console.error(e);
  console.error("--- instance a:\n" + a.log() + "\n--- instance b:\n" + b.log());
} finally {
  for (const instance of [a, b]) if (instance.child.exitCode === null && !instance.child.signalCode) instance.child.kill("SIGTERM");
  upstream.close();
  try { execFileSync("bash", [clusterScript, "stop", pgDir], { stdio: "inherit" }); } catch { /* reported above */ }
  fs.rmSync(pgDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
