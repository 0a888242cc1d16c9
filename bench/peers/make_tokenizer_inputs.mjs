// Generates ~1 MiB low-repetition benchmark inputs (seeded, deterministic), so caches that memoise pieces
// help far less than on the repeated test corpus:
//   gen-prose.txt    English-like prose: common words mixed with generated words, names and numbers;
//   gen-code.txt     code-like lines with generated identifiers, literals and operators;
//   gen-chinese.txt  clauses of random common Han characters (U+4E00-U+7FFF) between CJK punctuation.
// Usage: node make_tokenizer_inputs.mjs OUT_DIR
import fs from "fs";
import path from "path";

let state = 987654321;
const rand = (n) => {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state % n;
};
const pick = (xs) => xs[rand(xs.length)];
const common = ("the of and to in is that it for was on are as with his they at be this from have or by one had " +
  "not but what all were when we there can an your which their said if do will each about how up out them then " +
  "she many some so these would other into has more her two like him see time could no make than first been its " +
  "who now people my made over did down only way find use may water long little very after words called just " +
  "where most know get through back much before go good new write our used me man too any day same right look " +
  "think also around another came come work three word must because does part even place well such here take why " +
  "things help put years different away again off went old number great tell men say small every found still " +
  "between name should home big give air line set own under read last never us left end along while might next " +
  "sound below saw something thought both few those always looked show large often together asked house don't " +
  "world going want school important until form food keep children feet land side without boy once animals life " +
  "enough took sometimes four head above kind began almost live page got earth need far hand high year mother " +
  "light parts country father let night following picture being study second eyes soon times story boys since " +
  "white days ever paper hard near sentence better best across during today others however sure means knew it's " +
  "try told young miles sun ways thing whole hear example heard several change answer room sea against top turned " +
  "learn point city play toward five using himself usually").split(" ");
const syllables = ["ka", "lo", "mi", "tren", "dor", "vel", "qua", "sti", "ber", "nal", "ix", "ou", "gra", "phe", "zu", "ran", "tor", "cle", "ism", "ment", "ation", "ly", "ing", "ed"];
const genWord = () => { let w = ""; const n = 1 + rand(4); for (let i = 0; i < n; i++) w += pick(syllables); return w; };
const cap = (w) => w[0].toUpperCase() + w.slice(1);

function prose(bytes) {
  let out = "";
  while (Buffer.byteLength(out) < bytes) {
    const words = 8 + rand(20);
    let sentence = [];
    for (let i = 0; i < words; i++) {
      const r = rand(100);
      if (r < 72) sentence.push(pick(common));
      else if (r < 90) sentence.push(genWord());
      else if (r < 95) sentence.push(cap(genWord()));
      else sentence.push(String(rand(100000)));
      if (rand(12) === 0) sentence[sentence.length - 1] += ",";
    }
    out += cap(sentence.join(" ")) + pick([". ", ". ", "? ", "! ", ".\n\n"]);
  }
  return out;
}

function code(bytes) {
  const kw = ["if", "for", "while", "return", "const", "auto", "int", "void", "std::string", "size_t", "else", "static"];
  const ident = () => pick(["get", "set", "make", "parse", "read", "write", "is", "has", "to", "from"]) + cap(genWord()) + (rand(3) ? cap(genWord()) : "");
  let out = "", depth = 1;
  while (Buffer.byteLength(out) < bytes) {
    const ind = "  ".repeat(depth);
    switch (rand(8)) {
      case 0: out += `${ind}${pick(kw)} ${ident()} = ${ident()}(${genWord()}_${rand(100)}, ${rand(10000)});\n`; break;
      case 1: out += `${ind}if (${genWord()} != nullptr && ${genWord()}->${ident()}() >= 0x${rand(65536).toString(16)}) {\n`; depth = Math.min(depth + 1, 6); break;
      case 2: out += `${ind}}\n`; depth = Math.max(depth - 1, 1); break;
      case 3: out += `${ind}// ${cap(pick(common))} ${pick(common)} ${genWord()} ${pick(common)}.\n`; break;
      case 4: out += `${ind}${ident()}("${genWord()} ${pick(common)}: %d\\n", ${genWord()}[${rand(64)}]);\n`; break;
      case 5: out += `${ind}for (size_t i = 0; i < ${genWord()}.size(); ++i) ${genWord()} += ${genWord()}[i] * ${rand(1000)};\n`; break;
      case 6: out += `${ind}return ${ident()}(${genWord()}) | (${genWord()} << ${rand(32)});\n`; break;
      default: out += "\n";
    }
  }
  return out;
}

function chinese(bytes) {
  let out = "";
  while (Buffer.byteLength(out) < bytes) {
    const n = 3 + rand(18);
    for (let i = 0; i < n; i++) out += String.fromCodePoint(0x4e00 + rand(0x3200));
    out += pick(["，", "，", "。", "、", "；", "：", "！", "？", "。\n"]);
  }
  return out;
}

const dir = process.argv[2];
fs.writeFileSync(path.join(dir, "gen-code.txt"), code(1 << 20));
fs.writeFileSync(path.join(dir, "gen-prose.txt"), prose(1 << 20));
fs.writeFileSync(path.join(dir, "gen-chinese.txt"), chinese(1 << 20));
