// Shared by the npm-client tests: the pinned npm packages, a `strata serve` child process, and plain API calls.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { createRequire } from "node:module";

// Loads a package from STRATA_NPM_CACHE (scripts/lib.sh installs the pinned versions there).
export const requireNpm = createRequire((process.env.STRATA_NPM_CACHE ?? path.join(os.homedir(), ".cache/strata/npm")) + "/");

// Starts `strata serve` on a free loopback port with `args` and `env` added (a fresh data directory unless
// `args` names one); resolves to
// { port, work, stop(), call(method, url, key, body) } once it prints its address.
export async function startStrata(strataBin, args, env) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "strata-client-"));
  const data = args.includes("--data") ? [] : ["--data", path.join(work, "data")];
  const child = spawn(strataBin, ["serve", ...data, "--listen", "127.0.0.1:0", ...args],
                      { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
  const port = await new Promise((resolve, reject) => {
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", (code) => reject(new Error(`strata serve exited ${code}: ${err}`)));
  });
  return {
    port,
    work,
    async call(method, url, key, body) {
      const r = await fetch(`http://127.0.0.1:${port}${url}`, {
        method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: r.status, json: await r.json() };
    },
    async stop() {
      child.kill("SIGTERM");
      await new Promise((r) => (child.exitCode !== null ? r() : child.on("exit", r)));
      fs.rmSync(work, { recursive: true, force: true });
    },
  };
}

// Replies to `res` with `parts` one at a time, a few milliseconds apart (a stream that arrives in pieces).
export function writeSlowly(res, parts) {
  let i = 0;
  const next = () => {
    if (i === parts.length) return res.end();
    res.write(parts[i++]);
    setTimeout(next, 5);
  };
  next();
}

// Starts a fake upstream (`handler`) on loopback and `strata serve` in front of it (provider `provider`,
// model `model`, upstream key "upstream-secret", root key `rootKey`, then `extra` flags), and issues a user
// key for alice. Resolves to { strata, userKey, stop() }.
export async function startProxy(strataBin, { handler, provider, model, rootKey, extra = [] }) {
  const upstream = http.createServer(handler);
  await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
  const strata = await startStrata(strataBin, ["--provider", provider, "--model", model,
                                               "--base-url", `http://127.0.0.1:${upstream.address().port}/v1`,
                                               "--api-key-env", "FAKE_UPSTREAM_KEY", ...extra],
                                   { STRATA_ROOT_KEY: rootKey, FAKE_UPSTREAM_KEY: "upstream-secret" });
  const issued = await strata.call("POST", "/api/v1/admin/keys", rootKey, { user: "alice" });
  if (issued.status !== 200) throw new Error(`issuing a key failed: ${JSON.stringify(issued.json)}`);
  return {
    strata,
    userKey: issued.json.result.key,
    async stop() {
      await strata.stop();
      upstream.close();
    },
  };
}

// A fake upstream's handler: reads each JSON request into `received`, answers model "broken" with a 429 of
// body `rateLimitError`, and passes the others to answer(request, res).
export function fakeUpstream(received, rateLimitError, answer) {
  return (req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const request = JSON.parse(body);
      received.push({ headers: req.headers, body: request });
      if (request.model === "broken") {
        // With the back-off hints real providers send (the SDKs read retry-after).
        res.writeHead(429, { "content-type": "application/json", "retry-after": "7", "x-ratelimit-remaining-requests": "0",
                             "anthropic-ratelimit-requests-remaining": "0" });
        res.end(JSON.stringify(rateLimitError));
        return;
      }
      answer(request, res);
    });
  };
}

// A response header of an SDK's error (a fetch Headers object, or a plain one in older SDKs).
export function header(error, name) {
  const headers = error?.headers;
  if (!headers) return undefined;
  return typeof headers.get === "function" ? headers.get(name) ?? undefined : headers[name];
}
