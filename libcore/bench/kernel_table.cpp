#include "bench/kernel_table.h"

#include <clblast_c.h>
#include <clblast_half.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "bench/timing.h"
#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "quant/quantize_model.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

std::vector<float> randomValues(int64_t n, std::mt19937& rng) {
  std::vector<float> w(static_cast<size_t>(n));
  std::normal_distribution<float> d(0.0f, 0.02f);
  for (auto& x : w) x = d(rng);
  return w;
}

// Larger than any last-level cache tl meets (the H100's L2 holds 50 MB).
constexpr size_t kFlushBytes = size_t(256) << 20;

// A buffer that evicts the caches when filled: before each timed run, so that weights come
// from memory as in a model whose layers do not fit in cache.
class CacheFlush {
 public:
  explicit CacheFlush(Device& dev) : dev_(dev), bytes_(std::min(kFlushBytes, dev.info().maxAlloc)) {
    cl_int err;
    m_ = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE, bytes_, nullptr, &err);
    clCheck(err, "clCreateBuffer", "cache flush");
  }
  ~CacheFlush() { clReleaseMemObject(m_); }
  CacheFlush(const CacheFlush&) = delete;
  CacheFlush& operator=(const CacheFlush&) = delete;
  void operator()() {
    const char zero = 0;
    clCheck(clEnqueueFillBuffer(dev_.queue(), m_, &zero, 1, 0, bytes_, 0, nullptr, nullptr), "clEnqueueFillBuffer",
            "cache flush");
  }

 private:
  Device& dev_;
  size_t bytes_;
  cl_mem m_;
};

struct Case {
  KernelRow row;
  Model model;
  std::unique_ptr<Graph> graph;
  ShapeAnalysis analysis;
  std::unique_ptr<Executor> ex;
};

// The one-MatMul model in `scheme`: quantized (group 128), or for fp32 as tl-fuse leaves a
// weight's MatMul: tl.MatMul, the decode GEMV's op.
Model schemeModel(const Model& base, const std::string& scheme) {
  Model m = base;
  if (scheme == kFp32Scheme) {
    m.proto.mutable_graph()->mutable_node(0)->set_domain("tl");
    auto* o = m.proto.add_opset_import();
    o->set_domain("tl");
    o->set_version(1);
  } else {
    QuantOptions opt;
    opt.scheme = parseScheme(scheme);
    opt.group = 128;
    opt.quantizeLmHead = true;
    quantizeModel(m, opt, false);
  }
  return m;
}

Tensor randomInput(int64_t M, int64_t K, std::mt19937& rng) {
  Tensor x;
  x.name = "x";
  x.dtype = DType::Float;
  x.dims = {M, K};
  const auto xs = randomValues(M * K, rng);
  x.bytes.assign(reinterpret_cast<const uint8_t*>(xs.data()), reinterpret_cast<const uint8_t*>(xs.data() + M * K));
  return x;
}

// CLBlast's GEMM of a random float weight at M x K x N, row-major, `runs` timed runs after
// two warm-ups (the first builds its kernels); false (and a note) where CLBlast refuses.
bool clblastRuns(Device& dev, KernelRow& row, bool half, int runs, CacheFlush& flush, std::mt19937& rng,
                 std::vector<std::string>& notes) {
  const int64_t M = row.M, K = row.K, N = row.N;
  const size_t esize = half ? 2 : 4;
  cl_int err;
  cl_mem buf[3];
  const int64_t sizes[3] = {M * K, K * N, M * N};
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> host(static_cast<size_t>(sizes[i]) * esize);
    const auto v = randomValues(sizes[i], rng);
    for (size_t j = 0; j < v.size(); ++j) {
      if (half) reinterpret_cast<cl_half*>(host.data())[j] = FloatToHalf(v[j]);
      else reinterpret_cast<float*>(host.data())[j] = v[j];
    }
    buf[i] = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, host.size(), host.data(), &err);
    clCheck(err, "clCreateBuffer", "CLBlast GEMM operands");
  }
  cl_command_queue q = dev.queue();
  bool ok = true;
  for (int r = 0; r < runs + 2 && ok; ++r) {
    flush();
    clCheck(clFinish(q), "clFinish", "CLBlast GEMM");
    const auto t0 = std::chrono::steady_clock::now();
    const CLBlastStatusCode st =
        half ? CLBlastHgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, M, N, K, FloatToHalf(1.0f),
                            buf[0], 0, K, buf[1], 0, N, FloatToHalf(0.0f), buf[2], 0, N, &q, nullptr)
             : CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, M, N, K, 1.0f, buf[0], 0, K,
                            buf[1], 0, N, 0.0f, buf[2], 0, N, &q, nullptr);
    if (st != CLBlastSuccess) {
      notes.push_back(fmt::format("{} {} x {} at M = {}: CLBlast status {}", gemmPathName(row.path), K, N, M,
                                  static_cast<int>(st)));
      ok = false;
      break;
    }
    clCheck(clFinish(q), "clFinish", "CLBlast GEMM");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= 2) row.ms.push_back(ms);
  }
  for (cl_mem m : buf) clReleaseMemObject(m);
  return ok;
}

}  // namespace

const char* gemmPathName(GemmPath p) {
  switch (p) {
    case GemmPath::TensorCores: return "tensor cores";
    case GemmPath::TensorCoresF16: return "tensor cores, fp16 A";
    case GemmPath::TensorCoresInTile: return "tensor cores, in-tile";
    case GemmPath::ClblastSgemm: return "CLBlast SGEMM";
    case GemmPath::ClblastHgemm: return "CLBlast HGEMM";
    case GemmPath::Portable: break;
  }
  return "portable";
}

std::vector<KernelShape> parseKernelShapes(const std::string& text) {
  std::vector<KernelShape> out;
  for (const auto& item : splitCommas(text)) {
    const size_t x = item.find('x');
    char *endK = nullptr, *endN = nullptr;
    const long long K = x == std::string::npos ? 0 : std::strtoll(item.c_str(), &endK, 10);
    const long long N = x == std::string::npos ? 0 : std::strtoll(item.c_str() + x + 1, &endN, 10);
    if (x == std::string::npos || endK != item.c_str() + x || *endN != '\0' || K < 1 || N < 1)
      throw Error("--kernel-shapes expects KxN pairs of positive integers (4096x11008), got '" + item + "'",
                  ExitCode::Usage);
    out.emplace_back(K, N);
  }
  if (out.empty()) throw Error("--kernel-shapes needs at least one KxN", ExitCode::Usage);
  return out;
}

void checkKernelScheme(const std::string& scheme) {
  try {
    if (scheme != kFp32Scheme) parseScheme(scheme);
  } catch (const Error&) {
    throw Error("unknown scheme '" + scheme + "' (fp32, e0m4, int4, w4a8, q8, q3h)");
  }
}

KernelTable benchQuantKernels(Device& dev, const std::vector<std::string>& schemes,
                              const std::vector<KernelShape>& shapes, int runs,
                              const std::function<void(const std::string&)>& progress) {
  for (const auto& s : schemes) checkKernelScheme(s);  // unknown names fail before any work
  const bool wasProfiling = dev.profiling();
  dev.setProfiling(true);
  KernelTable table;
  std::mt19937 rng(1);
  CacheFlush flush(dev);
  for (auto [K, N] : shapes) {
    if (progress) progress(fmt::format("{} x {}: quantizing", K, N));
    const auto w = randomValues(K * N, rng);
    const Model base = matmulModel(w.data(), K, N);
    std::deque<Case> cases;  // executors keep references to their model: no moves
    for (const auto& s : schemes) {
      Case& c = cases.emplace_back();
      c.model = schemeModel(base, s);
      c.graph = std::make_unique<Graph>(c.model.proto.graph());
      c.analysis = inferShapes(c.model, *c.graph);
      c.ex = std::make_unique<Executor>(dev, c.model, *c.graph, c.analysis);
      c.row = {K, N, s == kFp32Scheme ? 0 : 128, s, {}, static_cast<double>(K + N) * 4, 2.0 * K * N, 1, GemmPath::Portable, ""};
      for (const auto& init : c.model.proto.graph().initializer()) c.row.bytes += init.raw_data().size();
    }
    const Tensor x = randomInput(1, K, rng);
    constexpr int kWarmup = 3;
    for (int r = 0; r < runs + kWarmup; ++r) {
      if (progress) progress(fmt::format("{} x {}: run {}/{}", K, N, r + 1, runs + kWarmup));
      for (size_t j = 0; j < cases.size(); ++j) {
        auto& c = cases[r % 2 ? cases.size() - 1 - j : j];
        flush();
        c.ex->run({x});
        double t = 0;
        for (const auto& p : c.ex->profile()) t += p.ms;  // w4a8: its activation quantization too
        if (r >= kWarmup) c.row.ms.push_back(t);
      }
    }
    // E0M4 against INT4 run by run (they took turns, so each pair saw the same conditions).
    const Case *e = nullptr, *i = nullptr;
    for (const auto& c : cases) {
      if (c.row.scheme == "e0m4") e = &c;
      if (c.row.scheme == "int4") i = &c;
    }
    if (e && i && runs > 0) {
      std::vector<double> ratio;
      int notSlower = 0;
      for (size_t r = 0; r < e->row.ms.size(); ++r) {
        ratio.push_back(e->row.ms[r] / i->row.ms[r]);
        notSlower += e->row.ms[r] <= i->row.ms[r];
      }
      table.notes.push_back(fmt::format(
          "{} x {}: e0m4 / int4 per run: median {:.3f} (quartiles {:.3f}-{:.3f}), e0m4 <= int4 in {} of {} runs", K, N,
          median(ratio), quantile(ratio, 0.25), quantile(ratio, 0.75), notSlower, ratio.size()));
    }
    for (auto& c : cases) table.rows.push_back(c.row);
  }
  dev.setProfiling(wasProfiling);
  return table;
}

namespace {

// The tensor-core path's output against the portable path's (fp32 throughout) on the same
// A: its f16 inputs' error, the tolerance the tensor-core path is held to (docs/tl-bench.md).
std::string pathAgreement(int64_t K, int64_t N, const std::string& scheme, int64_t M, const Tensor& tensor,
                          const Tensor& portable, GemmPath path) {
  const auto* a = reinterpret_cast<const float*>(tensor.bytes.data());
  const auto* b = reinterpret_cast<const float*>(portable.bytes.data());
  const size_t n = std::min(tensor.bytes.size(), portable.bytes.size()) / sizeof(float);
  double maxDiff = 0, maxAbs = 0;
  for (size_t i = 0; i < n; ++i) {
    maxDiff = std::max(maxDiff, std::abs(static_cast<double>(a[i]) - b[i]));
    maxAbs = std::max(maxAbs, std::abs(static_cast<double>(b[i])));
  }
  return fmt::format("GEMM {} x {} {} M={}: {} against portable: max |difference| {:.3g}, {:.3g} of the "
                     "largest |output| {:.3g}",
                     K, N, scheme, M, gemmPathName(path), maxDiff, maxAbs > 0 ? maxDiff / maxAbs : 0.0, maxAbs);
}

}  // namespace

KernelTable benchGemmKernels(Device& dev, const std::vector<std::string>& schemes,
                             const std::vector<KernelShape>& shapes, const std::vector<int64_t>& rows, int runs,
                             const std::function<void(const std::string&)>& progress) {
  for (const auto& s : schemes) checkKernelScheme(s);
  const bool wasProfiling = dev.profiling(), wasTensor = dev.tensorCores(), wasInt8 = dev.int8Activations(),
             wasHalves = dev.halvesRows();
  dev.setProfiling(true);
  KernelTable table;
  std::mt19937 rng(2);
  CacheFlush flush(dev);
  for (auto [K, N] : shapes) {
    const auto w = randomValues(K * N, rng);
    const Model base = matmulModel(w.data(), K, N);
    for (const auto& s : schemes) {
      if (progress) progress(fmt::format("GEMM {} x {} {}: quantizing", K, N, s));
      Case c;
      c.model = schemeModel(base, s);
      c.graph = std::make_unique<Graph>(c.model.proto.graph());
      c.analysis = inferShapes(c.model, *c.graph);
      std::map<int64_t, Tensor> inputs;  // per M: every path multiplies the same A
      std::map<std::pair<int64_t, GemmPath>, Tensor> tensorOut;
      for (int64_t M : rows) inputs.emplace(M, randomInput(M, K, rng));
      std::set<int64_t> int8Rows, halves;  // the M whose tensor-core run took the int8 rows, the fp16 weights'
      for (GemmPath path :
           {GemmPath::TensorCores, GemmPath::TensorCoresF16, GemmPath::TensorCoresInTile, GemmPath::Portable}) {
        const bool tensor = path != GemmPath::Portable;
        setGemmChoice(dev, tensor ? (path == GemmPath::TensorCoresF16 ? "f16" : "auto") : "portable");
        dev.setHalvesRows(path != GemmPath::TensorCoresInTile);
        Executor ex(dev, c.model, *c.graph, c.analysis);
        if (tensor && !ex.kernels().tensorCores()) continue;  // no such path here
        for (int64_t M : rows) {
          // (auto's run was this one, or none has it: w4a8; fp32's takes it with --gemm f16 alone)
          if (path == GemmPath::TensorCoresF16 && !int8Rows.count(M) && s != kFp32Scheme) continue;
          if (path == GemmPath::TensorCoresInTile && !halves.count(M)) continue;  // (auto's was in-tile)
          KernelRow row{K, N, s == kFp32Scheme ? 0 : 128, s, {}, static_cast<double>(M * (K + N)) * 4,
                        2.0 * M * K * N, M, path, ""};
          for (const auto& init : c.model.proto.graph().initializer()) row.bytes += init.raw_data().size();
          const Tensor& x = inputs.at(M);
          Tensor y;
          constexpr int kWarmup = 2;
          for (int r = 0; r < runs + kWarmup; ++r) {
            if (progress)
              progress(fmt::format("GEMM {} x {} {} M={} {}: run {}/{}", K, N, s, M, gemmPathName(row.path), r + 1,
                                   runs + kWarmup));
            flush();
            y = ex.run({x}).at(0);
            double t = 0;
            std::string names;
            for (const auto& p : ex.profile()) {
              t += p.ms;
              if (names.find(p.kernel) == std::string::npos) names += (names.empty() ? "" : ",") + p.kernel;
            }
            row.kernels = names;
            if (r >= kWarmup) row.ms.push_back(t);
          }
          // A scheme without a tensor-core kernel (w4a8; fp32 under auto, which keeps it exact) ran
          // the portable one: its row is that path's.
          if (row.kernels.find("_mma_i8_") != std::string::npos) int8Rows.insert(M);
          if (path == GemmPath::TensorCores && row.kernels.find("qgemm_mma_f16") != std::string::npos) halves.insert(M);
          if (tensor && row.kernels.find("_mma_") != std::string::npos) tensorOut[{M, path}] = y;
          for (GemmPath t : {GemmPath::TensorCores, GemmPath::TensorCoresF16, GemmPath::TensorCoresInTile})
            if (!tensor && tensorOut.count({M, t})) table.notes.push_back(pathAgreement(K, N, s, M, tensorOut[{M, t}], y, t));
          if (!tensor || row.kernels.find("_mma_") != std::string::npos) table.rows.push_back(row);
        }
      }
    }
    for (GemmPath path : {GemmPath::ClblastSgemm, GemmPath::ClblastHgemm}) {
      const bool half = path == GemmPath::ClblastHgemm;
      if (half && !dev.info().fp16) continue;
      for (int64_t M : rows) {
        if (progress) progress(fmt::format("GEMM {} x {} M={} {}", K, N, M, gemmPathName(path)));
        const double es = half ? 2 : 4;
        KernelRow row{K, N, 0, half ? "fp16" : kFp32Scheme, {}, static_cast<double>(M * K + K * N + M * N) * es,
                      2.0 * M * K * N, M, path, "CLBlast"};
        if (!clblastRuns(dev, row, half, runs, flush, rng, table.notes)) break;
        table.rows.push_back(row);
      }
    }
  }
  dev.setTensorCores(wasTensor);
  dev.setInt8Activations(wasInt8);
  dev.setHalvesRows(wasHalves);
  dev.setProfiling(wasProfiling);
  return table;
}

}  // namespace tl
