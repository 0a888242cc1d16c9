// The client is typed by docs/api/openapi.yaml: build.sh compiling it against the real document is the
// positive half; here the client's sources are compiled against a copy of the document with routes and
// members changed the way a careless edit of the server would change them, and tsc must name each change.
// Run by test/run.sh (STRATA_NPM_CACHE: the pinned typescript and openapi-typescript).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const openapiPath = path.resolve(packageDir, "../../docs/api/openapi.yaml");
const npmCache = process.env.STRATA_NPM_CACHE ?? path.join(os.homedir(), ".cache/strata/npm");

// Returns `doc` with `from` replaced by `to` inside the path item `route` ("/api/v1/fs/ls"; the whole document
// when null), where `from` must occur exactly once.
function change(doc, route, from, to) {
  let start = 0;
  let end = doc.length;
  if (route !== null) {
    start = doc.indexOf(`\n  ${route}:\n`);
    assert.notEqual(start, -1, `the API document has no ${route}; update this test`);
    const next = doc.slice(start + 1).search(/\n(  \/|components:)/);
    end = next === -1 ? doc.length : start + 1 + next;
  }
  const item = doc.slice(start, end);
  const at = item.indexOf(from);
  assert.ok(at !== -1 && item.indexOf(from, at + 1) === -1, `${JSON.stringify(from)} is not once in ${route}; update this test`);
  return doc.slice(0, start) + item.slice(0, at) + to + item.slice(at + from.length) + doc.slice(end);
}

test("a route or member the client uses, changed in openapi.yaml, fails the client's build", () => {
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), "strata-ts-contract-"));
  try {
    fs.cpSync(path.join(packageDir, "src"), path.join(stage, "src"), {
      recursive: true, filter: (p) => !p.includes(`${path.sep}generated`),
    });
    fs.copyFileSync(path.join(packageDir, "tsconfig.json"), path.join(stage, "tsconfig.json"));
    fs.copyFileSync(path.join(packageDir, "package.json"), path.join(stage, "package.json"));

    let doc = fs.readFileSync(openapiPath, "utf8");
    doc = change(doc, null, "\n  /api/v1/search/find:\n", "\n  /api/v1/search/query:\n");  // A route renamed.
    doc = change(doc, "/api/v1/fs/mv", "\n    post:\n", "\n    put:\n");                 // A method changed.
    doc = change(doc, "/api/v1/fs/write", "overwrite:", "replace:");                        // A body member renamed.
    doc = change(doc, "/api/v1/fs/ls", "name: recursive", "name: deep");                    // A query parameter renamed.
    doc = change(doc, "/api/v1/fs/read", "content: *id003", "text: *id003");                // A result member renamed.
    doc = change(doc, "/api/v1/tasks/{id}", "type: integer", "type: boolean");              // A path parameter's type.
    fs.writeFileSync(path.join(stage, "openapi.yaml"), doc);

    fs.mkdirSync(path.join(stage, "src/generated"));
    const npm = (tool) => path.join(npmCache, "node_modules", tool);
    execFileSync("node", [npm("openapi-typescript/bin/cli.js"), path.join(stage, "openapi.yaml"),
                          "--output", path.join(stage, "src/generated/openapi.ts")], { stdio: "pipe" });
    let output = "";
    assert.throws(() => {
      try {
        execFileSync("node", [npm("typescript/bin/tsc"), "-p", path.join(stage, "tsconfig.json"), "--noEmit", "--pretty", "false"],
                     { stdio: "pipe" });
      } catch (error) {
        output = String(error.stdout);
        throw error;
      }
    }, "tsc accepted the client against a document that no longer has its routes");
    const errors = output.split("\n").filter((line) => line.includes("error TS"));
    const expect = (what, pattern) =>
      assert.ok(errors.some((line) => pattern.test(line)), `${what}: not reported in\n${output}`);
    expect("the renamed route", /"\/api\/v1\/search\/find"' is not assignable to parameter of type 'keyof paths'/);
    expect("the changed method", /Argument of type '"post"' is not assignable/);
    expect("the renamed body member", /'overwrite' does not exist in type/);
    expect("the renamed query parameter", /'recursive' does not exist in type '\{ uri\?: string \| undefined; deep\?/);
    expect("the renamed result member", /Property 'content' does not exist on type '\{ uri: string; level: number; text/);
    expect("the path parameter's new type", /Type 'number' is not assignable to type 'boolean'/);
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
});
