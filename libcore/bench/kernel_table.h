// The quantized GEMV table (Transformer-Lite Table 1): decode (M = 1) latency of the
// tl.QMatMul kernels at (K, N) = (4096, 4096), (4096, 11008), (11008, 4096), or at the
// shapes given, for every scheme (and fp32, group 0), from profiling events, with the caches evicted before
// each run so that weights come from memory as in a model whose layers do not fit in
// cache.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace tl {

struct KernelRow {
  int64_t K = 0, N = 0, group = 0;
  std::string scheme;
  std::vector<double> ms;  // device time per run, in run order
  double bytes = 0;        // weight codes, scales and offsets, plus the activation in and out
  double flops = 0;        // 2 K N
};

struct KernelTable {
  std::vector<KernelRow> rows;
  std::vector<std::string> notes;  // E0M4 against INT4, run by run
};

using KernelShape = std::pair<int64_t, int64_t>;  // (K, N)
inline const char* kDefaultKernelShapes = "4096x4096,4096x11008,11008x4096";  // Llama-2-7B's

// "KxN,KxN" -> shapes. Throws tl::Error (usage) naming --kernel-shapes for anything else.
std::vector<KernelShape> parseKernelShapes(const std::string& text);

// "fp32": the unquantized MatMul (tl.MatMul's kernels), beside the quantized schemes.
inline const char* kFp32Scheme = "fp32";
// Throws tl::Error (bad input) for a name that is neither fp32 nor a quantization scheme.
void checkKernelScheme(const std::string& scheme);

// Schemes take turns run by run, in alternating order, so drift hits all alike.
// Throws tl::Error (usage) for an unknown scheme.
KernelTable benchQuantKernels(Device& device, const std::vector<std::string>& schemes,
                              const std::vector<KernelShape>& shapes, int runs,
                              const std::function<void(const std::string&)>& progress = {});

}  // namespace tl
