// Decode (M = 1) latency of the tl.QMatMul kernels, as Transformer-Lite's Table 1:
// (K, N) = (4096, 4096), (4096, 11008), (11008, 4096), from OpenCL profiling events,
// schemes measured in turns, with the bandwidth each achieves against the device's measured copy bandwidth.
//   bench_qmatmul [--device SPEC] [--runs 20] [--schemes e0m4,int4,...]
#include <CL/cl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/error.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "quant/quantize_model.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace {

std::vector<float> randomWeights(int64_t K, int64_t N, std::mt19937& rng) {
  std::vector<float> w(static_cast<size_t>(K * N));
  std::normal_distribution<float> d(0.0f, 0.02f);
  for (auto& x : w) x = d(rng);
  return w;
}

constexpr size_t kFlushBytes = size_t(256) << 20;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device-to-device copy bandwidth (bytes read + written per second), 256 MiB.
double copyBandwidth(tl::Device& dev, int runs) {
  const size_t bytes = size_t(256) << 20;
  cl_int err;
  cl_mem a = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
  tl::clCheck(err, "clCreateBuffer");
  cl_mem b = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
  tl::clCheck(err, "clCreateBuffer");
  const char zero = 0;
  tl::clCheck(clEnqueueFillBuffer(dev.queue(), a, &zero, 1, 0, bytes, 0, nullptr, nullptr), "clEnqueueFillBuffer");
  std::vector<double> ms;
  for (int i = 0; i < runs + 2; ++i) {
    cl_event e;
    tl::clCheck(clEnqueueCopyBuffer(dev.queue(), a, b, 0, 0, bytes, 0, nullptr, &e), "clEnqueueCopyBuffer");
    clWaitForEvents(1, &e);
    cl_ulong s = 0, t = 0;
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof s, &s, nullptr);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, nullptr);
    clReleaseEvent(e);
    if (i >= 2) ms.push_back((t - s) * 1e-6);
  }
  clReleaseMemObject(a);
  clReleaseMemObject(b);
  return 2.0 * bytes / (median(ms) * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device, schemes = "e0m4,int4,w4a8,q8,q3h";
  int runs = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--schemes" && i + 1 < argc) schemes = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_qmatmul [--device SPEC] [--runs N] [--schemes e0m4,int4,...]\n");
      return 2;
    }
  }
  try {
    tl::Device dev(tl::selectDevice(device), true);
    const double copyGBs = copyBandwidth(dev, 5);
    std::printf("device: %s / %s; copy bandwidth %.1f GB/s (read + write)\n\n", dev.info().platformName.c_str(),
                dev.info().name.c_str(), copyGBs);
    std::printf("| K x N | scheme | group | kernel ms (median of %d) | quartiles | GB/s | %% of copy |\n|---|---|---|---|---|---|---|\n", runs);
    std::mt19937 rng(1);
    std::vector<std::string> pairs;
    cl_int err;
    cl_mem flush = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE, kFlushBytes, nullptr, &err);
    tl::clCheck(err, "clCreateBuffer");
    const char zero = 0;
    for (auto [K, N] : {std::pair<int64_t, int64_t>{4096, 4096}, {4096, 11008}, {11008, 4096}}) {
      const auto w = randomWeights(K, N, rng);
      const tl::Model base = tl::matmulModel(w.data(), K, N);
      struct Case {
        std::string scheme;
        tl::Model model;
        std::unique_ptr<tl::Graph> graph;
        tl::ShapeAnalysis analysis;
        std::unique_ptr<tl::Executor> ex;
        std::vector<double> ms;
      };
      std::deque<Case> cases;  // executors keep references to their model: no moves
      std::stringstream ss(schemes);
      for (std::string s; std::getline(ss, s, ',');) {
        Case& c = cases.emplace_back();
        c.scheme = s;
        c.model = base;
        tl::QuantOptions opt;
        opt.scheme = tl::parseScheme(s);
        opt.group = 128;
        opt.quantizeLmHead = true;
        tl::quantizeModel(c.model, opt, false);
        c.graph = std::make_unique<tl::Graph>(c.model.proto.graph());
        c.analysis = tl::inferShapes(c.model, *c.graph);
        c.ex = std::make_unique<tl::Executor>(dev, c.model, *c.graph, c.analysis);
      }
      tl::Tensor x;
      x.name = "x";
      x.dtype = tl::DType::Float;
      x.dims = {1, K};
      const auto xs = randomWeights(1, K, rng);
      x.bytes.assign(reinterpret_cast<const uint8_t*>(xs.data()), reinterpret_cast<const uint8_t*>(xs.data() + K));
      // Schemes take turns, run by run and in alternating order, so that clock drift hits
      // all alike; before each run a 256 MiB fill evicts the caches (the H100's L2 holds
      // 50 MB, a 4096 x 4096 4-bit weight twice over): weights come from memory, as in
      // a model whose layers do not fit in cache.
      for (int r = 0; r < runs + 3; ++r)
        for (size_t j = 0; j < cases.size(); ++j) {
          auto& c = cases[r % 2 ? cases.size() - 1 - j : j];
          tl::clCheck(clEnqueueFillBuffer(dev.queue(), flush, &zero, 1, 0, kFlushBytes, 0, nullptr, nullptr),
                      "clEnqueueFillBuffer");
          c.ex->run({x});
          double t = 0;
          for (const auto& p : c.ex->profile()) t += p.ms;  // w4a8: its activation quantization too
          if (r >= 3) c.ms.push_back(t);
        }
      // E0M4 against INT4 run by run (they took turns, so each pair saw the same conditions).
      const auto find = [&](const char* s) {
        for (auto& c : cases)
          if (c.scheme == s) return &c;
        return static_cast<Case*>(nullptr);
      };
      if (const Case *e = find("e0m4"), *i = find("int4"); e && i) {
        std::vector<double> ratio;
        int notSlower = 0;
        for (size_t r = 0; r < e->ms.size(); ++r) {
          ratio.push_back(e->ms[r] / i->ms[r]);
          notSlower += e->ms[r] <= i->ms[r];
        }
        std::sort(ratio.begin(), ratio.end());
        char line[200];
        std::snprintf(line, sizeof line, "%lld x %lld: e0m4 / int4 per run: median %.3f (quartiles %.3f-%.3f), e0m4 <= int4 in %d of %zu runs",
                      static_cast<long long>(K), static_cast<long long>(N), median(ratio), ratio[ratio.size() / 4],
                      ratio[ratio.size() * 3 / 4], notSlower, ratio.size());
        pairs.push_back(line);
      }
      for (auto& c : cases) {
        size_t bytes = static_cast<size_t>(K) * 4 + static_cast<size_t>(N) * 4;
        for (const auto& init : c.model.proto.graph().initializer()) bytes += init.raw_data().size();
        std::sort(c.ms.begin(), c.ms.end());
        const double t = median(c.ms), q1 = c.ms[c.ms.size() / 4], q3 = c.ms[c.ms.size() * 3 / 4];
        const double gbs = bytes / (t * 1e-3) / 1e9;
        std::printf("| %lld x %lld | %s | 128 | %.4f | %.4f-%.4f | %.1f | %.1f%% |\n", static_cast<long long>(K),
                    static_cast<long long>(N), c.scheme.c_str(), t, q1, q3, gbs, 100 * gbs / copyGBs);
      }
      std::fflush(stdout);
    }
    clReleaseMemObject(flush);
    std::printf("\n");
    for (const auto& p : pairs) std::printf("%s\n", p.c_str());
  } catch (const tl::Error& e) {
    std::fprintf(stderr, "bench_qmatmul: error: %s\n", e.what());
    return static_cast<int>(e.code());
  }
}
