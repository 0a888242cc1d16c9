// The web viewer in a real headless Chromium (Debian's `chromium`, driven by the pinned `puppeteer-core`),
// against `strata serve` with the sample data of scripts/sample-data. Run by ctest (viewer_chromium):
//   node viewer_test.mjs PATH/TO/strata SOURCE_DIR        (screenshots go to $STRATA_SCREENSHOTS)
// Every number the pages show is checked against the API's answer for the same question.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { requireNpm, startStrata } from "../server/harness.mjs";

const puppeteer = requireNpm("puppeteer-core");
const [strataBin, sourceDir] = process.argv.slice(2);
const shots = process.env.STRATA_SCREENSHOTS ?? path.join(os.tmpdir(), "strata-viewer-screenshots");
const rootKey = "root-key-for-the-viewer-test";
const kXss = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`;

let work, strata, browser, page, base;
const pageErrors = [];

function chromium() {
  for (const p of [process.env.CHROMIUM, "/usr/bin/chromium", "/usr/bin/chromium-browser"]) {
    if (p && fs.existsSync(p)) return p;
  }
  throw new Error("no Chromium found: scripts/test installs Debian's chromium package");
}

async function api(method, url, body) {
  const r = await strata.call(method, url, rootKey, body);
  assert.equal(r.json.status, "ok", `${method} ${url}: ${JSON.stringify(r.json)}`);
  return r.json.result;
}

// Waits until fn() (in the page) returns a truthy value; returns it.
async function until(fn, ...args) {
  const handle = await page.waitForFunction(fn, { timeout: 15000 }, ...args);
  return handle.jsonValue();
}

// Clicks `selector`, again if a live refresh replaced the element between finding and clicking it.
async function click(selector) {
  for (let attempt = 0; ; ++attempt) {
    try {
      await page.waitForSelector(selector, { timeout: 15000 });
      await page.click(selector);
      return;
    } catch (e) {
      if (attempt >= 4 || !/detached|not clickable|No node found/.test(e.message)) throw e;
    }
  }
}

async function show(hash) {
  await page.goto(`${base}${hash}`);
  await until(() => !document.getElementById("main").hasAttribute("aria-busy") && document.querySelector("main h1"));
}

before(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "strata-viewer-"));
  const data = path.join(work, "data");
  const seeded = spawnSync("bash", [path.join(sourceDir, "scripts/sample-data"), data, strataBin], { encoding: "utf8" });
  assert.equal(seeded.status, 0, `scripts/sample-data failed: ${seeded.stderr}`);
  strata = await startStrata(strataBin, ["--data", data], { STRATA_ROOT_KEY: rootKey });
  base = `http://127.0.0.1:${strata.port}/`;
  fs.mkdirSync(shots, { recursive: true });
  browser = await puppeteer.launch({
    executablePath: chromium(),
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on("pageerror", (e) => pageErrors.push(e.message));
});

after(async () => {
  await browser?.close();
  await strata?.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

test("the page asks for a key, keeps it for the tab, and serves its files with a strict policy", async () => {
  const index = await fetch(base);
  assert.equal(index.status, 200);
  assert.match(index.headers.get("content-type"), /text\/html/);
  assert.match(index.headers.get("content-security-policy"), /script-src 'self'/);
  assert.equal(index.headers.get("x-content-type-options"), "nosniff");
  assert.equal((await fetch(`${base}viewer/no-such-file.js`)).status, 404);

  await page.goto(`${base}#/context`);
  await until(() => document.querySelector("main .error")?.textContent.includes("unauthenticated"));
  await page.click("#key-button");
  await page.type("#key-input", rootKey);
  await page.click('#key-dialog button[value="save"]');
  await until(() => document.getElementById("ctx-bar"));
  // Kept in this tab's session storage: a reload needs no key again.
  await page.reload();
  await until(() => document.getElementById("ctx-bar"));
  await until(() => document.getElementById("live").dataset.state === "live");
});

test("the context window shows exactly the API's tokens per section and per message, and the cut moves with the budget", async () => {
  const compare = async (window) => {
    const ctx = await api("GET", `/api/v1/sessions/kyoto-trip/context?max_context_tokens=${window}&encoding=o200k_base`);
    await until((w, t) => document.getElementById("ctx-bar")?.dataset.window === String(w) &&
                          document.getElementById("ctx-total").dataset.tokens === String(t), window, ctx.total_tokens);
    const shown = await page.evaluate(() => ({
      sections: Object.fromEntries([...document.querySelectorAll("#ctx-sections tbody tr")]
        .map((tr) => [tr.dataset.section, Number(tr.querySelector("td").dataset.tokens)])),
      messages: [...document.querySelectorAll("#ctx-messages > li")]
        .map((li) => ({ index: Number(li.dataset.index), tokens: Number(li.dataset.tokens), included: li.dataset.included === "true" })),
      bar: document.getElementById("ctx-bar").getAttribute("aria-label"),
    }));
    for (const k of ["system", "pinned", "memories", "summary", "history", "reserved", "reply"]) {
      assert.equal(shown.sections[k], ctx.sections[k], `section ${k} at window ${window}`);
    }
    assert.equal(shown.sections.free, Math.max(0, ctx.window - ctx.total_tokens - ctx.sections.reply));
    assert.deepEqual(shown.messages, ctx.messages.map((m) => ({ index: m.index, tokens: m.tokens, included: m.included })));
    assert.match(shown.bar, new RegExp(`Window of ${ctx.window.toLocaleString("en-US")} tokens`), "the chart has a text alternative");
    return ctx;
  };
  await show("#/context?session=kyoto-trip&window=8000");
  const wide = await compare(8000);
  assert.ok(wide.messages.every((m) => m.included), "everything fits in 8000 tokens");
  assert.ok(wide.sections.memories > 0, "alice's memories are recalled into the system prompt");

  // A smaller window, typed in: room for the system prompt, the memories and about half the history (the
  // reply's reserve is a quarter of a small window), so the older messages fall out.
  const small = Math.round(((wide.sections.system + wide.sections.memories + wide.sections.history / 2) * 4) / 3);
  await page.click("#ctx-window", { clickCount: 3 });
  await page.type("#ctx-window", String(small));
  const narrow = await compare(small);
  const left = narrow.messages.filter((m) => !m.included).length;
  assert.ok(left > 0 && left < narrow.messages.length, `some, not all, messages left out (${left})`);
  assert.ok(await page.$eval("#ctx-messages", (ol) => ol.querySelectorAll("li.excluded").length) === left);
  assert.deepEqual(await page.$$eval("#ctx-warnings li", (lis) => lis.map((li) => li.textContent)), narrow.warnings,
                   "what was left out, and why");
  await page.screenshot({ path: path.join(shots, "viewer-context.png"), fullPage: false });
  assert.equal(await page.evaluate(() => new URLSearchParams(location.hash.split("?")[1]).get("window")), String(small),
               "the budget is kept in the address, so the view can be shared");
});

test("live updates: a message appended through the API appears without a reload", async () => {
  await show("#/context?session=kyoto-trip&window=8000");
  const before = await page.$eval("#ctx-messages", (ol) => ol.children.length);
  await api("POST", "/api/v1/sessions/kyoto-trip/messages", { role: "user", content: "And on day two?" });
  await until((n) => document.querySelectorAll("#ctx-messages > li").length === n + 1, before);
  const ctx = await api("GET", "/api/v1/sessions/kyoto-trip/context?max_context_tokens=8000&encoding=o200k_base");
  await until((t) => document.getElementById("ctx-total")?.dataset.tokens === String(t), ctx.total_tokens);
});

test("the timeline shows checkpoints and usage marks, and a revert from the page (confirmed) is the API's revert", async () => {
  await show("#/timeline?session=kyoto-trip");
  const log = await api("GET", "/api/v1/sessions/kyoto-trip/log");
  assert.equal(log.checkpoints.length, 2);
  assert.deepEqual(log.usage_marks, [{ messages: 4, tokens: 1830, checkpoints_before: 1 }]);
  const shown = await page.evaluate(() => ({
    checkpoints: [...document.querySelectorAll("li.checkpoint")].map((li) => Number(li.dataset.checkpoint)),
    usage: [...document.querySelectorAll("li.usage")].map((li) => Number(li.dataset.tokens)),
    messages: document.querySelectorAll("#tl-items li.msg").length,
  }));
  assert.deepEqual(shown.checkpoints, log.checkpoints.map((c) => c.id));
  assert.deepEqual(shown.usage, [1830]);
  // The mark was recorded before checkpoint 1 (both after message 4): the page keeps the file's order.
  assert.deepEqual(await page.$$eval("#tl-items > li.usage, #tl-items > li.checkpoint",
                                     (lis) => lis.map((li) => li.classList.contains("usage") ? "usage" : `cp${li.dataset.checkpoint}`)),
                   ["cp0", "usage", "cp1"]);
  assert.equal(shown.messages, log.messages.length);

  await page.screenshot({ path: path.join(shots, "viewer-timeline.png"), fullPage: false });

  // Fork at checkpoint 1 into a named session; the page follows it.
  await click('li.checkpoint[data-checkpoint="1"] button[data-action="fork"]');
  await until(() => document.getElementById("confirm-dialog").open);
  await page.type("#fork-id", "kyoto-fork");
  await page.keyboard.press("Enter");  // Enter in the field confirms.
  await until(() => location.hash.includes("session=kyoto-fork") && document.getElementById("tl-session")?.value === "kyoto-fork" &&
                    document.querySelectorAll("#tl-items li.msg").length > 0);
  const forked = await api("GET", "/api/v1/sessions/kyoto-fork/log");
  assert.equal((await api("GET", "/api/v1/sessions/kyoto-fork")).user, "alice");
  assert.equal(forked.messages.length, log.checkpoints[1].messages, "the fork holds what came before checkpoint 1");
  assert.equal(await page.$eval("#tl-items", (ol) => ol.querySelectorAll("li.msg").length), forked.messages.length);
  await show("#/timeline?session=kyoto-trip");

  // Cancel first: nothing changes.
  await click('li.checkpoint[data-checkpoint="1"] button[data-action="revert"]');
  await until(() => document.getElementById("confirm-dialog").open);
  await page.click('#confirm-dialog button[value="cancel"]');
  assert.equal((await api("GET", "/api/v1/sessions/kyoto-trip/log")).checkpoints.length, 2);

  await click('li.checkpoint[data-checkpoint="1"] button[data-action="revert"]');
  await until(() => document.getElementById("confirm-dialog").open);
  await page.click("#confirm-ok");
  await until(() => document.querySelectorAll("li.checkpoint").length === 1);
  const after = await api("GET", "/api/v1/sessions/kyoto-trip/log");
  assert.deepEqual(after.checkpoints.map((c) => c.id), [0]);
  assert.equal(after.messages.length, log.checkpoints[1].messages);
  assert.equal(await page.$eval("#tl-items", (ol) => ol.querySelectorAll("li.msg").length), after.messages.length);
  assert.ok(after.rotations.length > log.rotations.length, "the old log is kept as a rotation");
  await until((n) => document.querySelectorAll("#tl-rotations li").length === n, after.rotations.length);

  // The page asks to revert to checkpoint 0 while another client reverts there first and makes a new
  // checkpoint 0 at a later point: the page's revert carries the tag it was shown, the server refuses
  // it, and nothing the other client wrote is lost.
  await click('li.checkpoint[data-checkpoint="0"] button[data-action="revert"]');
  await until(() => document.getElementById("confirm-dialog").open);
  await api("POST", "/api/v1/sessions/kyoto-trip/revert", { checkpoint: 0 });
  await api("POST", "/api/v1/sessions/kyoto-trip/messages", { messages: [{ role: "user", content: "Add a day in Nara." }] });
  const moved = await api("POST", "/api/v1/sessions/kyoto-trip/checkpoints", {});
  assert.equal(moved.checkpoint, 0);
  assert.notEqual(moved.tag, after.checkpoints[0].tag);
  await api("POST", "/api/v1/sessions/kyoto-trip/messages", { messages: [{ role: "assistant", content: "Nara it is." }] });
  const before = await api("GET", "/api/v1/sessions/kyoto-trip/log");
  await page.click("#confirm-ok");
  await until(() => document.getElementById("toast").textContent.includes("Revert refused"));
  assert.deepEqual(await api("GET", "/api/v1/sessions/kyoto-trip/log"), before);

});

test("the store shows a node's layers, metadata and relations, and search hits with their reasons, as the API has them", async () => {
  const uri = "strata://user/alice/memories/preferences/seat";
  await show(`#/store?uri=${encodeURIComponent(uri)}&q=${encodeURIComponent("aisle seat")}`);
  const stat = await api("GET", `/api/v1/fs/stat?uri=${encodeURIComponent(uri)}`);
  await until(() => document.getElementById("node-l2")?.textContent.length > 0);
  const shown = await page.evaluate(() => ({
    uri: document.getElementById("node-uri").textContent,
    l0: document.getElementById("node-l0").textContent,
    l1: document.getElementById("node-l1").textContent,
    relations: document.querySelectorAll("#node-relations li").length,
  }));
  assert.equal(shown.uri, stat.uri);
  assert.equal(shown.l0, stat.abstract || "(empty)");
  assert.equal(shown.l1, stat.overview || "(empty)");
  assert.equal(shown.relations, stat.relations.length);
  const l2 = await api("GET", `/api/v1/fs/read?uri=${encodeURIComponent(uri)}&level=2`);
  assert.equal(await page.$eval("#node-l2", (el) => el.textContent), l2.content);

  const { hits } = await api("POST", "/api/v1/search/find", { query: "aisle seat", limit: 10 });
  await until(() => document.querySelectorAll("#find-hits li").length > 0);
  const shownHits = await page.$$eval("#find-hits li", (lis) => lis.map((li) => ({ uri: li.dataset.uri, reason: li.querySelector(".reason").textContent })));
  assert.deepEqual(shownHits.map((h) => h.uri), hits.map((h) => h.uri));
  assert.ok(shownHits.every((h, i) => h.reason === `why: ${hits[i].reason || "—"}`));

  // The tree opens by keyboard: Tab to a directory's summary, Enter.
  await page.focus(".tree details > summary");
  await page.keyboard.press("Enter");
  await until(() => document.querySelector(".tree details[open] ul, .tree details[open] p"));
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(shots, "viewer-store.png"), fullPage: false });
});

test("a stored <script> or onerror attribute shows as text and never runs", async () => {
  // Stored strings that would run as script if the viewer ever parsed them as HTML.
  const uri = "strata://user/alice/memories/notes/injection";
  await api("POST", "/api/v1/fs/write", { uri, content: `Content: ${kXss}`, abstract: kXss });
  await api("POST", "/api/v1/sessions/kyoto-trip/messages", { role: "user", content: kXss });
  await show(`#/store?uri=${encodeURIComponent(uri)}&q=${encodeURIComponent("window pwned script")}`);
  await until(() => document.getElementById("node-l2")?.textContent.includes("<script>"));
  assert.equal(await page.$eval("#node-l0", (el) => el.textContent), kXss);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.evaluate(() => document.querySelectorAll("main img, main script").length), 0);
  for (const hash of ["#/context?session=kyoto-trip", "#/timeline?session=kyoto-trip",
                      `#/history?under=${encodeURIComponent("strata://user/alice")}`]) {
    await show(hash);
    if (!hash.startsWith("#/history")) {  // The audit log has no entry for a direct write.
      assert.ok(await page.$eval("main", (m) => m.textContent.includes("<script>window.__pwned")), hash);
    }
    assert.equal(await page.evaluate(() => window.__pwned), undefined, hash);
    assert.equal(await page.evaluate(() => document.querySelectorAll("main img, main script").length), 0, hash);
  }
});

test("memory history shows the audit trail with the commit that made each change, and jobs with dead letters", async () => {
  const uri = "strata://user/alice/memories/preferences/seat";
  await show(`#/history?uri=${encodeURIComponent(uri)}`);
  const trail = await api("GET", `/api/v1/memories/history?uri=${encodeURIComponent(uri)}`);
  assert.ok(trail.some((e) => e.action === "merge"), JSON.stringify(trail));
  await until((n) => document.querySelectorAll("#hist-entries > li").length === n, trail.length);
  const actions = await page.$$eval("#hist-entries > li", (lis) => lis.map((li) => li.dataset.action));
  assert.deepEqual(actions, trail.map((e) => e.action));
  assert.ok(await page.$eval("#hist-entries", (ol) => ol.textContent.includes("commit of kyoto-trip")));

  await page.screenshot({ path: path.join(shots, "viewer-history.png"), fullPage: false });
  const changes = await api("GET", "/api/v1/memories/changes?limit=50");
  await until((n) => document.querySelectorAll("#hist-changes tbody tr").length === n, changes.length);

  const tasks = await api("GET", "/api/v1/tasks");
  const dead = tasks.filter((t) => t.state === "dead");
  assert.equal(dead.length, 1, JSON.stringify(tasks));
  await until((n) => document.querySelectorAll("#hist-tasks tbody tr").length === n, tasks.length);
  assert.deepEqual(await page.$$eval('#hist-tasks tr[data-state="dead"]', (trs) => trs.map((tr) => Number(tr.dataset.task))),
                   dead.map((t) => t.id));
  await click('#hist-tasks tr[data-state="dead"] button');
  await until(() => document.getElementById("toast").textContent.includes("queued again"));
});

test("every page works with the keyboard and labels every control", async () => {
  for (const hash of ["#/context", "#/timeline", "#/store", "#/history"]) {
    await show(hash);
    const unlabelled = await page.evaluate(() => [...document.querySelectorAll("main input, main select")]
      .filter((el) => !el.getAttribute("aria-label") && !document.querySelector(`label[for="${el.id}"]`))
      .map((el) => el.id || el.outerHTML));
    assert.deepEqual(unlabelled, [], `unlabelled controls on ${hash}`);
  }
  // The first Tab reaches the skip link; the navigation is reachable and follows Enter.
  await show("#/context");
  await page.reload();  // Sequential focus starts at the top of a freshly loaded document.
  await until(() => document.getElementById("ctx-bar"));
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.className), "skip");
  await page.keyboard.press("Enter");  // Skips to the content, staying on the page.
  assert.equal(await page.evaluate(() => document.activeElement.id), "main");
  assert.ok(await page.evaluate(() => location.hash.startsWith("#/context")));
  await page.focus('nav a[data-page="store"]');
  await page.keyboard.press("Enter");
  await until(() => location.hash.startsWith("#/store") && document.querySelector('nav a[aria-current="page"]')?.dataset.page === "store");
});

test("the viewer works behind a path prefix", async () => {
  // A reverse proxy that serves the server under /strata/ (as nginx's `location /strata/ { proxy_pass ...; }`
  // with `proxy_set_header Host $host`: the Host a browser's Origin is compared with passes through).
  const proxy = http.createServer((req, res) => {
    if (!req.url.startsWith("/strata/")) {
      res.writeHead(404).end();
      return;
    }
    const upstream = http.request({ host: "127.0.0.1", port: strata.port, path: req.url.slice("/strata".length), method: req.method,
                                    headers: req.headers },
                                  (up) => { res.writeHead(up.statusCode, up.headers); up.pipe(res); });
    req.pipe(upstream);
  });
  await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
  try {
    await page.goto(`http://127.0.0.1:${proxy.address().port}/strata/#/context?session=kyoto-trip`);
    // Another origin: the key is asked again (session storage is per origin).
    await until(() => document.querySelector("main .error"));
    await page.click("#key-button");
    await page.type("#key-input", rootKey);
    await page.keyboard.press("Enter");  // Enter in the key field uses the key (not "forget").
    await until(() => document.getElementById("ctx-bar"));
    await until(() => document.getElementById("live").dataset.state === "live");
    // A write through the prefix (the Origin check sees the Host the proxy passed on), announced live.
    const before = await page.$eval("#ctx-messages", (ol) => ol.children.length);
    const status = await page.evaluate(async () => (await fetch("api/v1/sessions/kyoto-trip/checkpoints", {
      method: "POST", headers: { authorization: `Bearer ${sessionStorage.getItem("strata.apiKey")}`, "content-type": "application/json" },
      body: "{}" })).status);
    assert.equal(status, 200);
    await api("POST", "/api/v1/sessions/kyoto-trip/messages", { role: "user", content: "Through the prefix?" });
    await until((n) => document.querySelectorAll("#ctx-messages > li").length === n + 1, before);
  } finally {
    proxy.close();
  }
});

test("no page raised a script error", () => {
  assert.deepEqual(pageErrors, []);
});
