// What the kernel labs (scripts/gemv_lab.c, scripts/att_lab.c) share: one OpenCL program
// of the .cl files named before "--", on the first GPU (else any device), with a profiling
// queue. Build options from LABOPTS (else the lab's default); LABPTX=FILE writes the
// program's binary (PTX on NVIDIA); LABLOG=1 prints the build log (NVIDIA, with
// LABOPTS=-cl-nv-verbose: each kernel's registers and spills).
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CK(x) do { cl_int e_ = (x); if (e_) { printf("error %d at %s line %d\n", e_, #x, __LINE__); exit(1); } } while (0)
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static char *slurp(const char *f) { FILE *fp = fopen(f, "rb"); if (!fp) { perror(f); exit(1); } fseek(fp, 0, 2); long n = ftell(fp); rewind(fp); char *b = malloc(n + 1); if (fread(b, 1, n, fp) != (size_t)n) exit(1); b[n] = 0; fclose(fp); return b; }
typedef struct { cl_device_id dev; cl_context ctx; cl_command_queue q; cl_program p; } Lab;
// fp16 bits from a float (round to nearest even; no subnormals), and back.
static inline unsigned short f2h(float f) { unsigned x; memcpy(&x, &f, 4); unsigned s = (x >> 16) & 0x8000; int e = ((x >> 23) & 255) - 127 + 15; unsigned m = x & 0x7fffff; if (e <= 0) return s; if (e >= 31) return s | 0x7c00; unsigned r = s | (e << 10) | (m >> 13); if ((m & 0x1fff) > 0x1000 || ((m & 0x1fff) == 0x1000 && (r & 1))) r++; return r; }
static inline float h2f(unsigned short h) { unsigned s = (h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023; unsigned x = e == 0 ? s : s | ((e - 15 + 127) << 23) | (m << 13); float f; memcpy(&f, &x, 4); return f; }
// Builds argv's files up to "--" into lab; returns the index of the first argument after it.
static int lab_open(int argc, char **argv, const char *default_opts, Lab *lab) {
  int a = 1; char *src = calloc(1, 1); size_t sl = 0;
  for (; a < argc && strcmp(argv[a], "--"); ++a) { char *s = slurp(argv[a]); src = realloc(src, sl + strlen(s) + 2); strcpy(src + sl, s); sl += strlen(s); src[sl++] = '\n'; src[sl] = 0; free(s); }
  const char *opts = getenv("LABOPTS") ? getenv("LABOPTS") : default_opts;
  cl_platform_id ps[8]; cl_uint np; CK(clGetPlatformIDs(8, ps, &np));
  lab->dev = 0;
  for (cl_uint i = 0; i < np && !lab->dev; i++) if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_GPU, 1, &lab->dev, 0)) lab->dev = 0;
  if (!lab->dev) for (cl_uint i = 0; i < np && !lab->dev; i++) if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &lab->dev, 0)) lab->dev = 0;
  cl_int err; lab->ctx = clCreateContext(0, 1, &lab->dev, 0, 0, &err); CK(err);
  lab->q = clCreateCommandQueueWithProperties(lab->ctx, lab->dev, (cl_queue_properties[]){CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0}, &err); CK(err);
  const char *s1 = src; lab->p = clCreateProgramWithSource(lab->ctx, 1, &s1, 0, &err); CK(err);
  if (clBuildProgram(lab->p, 1, &lab->dev, opts, 0, 0)) { char log[65536]; clGetProgramBuildInfo(lab->p, lab->dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, 0); printf("build failed:\n%.6000s\n", log); exit(1); }
  if (getenv("LABLOG")) { char log[65536]; clGetProgramBuildInfo(lab->p, lab->dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, 0); printf("%s\n", log); }
  if (getenv("LABPTX")) { size_t sz; CK(clGetProgramInfo(lab->p, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, 0)); unsigned char *bin = malloc(sz); CK(clGetProgramInfo(lab->p, CL_PROGRAM_BINARIES, sizeof bin, &bin, 0)); FILE *f = fopen(getenv("LABPTX"), "wb"); fwrite(bin, 1, sz, f); fclose(f); free(bin); }
  free(src);
  return a + 1;
}
// A profiled event's duration in µs.
static double lab_us(cl_event e) {
  cl_ulong t0, t1;
  clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, 8, &t0, 0); clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, 8, &t1, 0);
  return (t1 - t0) / 1e3;
}
// The median of `runs` timed launches (after two untimed ones), µs.
static inline double lab_median_us(Lab *lab, cl_kernel k, cl_uint dims, const size_t *gs, const size_t *ls, int runs) {
  double *us = malloc(runs * sizeof(double));
  for (int r = -2; r < runs; ++r) {
    cl_event e; CK(clEnqueueNDRangeKernel(lab->q, k, dims, 0, gs, ls, 0, 0, &e)); CK(clWaitForEvents(1, &e));
    if (r >= 0) us[r] = lab_us(e);
    clReleaseEvent(e);
  }
  qsort(us, runs, sizeof(double), cmp);
  const double median = us[runs / 2];
  free(us);
  return median;
}
