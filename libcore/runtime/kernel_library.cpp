#include "runtime/kernel_library.h"

#include <sstream>
#include <vector>

#include "cli/error.h"
#include "tensor/tensor.h"

namespace tl {

namespace {

// The program of `source`, or nullptr with the build log in `log`. `extra`: more options.
cl_program compile(const Device& device, const std::string& source, const std::string& extra, std::string& log) {
  cl_int err;
  const char* src = source.c_str();
  cl_program p = clCreateProgramWithSource(device.context(), 1, &src, nullptr, &err);
  clCheck(err, "clCreateProgramWithSource");
  cl_device_id id = device.info().id;
  // TL_LOCAL_MEM, TL_MAX_WG: kernels whose local arrays or work-groups would not fit are
  // left out (attention.cl). TL_CPU: the CPU prefill tasks, whose private arrays of 14-25 KB
  // a GPU compiler need not meet, are built on CPUs only; TL_VEC sizes their register tiles.
  const std::string options = "-cl-std=CL1.2 -DTL_LOCAL_MEM=" + std::to_string(device.localMemory()) +
                              " -DTL_MAX_WG=" + std::to_string(device.info().maxWorkGroup) +
                              (device.info().isGpu ? "" : " -DTL_CPU -DTL_VEC=" + std::to_string(device.vectorWidth())) +
                              extra;
  err = clBuildProgram(p, 1, &id, options.c_str(), nullptr, nullptr);
  if (err == CL_SUCCESS) return p;
  size_t n = 0;
  clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  log.assign(n, '\0');
  clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  clReleaseProgram(p);
  return nullptr;
}

cl_program build(const Device& device, const std::string& source, const std::string& extra) {
  std::string log;
  if (cl_program p = compile(device, source, extra, log)) return p;
  throw Error("kernels failed to compile for " + device.info().name + ":\n" + log, ExitCode::Device);
}

// One file of the embedded source (cmake/embed_kernels.cmake marks each "// ---- NAME").
std::string section(const std::string& file) {
  const std::string all = kernelSource();
  const size_t at = all.find("// ---- " + file + "\n");
  if (at == std::string::npos) return "";
  return all.substr(at, all.find("// ---- ", at + 1) - at);
}
std::string commonHelpers() { return section("common.cl"); }

// Runs mma_probe of program p: true when its 16 x 8 product equals the host's.
bool probeComputes(const Device& device, cl_program p, std::string* why) {
  float a[16][16], b[8][16];
  uint16_t ah[16][16], bh[8][16];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) ah[i][k] = floatToHalf(a[i][k] = static_cast<float>((i * 7 + k * 3) % 9 - 4) * 0.25f);
  for (int j = 0; j < 8; ++j)
    for (int k = 0; k < 16; ++k) bh[j][k] = floatToHalf(b[j][k] = static_cast<float>((j * 5 + k) % 7 - 3) * 0.5f);
  cl_int err;
  cl_context ctx = device.context();
  cl_mem ma = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof ah, ah, &err);
  cl_mem mb = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof bh, bh, &err);
  cl_mem mc = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, 16 * 8 * sizeof(float), nullptr, &err);
  cl_kernel k = clCreateKernel(p, "mma_probe", &err);
  float c[16][8] = {};
  bool ran = err == CL_SUCCESS && ma && mb && mc;
  if (ran) {
    clSetKernelArg(k, 0, sizeof ma, &ma);
    clSetKernelArg(k, 1, sizeof mb, &mb);
    clSetKernelArg(k, 2, sizeof mc, &mc);
    const size_t g = 32;
    ran = clEnqueueNDRangeKernel(device.queue(), k, 1, nullptr, &g, &g, 0, nullptr, nullptr) == CL_SUCCESS &&
          clEnqueueReadBuffer(device.queue(), mc, CL_TRUE, 0, sizeof c, c, 0, nullptr, nullptr) == CL_SUCCESS;
  }
  if (k) clReleaseKernel(k);
  for (cl_mem m : {ma, mb, mc})
    if (m) clReleaseMemObject(m);
  if (!ran) {
    if (why) *why = "mma_probe did not run";
    return false;
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      float want = 0.0f;
      for (int q = 0; q < 16; ++q) want += a[i][q] * b[j][q];
      if (c[i][j] != want) {
        if (why) *why = "mma_probe computed a wrong product";
        return false;
      }
    }
  return true;
}

bool nvidia(const Device& device) { return device.info().platformName.find("NVIDIA") != std::string::npos; }

// The sections `files` built with TL_MMA (and `extra` options), or nullptr with the reason;
// elsewhere with their PTX emulated where the tests ask (Device::mmaEmulation).
cl_program buildMma(const Device& device, std::initializer_list<const char*> files, const std::string& extra,
                    std::string* why) {
  const bool emulated = !nvidia(device) && device.mmaEmulation();
  if (!nvidia(device) && !emulated) {
    if (why) *why = "not an NVIDIA platform";
    return nullptr;
  }
  std::string source, log;
  for (const char* f : files) source += section(f);
  cl_program p = compile(device, source, " -DTL_MMA" + std::string(emulated ? " -DTL_MMA_EMU" : "") + extra, log);
  if (!p && why) *why = "the inline PTX did not build: " + log.substr(0, log.find('\n'));
  return p;
}

// Every kernel of p, by name, that `keep` accepts (the others are released).
void addKernels(cl_program p, std::map<std::string, cl_kernel>& kernels, bool (*keep)(const std::string&)) {
  cl_uint count = 0;
  clCreateKernelsInProgram(p, 0, nullptr, &count);
  std::vector<cl_kernel> all(count);
  clCheck(clCreateKernelsInProgram(p, count, all.data(), nullptr), "clCreateKernelsInProgram");
  for (auto k : all) {
    size_t n = 0;
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, 0, nullptr, &n);
    std::string name(n, '\0');
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, n, name.data(), nullptr);
    while (!name.empty() && name.back() == '\0') name.pop_back();
    if (keep(name)) kernels[name] = k; else clReleaseKernel(k);
  }
}

}  // namespace

bool probeTensorCores(const Device& device, std::string* why) {
  cl_program p = buildMma(device, {"mma.cl"}, "", why);
  if (!p) return false;
  const bool ok = probeComputes(device, p, why);
  clReleaseProgram(p);
  return ok;
}

KernelLibrary::KernelLibrary(const Device& device, KvType kvType)
    : device_(device),
      kvType_(kvType),
      options_(kvType == KvType::F16 ? " -DTL_KV_HALF" : kvType == KvType::Q8 ? " -DTL_KV_Q8" : "") {
  // NVIDIA: inline PTX where it builds (common.cl's TL_NV: device-wide fences, loads past
  // L1), and fp16 caches read 8 bytes at a time through it (TL_PTX); else (and elsewhere)
  // portable fences and vload_half.
  if (nvidia(device)) {
    const std::string ptx = kvType == KvType::F16 ? " -DTL_NV -DTL_PTX" : " -DTL_NV";
    std::string log;
    if ((program_ = compile(device, kernelSource(), options_ + ptx, log))) options_ += ptx;
  }
  if (!program_) program_ = build(device, kernelSource(), options_);
  addKernels(program_, kernels_, [](const std::string&) { return true; });
  // The tensor-core program: gemm.cl's and attention.cl's TL_MMA kernels (the *_mma_* tiles
  // and the prep_f16_* passes before them) with the helpers they use (their portable
  // kernels, built again there, are left to the main program's), kept when its own
  // mma_probe computes right.
  if (!device.tensorCores()) return;
  cl_program p = buildMma(device, {"common.cl", "dequant.cl", "mma.cl", "gemm.cl", "attention.cl"}, options_, nullptr);
  if (!p) return;
  if (!probeComputes(device, p, nullptr)) {
    clReleaseProgram(p);
    return;
  }
  mma_ = p;
  addKernels(mma_, kernels_, [](const std::string& name) {
    return name.find("_mma_") != std::string::npos || name.rfind("prep_f16_", 0) == 0;
  });
}

KernelLibrary::~KernelLibrary() {
  for (auto& [n, k] : kernels_) clReleaseKernel(k);
  for (auto& [n, p] : generated_) clReleaseProgram(p);
  for (auto& [n, p] : chains_) clReleaseProgram(p);
  if (program_) clReleaseProgram(program_);
  if (mma_) clReleaseProgram(mma_);
}

cl_kernel KernelLibrary::generated(const std::string& name, const std::function<std::string()>& source) {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  cl_program p = build(device_, commonHelpers() + source(), options_);
  generated_[name] = p;
  cl_int err;
  cl_kernel k = clCreateKernel(p, name.c_str(), &err);
  clCheck(err, "clCreateKernel", name);
  kernels_[name] = k;
  return k;
}

cl_kernel KernelLibrary::chain(const std::string& name, const std::string& source) {
  cl_program& p = chains_[source];
  // The task kernels live in gemm.cl and matmul.cl (the decode GEMVs) and attention.cl.
  if (!p)
    p = build(device_,
              commonHelpers() + section("dequant.cl") + section("matmul.cl") + section("gemm.cl") + section("attention.cl") + source,
              options_ + " -DTL_TASKS");
  cl_int err;
  cl_kernel k = clCreateKernel(p, name.c_str(), &err);
  clCheck(err, "clCreateKernel", name);
  return k;
}

cl_kernel KernelLibrary::fresh(const std::string& name) {
  cl_program p = nullptr;
  clCheck(clGetKernelInfo(get(name), CL_KERNEL_PROGRAM, sizeof p, &p, nullptr), "clGetKernelInfo", name);
  cl_int err;
  cl_kernel k = clCreateKernel(p, name.c_str(), &err);
  clCheck(err, "clCreateKernel", name);
  return k;
}

cl_kernel KernelLibrary::get(const std::string& name) {
  auto it = kernels_.find(name);
  if (it == kernels_.end()) throw Error("no kernel '" + name + "' (an op or dtype tl cannot run yet)");
  return it->second;
}

}  // namespace tl
