// A small MCP server built on the official TypeScript SDK (@modelcontextprotocol/sdk, low-level Server
// class), for testing Strata's MCP client against the reference implementation:
//   node mcp_sdk_server.mjs --stdio            newline-delimited JSON-RPC on stdin/stdout
//   node mcp_sdk_server.mjs --http             Streamable HTTP (stateful sessions, answers as event
//                                              streams); prints "listening PORT" on stdout
// Tools: add {a, b} -> "sum: N"; whoami -> the MCP_TEST_SECRET environment variable; fail -> an isError
// result; picture -> an image and a text block; slow {ms} -> answers after ms milliseconds.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

const requireNpm = createRequire((process.env.STRATA_NPM_CACHE ?? path.join(os.homedir(), ".cache/strata/npm")) + "/");
const { Server } = requireNpm("@modelcontextprotocol/sdk/server/index.js");
const { StdioServerTransport } = requireNpm("@modelcontextprotocol/sdk/server/stdio.js");
const { StreamableHTTPServerTransport } = requireNpm("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { ListToolsRequestSchema, CallToolRequestSchema, isInitializeRequest } = requireNpm("@modelcontextprotocol/sdk/types.js");

// A 1x1 PNG.
const PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

function makeServer() {
  const server = new Server({ name: "sdk-test-server", version: "1.2.3" },
                            { capabilities: { tools: {} }, instructions: "Test tools for Strata." });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: "add", description: "Adds two numbers.",
        inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } },
      { name: "whoami", description: "Returns the secret from the environment.", inputSchema: { type: "object", properties: {} } },
      { name: "fail", description: "Always fails.", inputSchema: { type: "object", properties: {} } },
      { name: "picture", description: "Returns a picture.", inputSchema: { type: "object", properties: {} } },
      { name: "slow", description: "Answers late.",
        inputSchema: { type: "object", properties: { ms: { type: "integer" } }, required: ["ms"] } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {};
    switch (request.params.name) {
      case "add":
        return { content: [{ type: "text", text: `sum: ${args.a + args.b}` }] };
      case "whoami":
        return { content: [{ type: "text", text: `secret: ${process.env.MCP_TEST_SECRET ?? "(unset)"}` }] };
      case "fail":
        return { content: [{ type: "text", text: "broken on purpose" }], isError: true };
      case "picture":
        return { content: [{ type: "image", data: PIXEL, mimeType: "image/png" }, { type: "text", text: "a pixel" }] };
      case "slow":
        await new Promise((resolve, reject) => {
          const timer = setTimeout(resolve, args.ms);
          extra.signal.addEventListener("abort", () => { clearTimeout(timer); reject(new Error("aborted")); });
        });
        return { content: [{ type: "text", text: "finally" }] };
      default:
        throw new Error(`no tool ${request.params.name}`);
    }
  });
  return server;
}

if (process.argv.includes("--stdio")) {
  await makeServer().connect(new StdioServerTransport());
} else {
  const transports = new Map();
  const httpServer = http.createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const parsed = body ? JSON.parse(body) : undefined;
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid || req.method !== "POST" || !isInitializeRequest(parsed)) {
        res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "no such session" }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await makeServer().connect(transport);
    }
    await transport.handleRequest(req, res, parsed);
  });
  httpServer.listen(0, "127.0.0.1", () => console.log(`listening ${httpServer.address().port}`));
  process.on("SIGTERM", () => process.exit(0));
}
