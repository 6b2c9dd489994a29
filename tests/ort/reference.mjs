// A model's outputs from ONNX Runtime (CPU, onnxruntime-node) on a test data set's inputs:
// the reference of a model made here (tl-quant --format dequantized: the quantized
// model's twin with the dequantized weights as floats, scripts/support_matrix.sh).
// usage: node reference.mjs MODEL.onnx SRC_SET DST_SET
//   reads SRC_SET/input_*.pb (onnx.TensorProto), writes them and DST_SET/output_J.pb
//   (one per model output, named after it) as a test_data_set_* that tl-run --check reads.
import * as ort from 'onnxruntime-node';
import fs from 'fs';
import path from 'path';

const [model, src, dst] = process.argv.slice(2);
if (!dst) {
  console.error('usage: node reference.mjs MODEL.onnx SRC_SET DST_SET');
  process.exit(2);
}

// The TensorProto fields a test data set uses: dims 1, data_type 2, float_data 4,
// int32_data 5, int64_data 7, name 8, raw_data 9.
const TYPES = { 1: ['float32', Float32Array], 6: ['int32', Int32Array], 7: ['int64', BigInt64Array],
  9: ['bool', Uint8Array], 11: ['float64', Float64Array] };

function varint(buf, at) {
  let v = 0n, shift = 0n;
  for (;;) {
    const b = buf[at.i++];
    v |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
    shift += 7n;
  }
}

function decode(buf) {
  const t = { dims: [], type: 0, name: '', raw: null, floats: [], ints: [] };
  const at = { i: 0 };
  while (at.i < buf.length) {
    const key = Number(varint(buf, at)), field = key >> 3, wire = key & 7;
    if (wire === 0) {
      const v = varint(buf, at);
      if (field === 1) t.dims.push(Number(v));
      else if (field === 2) t.type = Number(v);
      else if (field === 7 || field === 5) t.ints.push(BigInt.asIntN(64, v));
    } else if (wire === 2) {
      const len = Number(varint(buf, at)), body = buf.subarray(at.i, at.i + len);
      at.i += len;
      if (field === 8) t.name = body.toString('utf8');
      else if (field === 9) t.raw = Buffer.from(body);
      else if (field === 1 || field === 5 || field === 7) {
        const inner = { i: 0 };
        while (inner.i < body.length) {
          const v = varint(body, inner);
          if (field === 1) t.dims.push(Number(v)); else t.ints.push(BigInt.asIntN(64, v));
        }
      } else if (field === 4) {
        for (let j = 0; j + 4 <= body.length; j += 4) t.floats.push(body.readFloatLE(j));
      }
    } else if (wire === 5) {
      t.floats.push(buf.readFloatLE(at.i)); at.i += 4;
    } else if (wire === 1) {
      at.i += 8;
    } else {
      throw new Error(`${t.name}: a TensorProto field of wire type ${wire}`);
    }
  }
  const [name, Array] = TYPES[t.type] || [];
  if (!name) throw new Error(`${t.name}: data type ${t.type} is not one this reads`);
  let data;
  if (t.raw) data = new Array(t.raw.buffer.slice(t.raw.byteOffset, t.raw.byteOffset + t.raw.length));
  else if (t.type === 1 || t.type === 11) data = Array.from(t.floats);
  else if (t.type === 7) data = BigInt64Array.from(t.ints);
  else data = Array.from(t.ints.map(Number));
  return { name: t.name, tensor: new ort.Tensor(name, data, t.dims) };
}

function bytesOfVarint(v) {
  const out = [];
  let x = BigInt.asUintN(64, BigInt(v));
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x) b |= 0x80;
    out.push(b);
  } while (x);
  return out;
}

function encode(name, tensor) {
  const code = Number(Object.keys(TYPES).find((k) => TYPES[k][0] === tensor.type));
  const parts = [];
  for (const d of tensor.dims) parts.push(Buffer.from([0x08, ...bytesOfVarint(d)]));
  parts.push(Buffer.from([0x10, ...bytesOfVarint(code)]));
  const n = Buffer.from(name, 'utf8');
  parts.push(Buffer.from([0x42, ...bytesOfVarint(n.length)]), n);
  const raw = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  parts.push(Buffer.from([0x4a, ...bytesOfVarint(raw.length)]), raw);
  return Buffer.concat(parts);
}

const sess = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
fs.mkdirSync(dst, { recursive: true });
const feeds = {};
for (const f of fs.readdirSync(src).filter((f) => /^input_\d+\.pb$/.test(f)).sort()) {
  const buf = fs.readFileSync(path.join(src, f));
  const { name, tensor } = decode(buf);
  if (sess.inputNames.includes(name)) feeds[name] = tensor;
  fs.writeFileSync(path.join(dst, f), buf);
}
const out = await sess.run(feeds);
sess.outputNames.forEach((n, j) => fs.writeFileSync(path.join(dst, `output_${j}.pb`), encode(n, out[n])));

