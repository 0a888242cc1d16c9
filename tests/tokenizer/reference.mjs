// Produces the reference token ids for the tokenizer test with the npm `tiktoken` package (WASM build of
// OpenAI's tiktoken): every file of the corpus directory, plus random strings from a seeded generator that
// mixes the character classes the split patterns care about. Writes one JSON object per line:
//   {"name": ..., "text": ..., "cl100k_base": [...], "o200k_base": [...]}
// Usage: node reference.mjs CORPUS_DIR OUT.jsonl [RANDOM_CASES]
import fs from "fs";
import path from "path";
import { createRequire } from "module";

const require = createRequire(process.env.STRATA_NPM_CACHE + "/");
const { get_encoding } = require("tiktoken");

const [corpusDir, outPath, randomArg] = process.argv.slice(2);
const randomCases = Number(randomArg ?? 2000);
const encodings = ["cl100k_base", "o200k_base"].map((name) => [name, get_encoding(name)]);

// xorshift32: deterministic across runs and machines.
let state = 20261122;
const rand = (n) => {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state % n;
};
const pools = [
  "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  ", "\t", "\n", "\r\n", "\r",
  ".,;:!?-_()[]{}<>/\\|@#$%^&*+=~`\"", "'", "'s", "'LL", "'ve", "ſ", "你好世界中文字", "ひらがなカタカナ",
  "한국어", "العربية", "हिन्दी", "\u0301\u0308\u0323", "😀👍🏽👨‍👩‍👧🇯🇵", "٣½²Ⅻ①", "\u00a0\u3000\u2028\u200b\ufeff",
  "ÀÉÎÕÜßæøåñçǅǈ", "ΑΒΓαβγ", "АБВабв", "<|endoftext|>",
];
const randomString = () => {
  let s = "";
  const parts = 1 + rand(12);
  for (let i = 0; i < parts; i++) {
    const pool = Array.from(pools[rand(pools.length)]);
    const len = 1 + rand(6);
    for (let k = 0; k < len; k++) s += pool[rand(pool.length)];
  }
  return s;
};

const out = fs.openSync(outPath, "w");
const emit = (name, text) => {
  const row = { name, text };
  for (const [encName, enc] of encodings) row[encName] = Array.from(enc.encode_ordinary(text));
  fs.writeSync(out, JSON.stringify(row) + "\n");
};
for (const file of fs.readdirSync(corpusDir).sort()) {
  emit(file, fs.readFileSync(path.join(corpusDir, file), "utf8"));
}
for (let i = 0; i < randomCases; i++) emit(`random-${i}`, randomString());
fs.closeSync(out);
