#include "quant/quantize_model.h"

#include "graph/attributes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "cli/error.h"
#include "onnx/model_io.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

const QuantScheme kAllSchemes[] = {QuantScheme::E0M4, QuantScheme::Int4, QuantScheme::W4A8, QuantScheme::Q8,
                                   QuantScheme::Q3H};

// The weight's values, read alone (from external data too) and without a double copy:
// a big model's largest matrix is what sets tl-quant's peak memory.
std::vector<float> weightValues(const onnx::TensorProto& proto, const std::filesystem::path& baseDir) {
  Tensor t = readTensor(proto, baseDir);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.bytes.data(), out.size() * 4);  // findWeights admits float32 only
  return out;
}

void setData(onnx::TensorProto& t, const void* data, size_t bytes, ExternalDataWriter* ext) {
  if (ext) return ext->store(t, data, bytes);
  t.clear_float_data();
  t.clear_external_data();
  t.clear_data_location();  // DEFAULT: the bytes are in raw_data
  t.set_raw_data(std::string(static_cast<const char*>(data), bytes));
}

void addInitializer(onnx::GraphProto& g, const std::string& name, int32_t type, std::vector<int64_t> dims,
                    const void* data, size_t bytes, ExternalDataWriter* ext = nullptr) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (auto d : dims) t->add_dims(d);
  setData(*t, data, bytes, ext);
}

// MatMulNBits (bits 4): B uint8 [N, blocks, block/2] (the last block zero-padded),
// scales float [N * blocks], zero_points uint8 [N * ceil(blocks / 2)], low nibble first;
// w = (q - zero_point) * scale, which is int4's f(q) * s + o with o = -zero_point * s.
void addMatMulNBitsInputs(onnx::GraphProto& g, const std::string& name, const QuantizedMatrix& q,
                          ExternalDataWriter* ext) {
  const int64_t blocks = q.groups(), blob = q.group / 2, zpBytes = (blocks + 1) / 2;
  std::vector<uint8_t> b(static_cast<size_t>(q.N * blocks * blob), 0), zp(static_cast<size_t>(q.N * zpBytes), 0);
  for (int64_t n = 0; n < q.N; ++n) {
    std::memcpy(&b[static_cast<size_t>(n * blocks * blob)], &q.packed[static_cast<size_t>(n * q.rowBytes)],
                static_cast<size_t>(q.rowBytes));
    for (int64_t k = 0; k < blocks; ++k) {
      const float s = q.scale[n * blocks + k], o = q.offset[n * blocks + k];
      const int z = static_cast<int>(std::lround(-o / s));
      zp[static_cast<size_t>(n * zpBytes + k / 2)] |= static_cast<uint8_t>(z << (4 * (k % 2)));
    }
  }
  addInitializer(g, name + ".nbits_b", onnx::TensorProto::UINT8, {q.N, blocks, blob}, b.data(), b.size(), ext);
  addInitializer(g, name + ".nbits_scales", onnx::TensorProto::FLOAT, {q.N * blocks}, q.scale.data(),
                 4 * q.scale.size(), ext);
  addInitializer(g, name + ".nbits_zero_points", onnx::TensorProto::UINT8, {q.N * zpBytes}, zp.data(), zp.size(), ext);
}

void rewriteAsMatMulNBits(onnx::NodeProto& n, const std::string& w, const QuantizedMatrix& q) {
  n.set_op_type("MatMulNBits");
  n.set_domain("com.microsoft");
  n.set_input(1, w + ".nbits_b");
  n.add_input(w + ".nbits_scales");
  n.add_input(w + ".nbits_zero_points");
  for (auto [name, v] : {std::pair<const char*, int64_t>{"K", q.K}, {"N", q.N}, {"bits", 4}, {"block_size", q.group}}) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
}

// Mean absolute error of the dequantized weight against its float values.
double quantizationError(const std::vector<float>& w, const QuantizedMatrix& q) {
  const auto back = dequantize(q);
  return meanAbsError(w.data(), back.data(), w.size());
}

// Writes one quantized weight in the chosen format (inside the model or to external data).
void store(onnx::GraphProto& g, const std::string& name, const QuantizedMatrix& q, const QuantOptions& opt) {
  ExternalDataWriter* ext = opt.externalData;
  if (opt.dequantizedFormat) {
    auto w = dequantize(q);
    for (auto& init : *g.mutable_initializer())
      if (init.name() == name) setData(init, w.data(), w.size() * 4, ext);
    return;
  }
  if (opt.ortFormat) return addMatMulNBitsInputs(g, name, q, ext);
  addInitializer(g, name + ".qweight", onnx::TensorProto::UINT8, {q.N, q.rowBytes}, q.packed.data(), q.packed.size(), ext);
  addInitializer(g, name + ".qscale", onnx::TensorProto::FLOAT, {q.N, q.groups()}, q.scale.data(), 4 * q.scale.size(), ext);
  addInitializer(g, name + ".qoffset", onnx::TensorProto::FLOAT, {q.N, q.groups()}, q.offset.data(),
                 4 * q.offset.size(), ext);
}

// MatMul, or tl-fuse's tl.MatMul (its columns split among outputs; a bias, a residual, a
// norm, a GLU: graph/tl_ops.h): A times a weight.
bool isMatMul(const onnx::NodeProto& n) {
  const bool plain = n.op_type() == "MatMul" && isOnnxDomain(n.domain());
  if (plain) return n.input_size() == 2;
  // tl.MatMul's transB weight is [N, K]: left in float.
  return n.op_type() == "MatMul" && n.domain() == "tl" && n.input_size() <= 5 && attrInt(n, "transB").value_or(0) == 0;
}

}  // namespace

std::vector<EligibleWeight> findWeights(const Graph& graph, const QuantOptions& opt) {
  // A weight asked for by name must be what a MatMul multiplies by, and constant.
  for (const auto& name : opt.only) {
    bool found = false;
    for (size_t i = 0; i < graph.nodeCount() && !found; ++i) {
      const auto& n = graph.node(i);
      if (!isMatMul(n) || n.input(1) != name) continue;
      found = true;
      const auto* w = graph.initializer(name);
      if (!w)
        throw Error("node '" + graph.nodeName(i) + "': weight '" + name + "' is not constant (" +
                    (graph.isGraphInput(name) ? "a graph input" : "computed by the graph") + ")");
      if (w->dims_size() != 2 || w->data_type() != onnx::TensorProto::FLOAT)
        throw Error("node '" + graph.nodeName(i) + "': weight '" + name + "' is not a 2-D float32 matrix");
    }
    if (!found) throw Error("--only " + name + ": no MatMul multiplies by a tensor of that name");
  }
  std::set<std::string> seen;
  std::set<std::string> outputs;
  for (const auto& o : graph.proto().output()) outputs.insert(o.name());
  std::vector<EligibleWeight> out;
  for (size_t i : graph.topoOrder()) {
    const auto& n = graph.node(i);
    if (!isMatMul(n)) continue;
    const auto* w = graph.initializer(n.input(1));
    if (!w || w->dims_size() != 2 || w->data_type() != onnx::TensorProto::FLOAT) continue;
    if (!seen.insert(w->name()).second) continue;
    EligibleWeight e{w->name(), graph.nodeName(i), w->dims(0), w->dims(1), "", opt.scheme};
    if (!opt.only.empty() && std::find(opt.only.begin(), opt.only.end(), e.name) == opt.only.end()) continue;
    for (const auto& pattern : opt.skip)
      if (e.name.find(pattern) != std::string::npos || e.node.find(pattern) != std::string::npos)
        e.keptBecause = "--skip " + pattern;
    const bool lmHead = std::any_of(n.output().begin(), n.output().end(), [&](const auto& o) { return outputs.count(o); });
    if (lmHead && opt.lmHeadScheme) e.scheme = *opt.lmHeadScheme;
    if (e.keptBecause.empty() && lmHead && !opt.quantizeLmHead && !opt.lmHeadScheme && opt.only.empty())
      e.keptBecause = "lm_head (--quantize-lm-head)";
    out.push_back(e);
  }
  return out;
}

void checkOptions(const QuantOptions& opt) {
  // Any positive group works (ragged last groups are exact); q3h needs pairs.
  if (opt.group <= 0) throw Error("--group must be positive, not " + std::to_string(opt.group));
  for (QuantScheme s : {opt.scheme, opt.lmHeadScheme.value_or(opt.scheme)}) {
    if (opt.ortFormat && s != QuantScheme::Int4)
      throw Error(std::string("--format ort writes int4 (MatMulNBits), not ") + schemeName(s));
    if (s == QuantScheme::Q3H && opt.group % 2) throw Error("q3h pairs weights: --group must be even");
  }
  if (opt.ortFormat && (opt.group < 16 || (opt.group & (opt.group - 1))))
    throw Error("--format ort needs a group size that is a power of two >= 16 (MatMulNBits' block_size), not " +
                std::to_string(opt.group));
}

std::vector<EligibleWeight> quantizeModel(Model& model, const QuantOptions& opt, bool progress) {
  auto& g = *model.proto.mutable_graph();
  for (const auto& n : g.node())
    if ((n.domain() == "tl" && n.op_type() == "QMatMul") || n.op_type() == "MatMulNBits")
      throw Error("node '" + n.name() + "': the model is already quantized (" + n.op_type() + ")");
  checkOptions(opt);
  std::vector<EligibleWeight> done;
  {
    Graph graph(g);
    auto weights = findWeights(graph, opt);
    if (opt.ortFormat) {  // refused before any weight is quantized
      std::set<std::string> asked;
      for (const auto& w : weights)
        if (w.keptBecause.empty()) asked.insert(w.name);
      for (const auto& n : g.node())
        if (n.domain() == "tl" && isMatMul(n) && asked.count(n.input(1)))
          throw Error("node '" + n.name() + "': a merged tl.MatMul has no MatMulNBits form (quantize before tl-fuse)");
    }
    std::map<std::string, QuantizedMatrix> quantized;
    size_t index = 0, before = 0, after = 0;
    for (const auto& w : weights) {
      ++index;
      if (!w.keptBecause.empty()) continue;
      auto data = weightValues(*graph.initializer(w.name), model.baseDir);
      auto q = quantize(data.data(), w.K, w.N, w.scheme, opt.group);
      EligibleWeight result = w;
      result.mae = quantizationError(data, q);
      result.storedBytes = static_cast<int64_t>(q.packed.size() + 8 * q.scale.size());
      before += data.size() * 4;
      after += static_cast<size_t>(result.storedBytes);
      if (progress)
        std::fprintf(stderr, "tl-quant: [%zu/%zu] %-50s %5lld x %-5lld %s mae %.3g, %.2f bits/weight\n", index,
                     weights.size(), w.name.c_str(), static_cast<long long>(w.K), static_cast<long long>(w.N),
                     schemeName(w.scheme), result.mae, q.bitsPerWeight());
      store(g, w.name, q, opt);
      // The node rewrite needs only the shape and scheme: free the codes now.
      q.packed = {};
      q.scale = {};
      q.offset = {};
      quantized.emplace(w.name, std::move(q));
      done.push_back(result);
    }
    if (progress)
      std::fprintf(stderr, "tl-quant: %zu weights, %.2f MiB -> %.2f MiB\n", done.size(), before / 1048576.0,
                   after / 1048576.0);
    for (auto& n : *g.mutable_node()) {
      if (opt.dequantizedFormat || !isMatMul(n) || !quantized.count(n.input(1))) continue;
      const auto& q = quantized.at(n.input(1));
      const std::string a = n.input(0), w = n.input(1);
      if (opt.ortFormat) {
        rewriteAsMatMulNBits(n, w, q);
        continue;
      }
      // tl.MatMul's optional inputs (bias, residual, norm scale) follow the codes' three.
      const std::vector<std::string> optional(n.input().begin() + 2, n.input().end());
      n.set_op_type("QMatMul");
      n.set_domain("tl");
      n.clear_input();
      for (const auto& in : {a, w + ".qweight", w + ".qscale", w + ".qoffset"}) n.add_input(in);
      for (const auto& in : optional) n.add_input(in);
      auto attr = [&](const char* name) {
        auto* a = n.add_attribute();
        a->set_name(name);
        return a;
      };
      auto* s = attr("scheme");
      s->set_type(onnx::AttributeProto::STRING);
      s->set_s(schemeName(q.scheme));
      for (auto [name, v] : {std::pair<const char*, int64_t>{"group", q.group}, {"K", q.K}, {"N", q.N}}) {
        auto* a = attr(name);
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(v);
      }
    }
  }
  // Drop float weights nothing reads any more (an embedding tied to lm_head stays).
  std::set<std::string> used;
  for (const auto& n : g.node())
    for (const auto& i : n.input()) used.insert(i);
  for (const auto& o : g.output()) used.insert(o.name());
  auto* inits = g.mutable_initializer();
  for (int i = inits->size(); i-- > 0;)
    if (!used.count(inits->Get(i).name())) inits->DeleteSubrange(i, 1);
  if (opt.dequantizedFormat) return done;
  const std::string domain = opt.ortFormat ? "com.microsoft" : "tl";
  bool imported = false;
  for (const auto& o : model.proto.opset_import()) imported = imported || o.domain() == domain;
  if (!imported) {
    auto* o = model.proto.add_opset_import();
    o->set_domain(domain);
    o->set_version(1);
  }
  return done;
}

Model matmulModel(const float* w, int64_t K, int64_t N) {
  Model m;
  m.proto.set_ir_version(8);
  m.proto.add_opset_import()->set_version(17);
  auto* g = m.proto.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("M");
  tt->mutable_shape()->add_dim()->set_dim_value(K);
  addInitializer(*g, "w", onnx::TensorProto::FLOAT, {K, N}, w, static_cast<size_t>(K * N) * 4);
  auto* n = g->add_node();
  n->set_name("mm");
  n->set_op_type("MatMul");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

ReportFormat parseReportFormat(const std::string& s) {
  if (s == "md") return ReportFormat::Md;
  if (s == "csv") return ReportFormat::Csv;
  if (s == "json") return ReportFormat::Json;
  throw Error("--report-format must be md, csv or json", ExitCode::Usage);
}

std::string renderQuantization(const std::string& title, const std::vector<EligibleWeight>& all,
                               const std::vector<EligibleWeight>& done) {
  std::map<std::string, const EligibleWeight*> quantized;
  for (const auto& w : done) quantized[w.name] = &w;
  std::string out = "# " + title + "\n# weight  node  K x N  scheme  mae  bits/weight (or: kept, why)\n";
  int64_t before = 0, after = 0;
  char row[160];
  for (const auto& w : all) {
    out += w.name + "  " + w.node + "  " + std::to_string(w.K) + " x " + std::to_string(w.N) + "  ";
    const auto it = quantized.find(w.name);
    if (it == quantized.end()) {
      out += "kept (" + (w.keptBecause.empty() ? std::string("not asked for") : w.keptBecause) + ")\n";
      continue;
    }
    const EligibleWeight& q = *it->second;
    before += q.K * q.N * 4;
    after += q.storedBytes;
    std::snprintf(row, sizeof row, "%s  %.3g  %.2f\n", schemeName(q.scheme), q.mae,
                  8.0 * static_cast<double>(q.storedBytes) / static_cast<double>(q.K * q.N));
    out += row;
  }
  std::snprintf(row, sizeof row, "quantized: %zu of %zu weights, %.2f MiB -> %.2f MiB\n", done.size(), all.size(),
                static_cast<double>(before) / 1048576.0, static_cast<double>(after) / 1048576.0);
  return out + row;
}

std::string errorReport(const Model& model, const Graph& graph, const QuantOptions& opt, ReportFormat format) {
  std::ostringstream os;
  auto weights = findWeights(graph, opt);
  if (format == ReportFormat::Md) {
    os << "| weight | K x N |";
    for (auto s : kAllSchemes) os << " " << schemeName(s) << " MAE |";
    os << " e0m4/int4 |";
    for (auto s : kAllSchemes) os << " " << schemeName(s) << " bits |";
    os << "\n|---|---|";
    for (size_t i = 0; i < 2 * std::size(kAllSchemes) + 1; ++i) os << "---|";
    os << "\n";
  } else if (format == ReportFormat::Csv) {
    os << "weight,K,N";
    for (auto s : kAllSchemes) os << "," << schemeName(s) << "_mae";
    os << ",e0m4_over_int4";
    for (auto s : kAllSchemes) os << "," << schemeName(s) << "_bits";
    os << ",kept\n";
  } else {
    os << "{\"group\": " << opt.group << ", \"weights\": [\n";
  }
  bool first = true;
  char buf[64];
  auto num = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  for (const auto& w : weights) {
    auto data = weightValues(*graph.initializer(w.name), model.baseDir);
    std::vector<double> mae, bits;
    for (auto s : kAllSchemes) {
      auto q = quantize(data.data(), w.K, w.N, s, opt.group);
      mae.push_back(quantizationError(data, q));
      bits.push_back(q.bitsPerWeight());
    }
    const double ratio = mae[1] > 0 ? mae[0] / mae[1] : 0;
    const std::string dims = std::to_string(w.K) + " x " + std::to_string(w.N);
    if (format == ReportFormat::Md) {
      os << "| " << w.name << (w.keptBecause.empty() ? "" : " (kept: " + w.keptBecause + ")") << " | " << dims << " |";
      for (double m : mae) os << " " << num(m) << " |";
      os << " " << num(ratio) << " |";
      for (double b : bits) os << " " << num(b) << " |";
      os << "\n";
    } else if (format == ReportFormat::Csv) {
      os << w.name << "," << w.K << "," << w.N;
      for (double m : mae) os << "," << num(m);
      os << "," << num(ratio);
      for (double b : bits) os << "," << num(b);
      os << "," << (w.keptBecause.empty() ? "no" : "yes") << "\n";
    } else {
      os << (first ? "" : ",\n") << "  {\"weight\": \"" << w.name << "\", \"K\": " << w.K << ", \"N\": " << w.N
         << ", \"kept\": " << (w.keptBecause.empty() ? "false" : "true") << ", \"mae\": {";
      for (size_t i = 0; i < mae.size(); ++i)
        os << (i ? ", " : "") << "\"" << schemeName(kAllSchemes[i]) << "\": " << num(mae[i]);
      os << "}, \"e0m4_over_int4\": " << num(ratio) << ", \"bits_per_weight\": {";
      for (size_t i = 0; i < bits.size(); ++i)
        os << (i ? ", " : "") << "\"" << schemeName(kAllSchemes[i]) << "\": " << num(bits[i]);
      os << "}}";
    }
    first = false;
  }
  if (format == ReportFormat::Json) os << "\n]}\n";
  return os.str();
}

}  // namespace tl
