// Runs a model in ONNX Runtime (CPU, onnxruntime-node) for tl's tests.
// usage: node run_ort.mjs MODEL.onnx INPUTS.json OUTPUT_NAME OUT.bin
// INPUTS.json: [{"name", "dtype": "int64"|"float32", "dims": [...], "data": [...]}]; writes the
// output's float32 data, raw, to OUT.bin.
import * as ort from 'onnxruntime-node';
import fs from 'fs';

const [model, inputs, output, out] = process.argv.slice(2);
const sess = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
const feeds = {};
for (const t of JSON.parse(fs.readFileSync(inputs))) {
  feeds[t.name] = t.dtype === 'int64'
    ? new ort.Tensor('int64', BigInt64Array.from(t.data.map(BigInt)), t.dims)
    : new ort.Tensor('float32', Float32Array.from(t.data), t.dims);
}
const r = await sess.run(feeds, [output]);
fs.writeFileSync(out, Buffer.from(r[output].data.buffer, r[output].data.byteOffset, r[output].data.byteLength));
