// The tokenizer tests' reference: Hugging Face's Rust `tokenizers` (the Node binding
// @anush008/tokenizers, which scripts/setup.sh installs into tests/tok) over each line of
// CORPUS (decoded as UTF-8 with U+FFFD for invalid bytes, its newline dropped): IDS gets
// encode(line, add_special_tokens=True)'s ids, space-separated, a line each; TEXT gets
// decode(those ids, skip_special_tokens=False), a JSON string a line.
//   node scripts/tokenizer_ref.mjs tokenizer.json CORPUS IDS TEXT
import fs from "fs";
import { createRequire } from "module";

const require = createRequire(new URL("../tests/tok/package.json", import.meta.url));
const { Tokenizer } = require("@anush008/tokenizers");
const [file, corpus, idsOut, textOut] = process.argv.slice(2);
const t = Tokenizer.fromFile(file);
const bytes = fs.readFileSync(corpus);
const lines = bytes.toString("utf8").split("\n");
if (lines[lines.length - 1] === "") lines.pop();
const ids = [], texts = [];
for (const l of lines) {
  const e = await t.encode(l, null, { addSpecialTokens: true });
  ids.push(e.getIds().join(" "));
  texts.push(JSON.stringify(await t.decode(e.getIds(), false)));
}
fs.writeFileSync(idsOut, ids.join("\n") + "\n");
fs.writeFileSync(textOut, texts.join("\n") + "\n");
