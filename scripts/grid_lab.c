// What a decode step could save by one persistent kernel instead of a launch per op (issue
// 28): a chain of P phases, each a plain read of S bytes (a GEMV's weights) from its own
// region (the chain together larger than L2), run
//   launches  P launches of a read kernel back to back (in-order queue);
//   cb        the same P launches replayed from one command buffer (cl_khr_command_buffer);
//   persist   one kernel of a work-group per compute unit (all resident at once) that
//             reads each phase's bytes and then waits for every work-group (a grid
//             barrier: an atomic count and a spin, NVIDIA's membar.gl on both sides);
//   nosync    the persistent kernel without the barriers (the reads alone: a floor);
//   pre       as persist, each phase's bytes loaded into registers before the barrier
//             that ends the phase before it (a weight does not wait on the last output).
// S = 0 gives each form's fixed cost a phase. Wall time per phase, the best of 5 rounds.
// A second table asks what a task chain of the library's decode kernels (work-groups of 64
// items) would cost on a GPU: each phase split into T tasks of 64 items (T work-groups of a
// decode GEMV), run
//   launch64  P launches of T work-groups of 64 items;
//   claims    one kernel of G work-groups of 64 that take each phase's tasks from an atomic
//             count (item 0 takes, the group reads it from local memory), count each done
//             and wait for all before the next phase (runtime/executor/chains.cpp's scheme:
//             no group waits on one that has not started, so G need not all be resident);
//   static    task t of a phase on work-group t % G, a grid barrier after each phase (G
//             all resident).
// The spin needs every work-group resident: a GPU's work-group a compute unit, or on a CPU
// OpenCL (no GPU present) a work-group a core, each on a thread of its own (PoCL's pthread
// device deals a launch's groups out to its threads; were two given to one thread, the
// spin would hang). NVIDIA's fences are PTX (membar.gl), elsewhere OpenCL's.
// gcc -O2 grid_lab.c -lOpenCL; ./a.out [phases]
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *src =
"#ifdef NV\n"
"#define FENCE() asm volatile(\"membar.gl;\" ::: \"memory\")\n"
"#else\n"
"#define FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)\n"
"#endif\n"
"inline void grid_sync(volatile __global int* cnt, int target) {\n"
"  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);\n"
"  if (get_local_id(0) == 0) {\n"
"    FENCE();\n"
"    atomic_inc(cnt);\n"
"    while (atomic_add(cnt, 0) < target) {}\n"
"    FENCE();\n"
"  }\n"
"  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);\n"
"}\n"
"__kernel void rd(__global const uint4* w, __global int* out, int n4) {\n"
"  uint x = 0;\n"
"  for (int i = get_global_id(0); i < n4; i += get_global_size(0)) { uint4 v = w[i]; x ^= v.x ^ v.y ^ v.z ^ v.w; }\n"
"  if (x == 0x12345679u) out[0] = 1;\n"
"}\n"
"__kernel void persist(__global const uint4* w, __global int* out, volatile __global int* cnt, int phases, int n4, int sync) {\n"
"  uint x = 0;\n"
"  for (int p = 0; p < phases; ++p) {\n"
"    __global const uint4* r = w + (long)p * n4;\n"
"    for (int i = get_global_id(0); i < n4; i += get_global_size(0)) { uint4 v = r[i]; x ^= v.x ^ v.y ^ v.z ^ v.w; }\n"
"    if (sync) grid_sync(cnt, (p + 1) * get_num_groups(0));\n"
"  }\n"
"  if (x == 0x12345679u) out[0] = 1;\n"
"}\n"
"__kernel void claims(__global const uint4* w, __global int* out, volatile __global int* cnt, int phases, int n4, int tasks) {\n"
"  __local int tk;\n"
"  uint x = 0; const int per = (n4 + tasks - 1) / tasks, l = get_local_id(0);\n"
"  for (int p = 0; p < phases; ++p) {\n"
"    __global const uint4* r = w + (long)p * n4; volatile __global int* c = cnt + 2 * p;\n"
"    for (;;) {\n"
"      if (l == 0) tk = atomic_inc(c);\n"
"      barrier(CLK_LOCAL_MEM_FENCE);\n"
"      const int t = tk;\n"
"      barrier(CLK_LOCAL_MEM_FENCE);\n"
"      if (t >= tasks) break;\n"
"      for (int i = t * per + l; i < min(n4, (t + 1) * per); i += 64) { uint4 v = r[i]; x ^= v.x ^ v.y ^ v.z ^ v.w; }\n"
"      barrier(CLK_GLOBAL_MEM_FENCE);\n"
"      if (l == 0) { FENCE(); atomic_inc(c + 1); }\n"
"    }\n"
"    if (l == 0) { while (atomic_add(c + 1, 0) < tasks) {} FENCE(); }\n"
"    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);\n"
"  }\n"
"  if (x == 0x12345679u) out[0] = 1;\n"
"}\n"
"__kernel void statics(__global const uint4* w, __global int* out, volatile __global int* cnt, int phases, int n4, int tasks) {\n"
"  uint x = 0; const int per = (n4 + tasks - 1) / tasks, l = get_local_id(0);\n"
"  for (int p = 0; p < phases; ++p) {\n"
"    __global const uint4* r = w + (long)p * n4;\n"
"    for (int t = get_group_id(0); t < tasks; t += get_num_groups(0))\n"
"      for (int i = t * per + l; i < min(n4, (t + 1) * per); i += 64) { uint4 v = r[i]; x ^= v.x ^ v.y ^ v.z ^ v.w; }\n"
"    grid_sync(cnt, (p + 1) * get_num_groups(0));\n"
"  }\n"
"  if (x == 0x12345679u) out[0] = 1;\n"
"}\n"
"__kernel void preload(__global const uint4* w, __global int* out, volatile __global int* cnt, int phases, int n4, int sync) {\n"
"  uint x = 0; uint4 v[16]; const int gs = get_global_size(0), id = get_global_id(0);\n"
"  for (int j = 0; j < 16; ++j) { const int i = id + j * gs; v[j] = i < n4 ? w[i] : (uint4)(0); }\n"
"  for (int p = 0; p < phases; ++p) {\n"
"    for (int j = 0; j < 16; ++j) x ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;\n"
"    if (p + 1 < phases) { __global const uint4* r = w + (long)(p + 1) * n4;\n"
"      for (int j = 0; j < 16; ++j) { const int i = id + j * gs; v[j] = i < n4 ? r[i] : (uint4)(0); } }\n"
"    if (sync) grid_sync(cnt, (p + 1) * get_num_groups(0));\n"
"  }\n"
"  if (x == 0x12345679u) out[0] = 1;\n"
"}\n";

#define CK(x) do { cl_int e_ = (x); if (e_) { printf("error %d at %s (line %d)\n", e_, #x, __LINE__); exit(1); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

// One kernel of the chain's (persist, preload, claims, statics: big, out, cnt, phases, n4 and
// a last int) over items in groups of wg, its counts (cntBytes) zeroed before each run: the
// best of 5 rounds of 10, us a phase.
static double time_phases(cl_command_queue q, cl_kernel k, cl_mem big, cl_mem out, cl_mem cnt, size_t cntBytes,
                          int P, int n4, int last, size_t items, size_t wg) {
  const int zero = 0;
  CK(clSetKernelArg(k, 0, sizeof big, &big)); CK(clSetKernelArg(k, 1, sizeof out, &out));
  CK(clSetKernelArg(k, 2, sizeof cnt, &cnt)); CK(clSetKernelArg(k, 3, sizeof(int), &P));
  CK(clSetKernelArg(k, 4, sizeof(int), &n4)); CK(clSetKernelArg(k, 5, sizeof(int), &last));
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    clFinish(q); double t0 = now();
    for (int rep = 0; rep < 10; ++rep) {
      CK(clEnqueueFillBuffer(q, cnt, &zero, 4, 0, cntBytes, 0, 0, 0));
      CK(clEnqueueNDRangeKernel(q, k, 1, 0, &items, &wg, 0, 0, 0));
    }
    clFinish(q); double t = (now() - t0) / (10.0 * P); if (t < best) best = t;
  }
  return best;
}

int main(int argc, char **argv) {
  const int P = argc > 1 ? atoi(argv[1]) : 110;
  cl_platform_id ps[8]; cl_uint np; CK(clGetPlatformIDs(8, ps, &np));
  cl_device_id dev = 0; cl_platform_id plat = 0; char name[256];
  for (cl_uint i = 0; i < np && !dev; i++) if (!clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_GPU, 1, &dev, 0)) plat = ps[i]; else dev = 0;
  for (cl_uint i = 0; i < np && !dev; i++) if (!clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &dev, 0)) plat = ps[i]; else dev = 0;
  if (!dev) { printf("no OpenCL device\n"); return 1; }
  char pname[256]; clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof pname, pname, 0);
  cl_device_type type; clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, 0);
  const int cpu = !(type & CL_DEVICE_TYPE_GPU);
  cl_uint cus; clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, 0);
  clGetDeviceInfo(dev, CL_DEVICE_NAME, 256, name, 0); printf("device: %s, %u compute units, %d phases\n", name, cus, P);
  cl_int err; cl_context ctx = clCreateContext(0, 1, &dev, 0, 0, &err); CK(err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, 0, &err); CK(err);
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, 0, &err); CK(err);
  if (clBuildProgram(p, 1, &dev, strstr(pname, "NVIDIA") ? "-DNV" : "", 0, 0)) {
    char log[8192]; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, 0); printf("%s\n", log); return 1;
  }
  // (a CPU: bytellama's GEMVs' bytes, e0m4, 0.1-0.4 MB; a GPU: TinyLlama's and Llama-2-7B's)
  const double sizes[] = {0, cpu ? 1.0e5 : 2.62e6, cpu ? 4.0e5 : 6.0e6, cpu ? 2.62e6 : 11.5e6};
  const size_t maxb = (size_t)(11.5e6 + 4096) * P;
  cl_mem big = clCreateBuffer(ctx, CL_MEM_READ_ONLY, maxb, 0, &err); CK(err);
  const cl_uchar seven = 7;
  CK(clEnqueueFillBuffer(q, big, &seven, 1, 0, maxb, 0, 0, 0));
  cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, 0, &err); CK(err);
  cl_mem cnt = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 8 * (size_t)P, 0, &err); CK(err);
  cl_kernel kpersist = clCreateKernel(p, "persist", &err); CK(err);
  cl_kernel kpre = clCreateKernel(p, "preload", &err); CK(err);
  clCreateCommandBufferKHR_fn cbCreate = (clCreateCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clCreateCommandBufferKHR");
  clCommandNDRangeKernelKHR_fn cbNd = (clCommandNDRangeKernelKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clCommandNDRangeKernelKHR");
  clFinalizeCommandBufferKHR_fn cbFin = (clFinalizeCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clFinalizeCommandBufferKHR");
  clEnqueueCommandBufferKHR_fn cbEnq = (clEnqueueCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(plat, "clEnqueueCommandBufferKHR");
  char ext[16384] = ""; clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext, ext, 0);
  printf("cl_khr_command_buffer: %s; functions %s\n", strstr(ext, "cl_khr_command_buffer") ? "listed" : "not listed",
         cbCreate && cbNd && cbFin && cbEnq ? "found" : "missing");
  printf("%-10s %-12s %10s %10s %10s %10s   (us a phase)\n", "bytes", "wg", "launches", "cb", "persist", "nosync");
  for (int s = 0; s < 4; ++s) {
    const int n4 = (int)(sizes[s] / 16);
    const size_t wgr = 256, itemsR = n4 ? ((size_t)n4 + wgr - 1) / wgr * wgr : wgr;
    // Each launch reads its own region: one kernel object per phase (arguments differ).
    cl_kernel *ks = malloc(sizeof(cl_kernel) * P);
    cl_mem *subs = malloc(sizeof(cl_mem) * P);
    for (int i = 0; i < P; ++i) {
      cl_buffer_region reg = {(size_t)i * (n4 * 16 + 4096) / 4096 * 4096, n4 ? (size_t)n4 * 16 : 16};
      subs[i] = clCreateSubBuffer(big, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err); CK(err);
      ks[i] = clCreateKernel(p, "rd", &err); CK(err);
      CK(clSetKernelArg(ks[i], 0, sizeof subs[i], &subs[i])); CK(clSetKernelArg(ks[i], 1, sizeof out, &out));
      CK(clSetKernelArg(ks[i], 2, sizeof(int), &n4));
    }
    double tl = 1e30, tc = 1e30;
    for (int r = 0; r < 5; ++r) {
      clFinish(q); double t0 = now();
      for (int rep = 0; rep < 10; ++rep)
        for (int i = 0; i < P; ++i) CK(clEnqueueNDRangeKernel(q, ks[i], 1, 0, &itemsR, &wgr, 0, 0, 0));
      clFinish(q); double t = (now() - t0) / (10.0 * P); if (t < tl) tl = t;
    }
    if (cbCreate && cbNd && cbFin && cbEnq) {
      cl_command_buffer_khr cb = cbCreate(1, &q, 0, &err); CK(err);
      for (int i = 0; i < P; ++i) CK(cbNd(cb, 0, 0, ks[i], 1, 0, &itemsR, &wgr, 0, 0, 0, 0));
      CK(cbFin(cb));
      for (int r = 0; r < 5; ++r) {
        clFinish(q); double t0 = now();
        for (int rep = 0; rep < 10; ++rep) {  // (a replay must end before the next: PoCL)
          CK(cbEnq(0, 0, cb, 0, 0, 0));
          clFinish(q);
        }
        clFinish(q); double t = (now() - t0) / (10.0 * P); if (t < tc) tc = t;
      }
    }
    for (int m = 1; m <= 4; ++m) {
      cl_kernel kp = m <= 2 ? kpersist : kpre;
      const size_t wgp = 256 * (m <= 2 ? m : m - 2), itemsP = (size_t)cus * wgp;
      if (m > 2 && (size_t)n4 > 16 * itemsP) continue;
      double tp[2];
      for (int sync = 0; sync < 2; ++sync) tp[sync] = time_phases(q, kp, big, out, cnt, 4, P, n4, sync, itemsP, wgp);
      char wg[32]; snprintf(wg, sizeof wg, "%ux%zu%s", cus, wgp, m > 2 ? " pre" : "");
      if (m == 1) printf("%-10.2e %-12s %10.2f %10.2f %10.2f %10.2f\n", sizes[s], wg, tl, tc, tp[1], tp[0]);
      else printf("%-10s %-12s %10s %10s %10.2f %10.2f\n", "", wg, "", "", tp[1], tp[0]);
    }
    for (int i = 0; i < P; ++i) { clReleaseKernel(ks[i]); clReleaseMemObject(subs[i]); }
    free(ks); free(subs);
  }
  // The chain's forms: T tasks of 64 items a phase (TinyLlama's decode GEMVs: 8 columns a
  // work-group, 2048 x 2560 QKV 320 of them, 2048 x 11264 gate/up 1408).
  cl_kernel kclaims = clCreateKernel(p, "claims", &err); CK(err);
  cl_kernel kstatic = clCreateKernel(p, "statics", &err); CK(err);
  printf("\n%-10s %-6s %10s %-8s %10s %10s   (us a phase)\n", "bytes", "tasks", "launch64", "G", "claims", "static");
  const int taskCounts[] = {320, 1408};
  const int groupsPerCu[] = {4, 8, 16};
  for (int s = 0; s < 3; ++s)
    for (int ti = 0; ti < 2; ++ti) {
      const int n4 = (int)(sizes[s] / 16), T = taskCounts[ti];
      const size_t wg = 64, itemsL = (size_t)T * 64;
      cl_kernel *ks = malloc(sizeof(cl_kernel) * P);  // (each phase its own region, as the chain's)
      cl_mem *subs = malloc(sizeof(cl_mem) * P);
      for (int i = 0; i < P; ++i) {
        cl_buffer_region reg = {(size_t)i * n4 * 16, n4 ? (size_t)n4 * 16 : 16};
        subs[i] = clCreateSubBuffer(big, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
        if (err) {  // (a region not at the device's alignment: the page above it)
          reg.origin = (size_t)i * (n4 * 16 + 4096) / 4096 * 4096;
          subs[i] = clCreateSubBuffer(big, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err); CK(err);
        }
        ks[i] = clCreateKernel(p, "rd", &err); CK(err);
        CK(clSetKernelArg(ks[i], 0, sizeof subs[i], &subs[i])); CK(clSetKernelArg(ks[i], 1, sizeof out, &out));
        CK(clSetKernelArg(ks[i], 2, sizeof(int), &n4));
      }
      double tl = 1e30;
      for (int r = 0; r < 5; ++r) {
        clFinish(q); double t0 = now();
        for (int rep = 0; rep < 10; ++rep)
          for (int i = 0; i < P; ++i) CK(clEnqueueNDRangeKernel(q, ks[i], 1, 0, &itemsL, &wg, 0, 0, 0));
        clFinish(q); double t = (now() - t0) / (10.0 * P); if (t < tl) tl = t;
      }
      for (int i = 0; i < P; ++i) { clReleaseKernel(ks[i]); clReleaseMemObject(subs[i]); }
      free(ks); free(subs);
      for (int gi = 0; gi < 3; ++gi) {
        const size_t G = (size_t)cus * groupsPerCu[gi], itemsG = G * 64;
        double tk[2] = {1e30, 1e30};
        for (int m = 0; m < (cpu ? 1 : 2); ++m)  // (static spins on groups a CPU may not run at once)
          tk[m] = time_phases(q, m ? kstatic : kclaims, big, out, cnt, 8 * (size_t)P, P, n4, T, itemsG, wg);
        char g[32]; snprintf(g, sizeof g, "%ux%d", cus, groupsPerCu[gi]);
        char st[32] = "-";
        if (!cpu) snprintf(st, sizeof st, "%.2f", tk[1]);
        if (gi == 0) printf("%-10.2e %-6d %10.2f %-8s %10.2f %10s\n", sizes[s], T, tl, g, tk[0], st);
        else printf("%-10s %-6s %10s %-8s %10.2f %10s\n", "", "", "", g, tk[0], st);
      }
    }
  return 0;
}
