// A whole-process peer for the tokenizer benchmark: loads one peer library, encodes one file once and
// prints the token count (run under a timer by bench/run_tokenizer_bench.sh, beside `strata tokens count`).
// Usage: STRATA_NPM_CACHE=... node tokenizer_once.mjs tiktoken|gpt-tokenizer ENCODING FILE
import fs from "fs";
import { createRequire } from "module";
const require = createRequire(process.env.STRATA_NPM_CACHE + "/");
const [peer, encoding, file] = process.argv.slice(2);
const text = fs.readFileSync(file, "utf8");
let n;
if (peer === "tiktoken") { const { get_encoding } = require("tiktoken"); const e = get_encoding(encoding); n = e.encode_ordinary(text).length; e.free(); }
else if (peer === "gpt-tokenizer") { const g = require(`gpt-tokenizer/cjs/encoding/${encoding}`); n = g.encode(text, { allowedSpecial: new Set(), disallowedSpecial: new Set() }).length; }
else throw new Error(`unknown peer ${peer}`);
console.log(n);
