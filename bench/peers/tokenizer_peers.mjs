// Peers for the tokenizer benchmark, run on the same files in the same run as Strata's:
//   tiktoken (npm; WASM build of OpenAI's Rust tiktoken) encode_ordinary, and
//   gpt-tokenizer (the fastest pure-JS tokenizer) encode.
// Prints one line per (peer, encoding, file): MB/s single-threaded, after a warm-up.
// Usage: STRATA_NPM_CACHE=... node tokenizer_peers.mjs FILE...
import fs from "fs";
import path from "path";
import { createRequire } from "module";

const require = createRequire(process.env.STRATA_NPM_CACHE + "/");
const { get_encoding } = require("tiktoken");
const gpt = {
  cl100k_base: require("gpt-tokenizer/cjs/encoding/cl100k_base"),
  o200k_base: require("gpt-tokenizer/cjs/encoding/o200k_base"),
};

function measure(fn, text) {
  fn(text);  // Warm-up (JIT, caches).
  let runs = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < 2e9 || runs < 3) {
    fn(text);
    runs++;
    elapsed = Number(process.hrtime.bigint() - start);
  }
  const bytes = Buffer.byteLength(text, "utf8");
  return (bytes * runs) / (elapsed / 1e9) / (1 << 20);
}

for (const encoding of ["cl100k_base", "o200k_base"]) {
  const tk = get_encoding(encoding);
  for (const file of process.argv.slice(2)) {
    const text = fs.readFileSync(file, "utf8");
    const name = path.basename(file);
    const tkRate = measure((t) => tk.encode_ordinary(t), text);
    const gptRate = measure((t) => gpt[encoding].encode(t, { allowedSpecial: new Set(), disallowedSpecial: new Set() }), text);
    console.log(`${encoding}\t${name}\ttiktoken-npm\t${tkRate.toFixed(2)}`);
    console.log(`${encoding}\t${name}\tgpt-tokenizer\t${gptRate.toFixed(2)}`);
  }
  tk.free();
}
