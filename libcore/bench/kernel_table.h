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

// The GEMM table's paths: tl's (the tensor cores as --gemm auto takes them, with A in
// fp16 where auto rounds it to int8, and in-tile where auto dequantizes the weights into
// fp16 first, Device::setHalvesRows; the portable tiles), and CLBlast's GEMMs (the OpenCL
// BLAS users would pick) at the same shapes in float (SGEMM; HGEMM where the device has
// cl_khr_fp16).
enum class GemmPath { Portable, TensorCores, TensorCoresF16, TensorCoresInTile, ClblastSgemm, ClblastHgemm };
const char* gemmPathName(GemmPath p);

struct KernelRow {
  int64_t K = 0, N = 0, group = 0;
  std::string scheme;
  std::vector<double> ms;  // device time per run, in run order
  double bytes = 0;        // weight codes, scales and offsets, plus the activation in and out
  double flops = 0;        // 2 K N (2 M K N in the GEMM table)
  int64_t M = 1;             // rows of A: 1 for the GEMV table
  GemmPath path = GemmPath::Portable;  // the GEMM table's
  std::string kernels;       // the kernels the runs launched, comma-separated
};

struct KernelTable {
  std::vector<KernelRow> rows;
  std::vector<std::string> notes;  // E0M4 against INT4 run by run; tensor cores against portable
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

// The prefill GEMM table: the same schemes and shapes at each of `rows` rows of A (M),
// through each path the device has (tensor cores where built and the scheme has such a
// kernel, and the portable tiles: Device::setTensorCores), timed as the GEMV table is,
// then CLBlast's SGEMM (and HGEMM) of a float weight at each shape: host time from its
// call to the queue's end (it may launch several kernels and returns one event), the
// caches evicted first. A size CLBlast refuses leaves a note. Throws tl::Error (usage) for
// an unknown scheme.
inline const char* kDefaultGemmRows = "128,512,1024";
KernelTable benchGemmKernels(Device& device, const std::vector<std::string>& schemes,
                             const std::vector<KernelShape>& shapes, const std::vector<int64_t>& rows, int runs,
                             const std::function<void(const std::string&)>& progress = {});

}  // namespace tl
