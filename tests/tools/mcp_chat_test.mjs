// `strata chat` calling tools of MCP servers (issue 19): servers built on the official TypeScript SDK over
// stdio and Streamable HTTP, Strata's own `strata mcp`, a server that cannot start and one that is too
// slow; and the built-in tools. The model is a script (--provider scripted): each test's first reply calls
// tools, the second answers in text; the tool results are read back from the session's context log.
// Run by ctest (mcp_chat):   node mcp_chat_test.mjs PATH/TO/strata   (STRATA_NPM_CACHE: scripts/test)
import { test, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const strataBin = process.argv[2];
const here = path.dirname(fileURLToPath(import.meta.url));
const sdkServer = path.join(here, "mcp_sdk_server.mjs");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "strata-mcp-chat-"));
let counter = 0;

after(() => fs.rmSync(work, { recursive: true, force: true }));

// Runs one scripted chat turn ("please") with `servers` as the MCP config; the first reply calls `calls`
// ([name, arguments] pairs), the second says "done". Returns {status, stdout, stderr, tools} where tools
// are the tool messages of the session log in order.
function chat(servers, calls, extra = []) {
  const dir = path.join(work, `run-${counter++}`);
  fs.mkdirSync(dir);
  const script = path.join(dir, "script.json");
  const config = path.join(dir, "mcp.json");
  const session = path.join(dir, "context.jsonl");
  fs.writeFileSync(script, JSON.stringify({
    model: "scripted-test",
    replies: [
      { parts: calls.map(([name, args], i) => ({ type: "function", id: `call_${i}`,
                                                   function: { name, arguments: JSON.stringify(args) } })) },
      { text: "done" },
    ],
  }));
  fs.writeFileSync(config, JSON.stringify({ mcpServers: servers }));
  // An empty config file, so that the developer's own ~/.config/strata/config.json plays no part.
  fs.writeFileSync(path.join(dir, "config.json"), "{}");
  const run = spawnSync(strataBin, ["chat", "--provider", "scripted", "--script", script, "--session", session,
                                    "--data", path.join(dir, "data"), "--mcp-config-file", config, ...extra],
                        { input: "please\n", encoding: "utf8", timeout: 60_000,
                          env: { ...process.env, STRATA_CONFIG: path.join(dir, "config.json") } });
  const lines = fs.existsSync(session) ? fs.readFileSync(session, "utf8").split("\n").filter(Boolean) : [];
  const tools = lines.map((l) => JSON.parse(l)).filter((m) => m.role === "tool");
  return { status: run.status, stdout: run.stdout, stderr: run.stderr, tools };
}

// The text of a tool message's content (a string, or the text parts of a list).
function text(message) {
  if (typeof message.content === "string") return message.content;
  return message.content.filter((p) => p.type === "text").map((p) => p.text).join("");
}

test("tools of an SDK server over stdio are called, in parallel, with the configured environment", () => {
  const r = chat({ sdk: { command: "node", args: [sdkServer, "--stdio"], env: { MCP_TEST_SECRET: "s3cret" } } },
                 [["add", { a: 2, b: 3 }], ["whoami", {}]]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /done/);
  assert.equal(r.tools.length, 2, r.stderr);
  assert.equal(r.tools[0].tool_call_id, "call_0");
  assert.equal(text(r.tools[0]), "sum: 5");
  assert.equal(text(r.tools[1]), "secret: s3cret");
  assert.match(r.stderr, /\[tool result\] add: sum: 5/);
});

test("tools of an SDK server over Streamable HTTP: an error result and an image come back as tool results", async () => {
  const server = spawn("node", [sdkServer, "--http"], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const port = await new Promise((resolve, reject) => {
      let out = "";
      server.stdout.on("data", (d) => {
        out += d;
        const m = out.match(/listening (\d+)/);
        if (m) resolve(Number(m[1]));
      });
      server.on("exit", (code) => reject(new Error(`SDK server exited ${code}`)));
    });
    const r = chat({ web: { url: `http://127.0.0.1:${port}/mcp` } }, [["fail", {}], ["picture", {}], ["add", { a: 40, b: 2 }]]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.tools.length, 3, r.stderr);
    assert.equal(text(r.tools[0]), "broken on purpose");
    assert.match(r.stderr, /\[tool error\] fail: broken on purpose/);
    const parts = r.tools[1].content;
    assert.ok(Array.isArray(parts), JSON.stringify(r.tools[1]));
    assert.equal(parts[0].type, "image_url");
    assert.match(parts[0].image_url.url, /^data:image\/png;base64,iVBOR/);
    assert.equal(parts[1].text, "a pixel");
    assert.equal(text(r.tools[2]), "sum: 42");
  } finally {
    server.kill("SIGTERM");
  }
});

test("strata mcp as the server: its tools beside the built-in ones, a taken name renamed", () => {
  const data = path.join(work, "mcp-data");
  const r = chat({ strata: { command: strataBin, args: ["mcp", "--data", data, "--user", "alice"] } },
                 [["count_tokens", { text: "hello world" }], ["strata__find", { query: "anything" }]]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /tool "find" is offered to the model as "strata__find"/);
  assert.equal(r.tools.length, 2, r.stderr);
  const counted = JSON.parse(text(r.tools[0]));
  assert.equal(counted.tokens, 2);
  assert.deepEqual(JSON.parse(text(r.tools[1])).hits, []);
});

test("a server that cannot start is a warning naming it; the chat goes on with the rest", () => {
  const r = chat({ ghost: { command: path.join(work, "no-such-server") },
                   sdk: { command: "node", args: [sdkServer, "--stdio"] } },
                 [["add", { a: 1, b: 1 }]]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /MCP server "ghost": cannot start .*no-such-server.*No such file or directory/);
  assert.equal(text(r.tools[0]), "sum: 2");
});

// The timeout bounds the handshake too: at 1 s a Node server that took longer to start on a busy machine was
// left out (a fresh-clone run, 2026-11-29: "tool "slow" not found"). 5 s still ends the 30 s tool early.
test("a tool that outlasts the server's timeout is an error result and the server is told to stop", () => {
  const r = chat({ sdk: { command: "node", args: [sdkServer, "--stdio"], timeout: 5 } },
                 [["slow", { ms: 30000 }], ["add", { a: 2, b: 2 }]]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(text(r.tools[0]), /MCP server "sdk": tools\/call got no answer within 5 s/);
  assert.equal(text(r.tools[1]), "sum: 4");
});

test("the built-in tools: read_file and list_directory on real files, an unknown tool explained", () => {
  const file = path.join(work, "notes.txt");
  fs.writeFileSync(file, "first line\nsecond line\n");
  const r = chat({}, [["read_file", { path: file, line_offset: 2 }], ["list_directory", { path: work }], ["nope", {}]]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(text(r.tools[0]), /^\s+2\tsecond line\n/);
  assert.doesNotMatch(text(r.tools[0]), /first line/);
  assert.match(text(r.tools[1]), /notes\.txt {2}\(23 bytes\)/);
  assert.match(text(r.tools[2]), /tool "nope" not found\. Available tools: read_file, list_directory, remember, find/);
});
