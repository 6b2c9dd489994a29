// Writes the tokenizer tests' corpus (docs/tokenizer.md): lines mixing English with
// contractions, code, CJK, Arabic, Greek, Cyrillic, Devanagari, emoji (ZWJ sequences,
// flags, skin tones), accented Latin in NFC and NFD, runs of spaces and tabs, digits,
// the families' special tokens written in the text, very long lines, and invalid UTF-8.
// Deterministic (a seeded generator), so every run and machine writes the same bytes.
//   node scripts/tokenizer_corpus.mjs OUT [BYTES=1048576]
import fs from "fs";

const [out, bytesArg] = process.argv.slice(2);
if (!out) {
  console.error("usage: node scripts/tokenizer_corpus.mjs OUT [BYTES]");
  process.exit(2);
}
const target = Number(bytesArg ?? 1 << 20);
let seed = 0x7e57c0de;
const rand = () => {  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (n) => Math.floor(rand() * n);

const words = ("the of and to in is you that it he was for on are as with his they at be this have from or one had by " +
  "word but not what all were we when your can said there use an each which she do how their if will up other about " +
  "out many then them these so some her would make like him into time has look two more write go see number no way " +
  "could people my than first water been call who oil its now find long down day did get come made may part").split(" ");
const contractions = ["it's", "I'm", "they'll", "we'd", "you've", "she's", "don't", "can't", "I'd've", "Y'ALL'RE", "O'Neil's"];
const code = [
  "def f(x):\n    return x ** 2  # square", "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
  "\tif err != nil {\n\t\treturn nil, err\n\t}", "const y = await fetch(`https://example.org/api?q=${q}&n=10`);",
  "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;", "#include <vector>\nstd::vector<float> v(1024, 0.0f);",
  "    x_{i+1} = x_i - lr * grad(x_i)", "<div class=\"card\"><span>&nbsp;Hi&amp;bye</span></div>",
];
const scripts = [
  "日本語のテキストとカタカナ、ひらがな。", "中文文本，包括标点符号和数字１２３。", "한국어 텍스트와 띄어쓰기 예제입니다.",
  "مرحبا بالعالم، هذا نص عربي مع أرقام ١٢٣.", "Ελληνικά κείμενα με τόνους: άέήίόύώ.", "Русский текст: съешь же ещё этих мягких булок.",
  "हिन्दी पाठ का उदाहरण, संख्या १२३।", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "עברית נכתבת מימין לשמאל.",
];
const emoji = ["🙂", "😂🤣", "👨‍👩‍👧‍👦", "🧑‍💻", "👩🏽‍🚀", "👍🏿", "🇫🇷🇯🇵🇧🇷", "🏳️‍🌈", "❤️‍🔥", "🐈‍⬛", "1️⃣#️⃣", "✌🏻"];
const accented = ["café", "naïve", "résumé", "Ångström", "Zürich", "São Paulo", "Dvořák", "crème brûlée", "Ærøskøbing", "ŋ ĳ ǅ"];
const specials = ["<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>",
  "<|im_start|>system", "<|im_end|>", "<|endoftext|>", "<bos>", "<eos>", "<start_of_turn>model", "<end_of_turn>",
  "<pad>", "<mask>", "[INST]", "<think>"];
const spaces = () => pick([" ", "  ", "   ", "\t", "\t\t", " \t ", "        ", "\u00a0", "\u3000", "\u2009"]);

function piece() {
  switch (int(12)) {
    case 0: return pick(contractions);
    case 1: return pick(code).replace(/\n/g, " ");
    case 2: return pick(scripts);
    case 3: return pick(emoji);
    case 4: return pick(accented).normalize("NFC");
    case 5: return pick(accented).normalize("NFD");
    case 6: return String(int(1e9)) + (rand() < 0.3 ? "." + int(1e5) : "");
    case 7: return pick(specials);
    case 8: return String.fromCodePoint(0x4e00 + int(0x5000), 0x4e00 + int(0x5000), 0xac00 + int(0x2000));
    case 9: return spaces();
    default: return pick(words) + (rand() < 0.2 ? pick([",", ".", "!", "?", ";", ":", "..."]) : "");
  }
}

const chunks = [];
let size = 0;
for (let line = 0; size < target; ++line) {
  let buf;
  if (line % 97 == 13) {
    buf = Buffer.from("x".repeat(2000 + int(30000)) + " " + pick(words).repeat(500));  // very long
  } else if (line % 53 == 7) {  // invalid UTF-8: lone continuation, truncated, overlong, surrogate, past U+10FFFF
    const bad = [[0x80], [0xff, 0xfe], [0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80]];
    buf = Buffer.concat([Buffer.from(pick(words) + " "), Buffer.from(pick(bad)), Buffer.from(" " + pick(words))]);
  } else {
    const n = 1 + int(60);
    let s = "";
    for (let i = 0; i < n; ++i) s += (i && rand() < 0.85 ? " " : "") + piece();
    if (rand() < 0.1) s = s.toUpperCase();
    if (rand() < 0.1) s = spaces() + s + spaces();
    buf = Buffer.from(s);
  }
  chunks.push(buf, Buffer.from("\n"));
  size += buf.length + 1;
}
fs.writeFileSync(out, Buffer.concat(chunks));
