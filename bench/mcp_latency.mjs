// Tool-call latency over MCP, with the official TypeScript client (@modelcontextprotocol/sdk):
//   strata mcp (stdio) and strata serve's /mcp (Streamable HTTP), beside the SDK's own McpServer with one
//   tool that does nothing (stdio, the same client): the protocol's and the client's floor.
// Run: bench/run_mcp_bench.sh   (builds strata, installs the pinned npm packages, seeds a small store)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { requireNpm, startStrata } from "../tests/server/harness.mjs";

const { Client } = requireNpm("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = requireNpm("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = requireNpm("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [strataBin, data] = process.argv.slice(2);
const calls = Number(process.env.STRATA_BENCH_CALLS ?? 1000);

async function measure(client, name, args) {
  for (let i = 0; i < 20; ++i) await client.callTool({ name, arguments: args });  // Warm-up.
  const times = [];
  for (let i = 0; i < calls; ++i) {
    const t = process.hrtime.bigint();
    const r = await client.callTool({ name, arguments: args });
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
  }
  times.sort((a, b) => a - b);
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(3);
  return { p50: at(0.5), p99: at(0.99), rps: (1000 / (times.reduce((a, b) => a + b, 0) / times.length)).toFixed(0) };
}

function row(label, m) {
  console.log(`| ${label.padEnd(46)} | ${m.p50.padStart(8)} ms | ${m.p99.padStart(8)} ms | ${m.rps.padStart(6)} |`);
}

const peerScript = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mcp-peer-")), "peer.mjs");
fs.writeFileSync(peerScript, `
import { createRequire } from "node:module";
const require = createRequire(${JSON.stringify((process.env.STRATA_NPM_CACHE ?? path.join(os.homedir(), ".cache/strata/npm")) + "/")});
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const server = new McpServer({ name: "peer", version: "1.0.0" });
server.registerTool("health", { description: "does nothing" }, async () => ({ content: [{ type: "text", text: "ok" }] }));
await server.connect(new StdioServerTransport());
`);

console.log(`| tool call (${calls} sequential calls, one client) | p50 | p99 | calls/s |`);
console.log("|---|---|---|---|");
const stdio = new Client({ name: "bench", version: "1" });
await stdio.connect(new StdioClientTransport({ command: strataBin, args: ["mcp", "--data", data, "--user", "bench"], stderr: "ignore" }));
row("strata mcp (stdio): health", await measure(stdio, "health", {}));
row("strata mcp (stdio): find, 1,000 memories", await measure(stdio, "find", { query: "what does the user drink", limit: 5 }));
await stdio.close();

const strata = await startStrata(strataBin, ["--data", data], {});
const http = new Client({ name: "bench", version: "1" });
await http.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${strata.port}/mcp`)));
row("strata serve /mcp (Streamable HTTP): health", await measure(http, "health", {}));
row("strata serve /mcp (Streamable HTTP): find", await measure(http, "find", { query: "what does the user drink", limit: 5 }));
await http.close();
await strata.stop();

const peer = new Client({ name: "bench", version: "1" });
await peer.connect(new StdioClientTransport({ command: process.execPath, args: [peerScript], stderr: "ignore" }));
row("peer: the SDK's McpServer, a no-op tool (stdio)", await measure(peer, "health", {}));
await peer.close();
