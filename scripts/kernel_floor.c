// What a kernel costs on an OpenCL GPU at the least: event time (profiling) and back-to-back
// wall time per launch of an empty kernel, and of plain reads of B bytes by work-groups of WG
// items each loading PER uint4s (docs/tl-bench.md, issue 28). gcc -O2 kernel_floor.c -lOpenCL
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *src =
"__kernel void empty(__global int* out) {}\n"
"__kernel void rd(__global const uint4* w, __global int* out, int per, int n4) {\n"
"  const int stride = get_global_size(0); uint x = 0;\n"
"  for (int p = 0, i = get_global_id(0); p < per; ++p, i += stride) if (i < n4) { uint4 v = w[i]; x ^= v.x ^ v.y ^ v.z ^ v.w; }\n"
"  if (x == 0x12345679u) out[0] = 1;\n"
"}\n"
"__kernel void rdred(__global const uint4* w, __global int* out, int per, int n4) {\n"
"  __local uint red[256];\n"
"  const int stride = get_global_size(0); uint x = 0;\n"
"  for (int p = 0, i = get_global_id(0); p < per; ++p, i += stride) if (i < n4) { uint4 v = w[i]; x ^= v.x ^ v.y ^ v.z ^ v.w; }\n"
"  red[get_local_id(0)] = x; barrier(CLK_LOCAL_MEM_FENCE);\n"
"  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) { if (get_local_id(0) < s) red[get_local_id(0)] ^= red[get_local_id(0) + s]; barrier(CLK_LOCAL_MEM_FENCE); }\n"
"  if (get_local_id(0) == 0) out[get_group_id(0)] = red[0];\n"
"}\n";

#define CK(x) do { cl_int e_ = (x); if (e_) { printf("error %d at %s\n", e_, #x); exit(1); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static cl_context ctx; static cl_command_queue qp, qw; static cl_mem big, out;

static void run(cl_kernel k, size_t global, size_t local, const char *what, double bytes) {
  double ev[60];
  for (int r = 0; r < 60; ++r) {
    cl_event e; CK(clEnqueueNDRangeKernel(qp, k, 1, 0, &global, &local, 0, 0, &e)); CK(clWaitForEvents(1, &e));
    cl_ulong a, b; clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, 8, &a, 0);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, 8, &b, 0); ev[r] = (b - a) / 1e3; clReleaseEvent(e);
  }
  qsort(ev + 10, 50, sizeof(double), cmp);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    clFinish(qw); double t0 = now();
    for (int i = 0; i < 200; ++i) CK(clEnqueueNDRangeKernel(qw, k, 1, 0, &global, &local, 0, 0, 0));
    clFinish(qw); double t = (now() - t0) / 200; if (t < best) best = t;
  }
  printf("%-34s event %7.2f us (min %6.2f)  back-to-back %7.2f us", what, ev[35], ev[10], best);
  if (bytes > 0) printf("  %7.1f GB/s (event)  %7.1f GB/s (b2b)", bytes / ev[35] / 1e3, bytes / best / 1e3);
  printf("\n");
}

int main(void) {
  cl_platform_id ps[8]; cl_uint np; CK(clGetPlatformIDs(8, ps, &np));
  cl_device_id dev = 0; char name[256];
  for (cl_uint i = 0; i < np && !dev; i++) if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_GPU, 1, &dev, 0)) dev = 0;
  if (!dev) { printf("no GPU\n"); return 1; }
  clGetDeviceInfo(dev, CL_DEVICE_NAME, 256, name, 0); printf("device: %s\n", name);
  cl_int err; ctx = clCreateContext(0, 1, &dev, 0, 0, &err); CK(err);
  qp = clCreateCommandQueueWithProperties(ctx, dev, (cl_queue_properties[]){CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0}, &err); CK(err);
  qw = clCreateCommandQueueWithProperties(ctx, dev, 0, &err); CK(err);
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, 0, &err); CK(err);
  CK(clBuildProgram(p, 1, &dev, "", 0, 0));
  size_t maxb = 64 << 20; char *host = malloc(maxb); srand(1); for (size_t i = 0; i < maxb; ++i) host[i] = rand();
  big = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, maxb, host, &err); CK(err);
  out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, 0, &err); CK(err);
  cl_kernel ke = clCreateKernel(p, "empty", &err); CK(err); CK(clSetKernelArg(ke, 0, sizeof out, &out));
  run(ke, 64, 64, "empty 1 x 64", 0);
  run(ke, 64 * 640, 64, "empty 640 x 64", 0);
  const char *names[] = {"rd", "rdred"};
  double sizes[] = {2.62e6, 11.5e6, 22.5e6, 45e6};
  int wgs[] = {64, 256}, pers[] = {1, 4, 8};
  for (int kn = 0; kn < 2; ++kn) {
    cl_kernel k = clCreateKernel(p, names[kn], &err); CK(err);
    CK(clSetKernelArg(k, 0, sizeof big, &big)); CK(clSetKernelArg(k, 1, sizeof out, &out));
    for (int s = 0; s < 4; ++s)
      for (int w = 0; w < 2; ++w)
        for (int pp = 0; pp < 3; ++pp) {
          int n4 = (int)(sizes[s] / 16), per = pers[pp];
          size_t items = (n4 + per - 1) / per; items = (items + wgs[w] - 1) / wgs[w] * wgs[w];
          CK(clSetKernelArg(k, 2, sizeof(int), &per)); CK(clSetKernelArg(k, 3, sizeof(int), &n4));
          char what[128]; snprintf(what, sizeof what, "%s %.1f MB wg %d per %d", names[kn], sizes[s] / 1e6, wgs[w], per);
          run(k, items, wgs[w], what, sizes[s]);
        }
  }
  return 0;
}
