// tl-bench's ONNX Runtime peer: the same tests on the same *-past model in ONNX Runtime
// CPU (onnxruntime-node, installed into tests/ort by scripts/setup.sh), printed as
// tl-bench rows. tl-bench runs it with --peer and puts its rows beside its own:
//   tl-bench model.onnx --peer 'node scripts/bench_ort.mjs model.onnx -t 2'
//   node scripts/bench_ort.mjs model.onnx -p 128 -n 128 -d 0,1024 -r 3 [-t 2] [-o jsonl|md]
// Tests as tl-bench's: ppP times one step of P tokens after a depth-D context; tgN times
// N one-token steps after a context of max(D, 1) tokens (greedy: each feeds the argmax of
// the last); one untimed warm-up of each test, then -r timed repetitions.
import { createRequire } from 'module';
import fs from 'fs';
import os from 'os';

const require = createRequire(new URL('../tests/ort/package.json', import.meta.url));
const ort = require('onnxruntime-node');

const usage = 'usage: node scripts/bench_ort.mjs MODEL.onnx [-p LIST] [-n LIST] [-d LIST] [-r N] [-t THREADS] [-o jsonl|md]';
const argv = process.argv.slice(2);
const opt = { p: '128', n: '128', d: '0', r: '5', t: '2', o: 'md' };
let model = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (/^-[pndrto]$/.test(a) && i + 1 < argv.length) opt[a[1]] = argv[++i];
  else if (!a.startsWith('-') && !model) model = a;
  else { console.error(usage); process.exit(2); }
}
if (!model || !fs.existsSync(model)) { console.error(`bench_ort: error: ${model ?? 'no model given'}: no such file\n${usage}`); process.exit(model ? 1 : 2); }
const list = s => s.split(',').filter(x => x !== '').map(Number);
const threads = Number(opt.t);
const sess = await ort.InferenceSession.create(model, { intraOpNumThreads: threads, graphOptimizationLevel: 'all' });
const pastNames = sess.inputNames.filter(n => n.startsWith('past_key_values'));
const meta = sess.inputMetadata.find(m => m.name === pastNames[0]);
const [kvh, hd] = [meta.shape[1], meta.shape[3]];
const vocab = sess.outputMetadata.find(m => m.name === 'logits')?.shape?.at(-1);

let past;
function feeds(ids, start) {
  const n = ids.length, tot = start + n, f = {};
  f.input_ids = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, n]);
  if (sess.inputNames.includes('attention_mask')) f.attention_mask = new ort.Tensor('int64', new BigInt64Array(tot).fill(1n), [1, tot]);
  if (sess.inputNames.includes('position_ids'))
    f.position_ids = new ort.Tensor('int64', BigInt64Array.from([...Array(n).keys()].map(i => BigInt(start + i))), [1, n]);
  return Object.assign(f, past);
}
function argmaxLast(logits) {
  const V = logits.dims[2], n = logits.dims[1], d = logits.data;
  let b = 0, bv = -Infinity;
  for (let v = 0; v < V; v++) { const x = d[(n - 1) * V + v]; if (x > bv) { bv = x; b = v; } }
  return b;
}
let pos = 0;
async function step(ids) {
  const r = await sess.run(feeds(ids, pos));
  pos += ids.length;
  for (const n of pastNames) past[n] = r[n.replace('past_key_values', 'present')];
  return argmaxLast(r.logits);
}
let seed = 1;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % (vocab || 256);
async function once(t) {
  past = Object.fromEntries(pastNames.map(n => [n, new ort.Tensor('float32', new Float32Array(0), [1, kvh, 0, hd])]));
  pos = 0;
  const ctx = t.gen > 0 ? Math.max(t.depth, 1) : t.depth;
  let tok = ctx ? await step(Array.from({ length: ctx }, rand)) : 0;
  const t0 = performance.now();
  if (t.prompt > 0) await step(Array.from({ length: t.prompt }, rand));
  else for (let i = 0; i < t.gen; i++) tok = await step([tok]);
  return (performance.now() - t0) / 1000;
}
const tests = [];
for (const d of list(opt.d).length ? list(opt.d) : [0]) {
  for (const p of list(opt.p)) tests.push({ prompt: p, gen: 0, depth: d });
  for (const n of list(opt.n)) tests.push({ prompt: 0, gen: n, depth: d });
}
const engine = `onnxruntime-node ${ort.env.versions?.common ?? ''} CPU ${threads} threads`;
const device = `cpu: ${os.cpus()[0]?.model ?? 'unknown'}`;
const rows = [];
for (const t of tests) {
  const name = (t.prompt ? `pp${t.prompt}` : `tg${t.gen}`) + (t.depth ? `@d${t.depth}` : '');
  console.error(`bench_ort: ${name}: warm-up`);
  await once(t);
  const samples = [];
  for (let r = 0; r < Number(opt.r); r++) {
    console.error(`bench_ort: ${name}: ${r + 1}/${opt.r}`);
    samples.push((t.prompt || t.gen) / await once(t));
  }
  const avg = samples.reduce((a, b) => a + b, 0) / samples.length;
  const sd = samples.length > 1 ? Math.sqrt(samples.reduce((a, b) => a + (b - avg) ** 2, 0) / (samples.length - 1)) : 0;
  rows.push({ model: model.replace(/\/model\.onnx$/, '').split('/').pop().replace(/\.onnx$/, ''), engine, device, test: name,
    n_prompt: t.prompt, n_gen: t.gen, n_depth: t.depth, reps: samples.length, avg_ts: avg, stddev_ts: sd, samples_ts: samples });
}
if (opt.o === 'jsonl') for (const r of rows) console.log(JSON.stringify(r));
else {
  console.log('| model | engine | test | t/s |\n| :--- | :--- | :--- | ---: |');
  for (const r of rows) console.log(`| ${r.model} | ${r.engine} | ${r.test} | ${r.avg_ts.toFixed(2)} ± ${r.stddev_ts.toFixed(2)} |`);
}
