// The chat template tests' reference: @huggingface/jinja (what transformers.js renders
// chat templates with; scripts/setup.sh installs it into tests/tok) over each line of
// REQUESTS, a JSON object {"messages": [...], "add_generation_prompt": bool}, with the
// special tokens of CONFIG (a tokenizer_config.json) as variables beside them, as
// apply_chat_template passes them. OUT gets a JSON string a line: the rendered prompt,
// or {"error": message} where the template raised.
//   node scripts/chat_ref.mjs tokenizer_config.json REQUESTS OUT
import fs from "fs";
import { createRequire } from "module";

const require = createRequire(new URL("../tests/tok/package.json", import.meta.url));
const { Template } = require("@huggingface/jinja");
const [file, requests, out] = process.argv.slice(2);
const config = JSON.parse(fs.readFileSync(file, "utf8"));
let source = config.chat_template;
if (Array.isArray(source)) source = source.find((t) => t.name === "default").template;
const tokens = {};
for (const [k, v] of Object.entries(config))
  if (k.endsWith("_token")) {
    if (typeof v === "string") tokens[k] = v;
    else if (v && typeof v.content === "string") tokens[k] = v.content;
  }
const template = new Template(source);
const lines = fs.readFileSync(requests, "utf8").split("\n").filter((l) => l.length > 0);
const rendered = lines.map((l) => {
  try {
    return JSON.stringify(template.render({ ...tokens, ...JSON.parse(l) }));
  } catch (e) {
    return JSON.stringify({ error: String(e.message) });
  }
});
fs.writeFileSync(out, rendered.join("\n") + "\n");
