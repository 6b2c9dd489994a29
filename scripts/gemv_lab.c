// Times one-row decode GEMV kernels of tl.QMatMul's GPU convention (kernels/qmatmul.cl:
// A, W, S, O, C, SPLIT_ARGS, M, N, K, G, row_bytes, groups, GEMV_ARGS [, HAND_ARGS]; e0m4 codes, group 128;
// LABNW=1 gives them an RMSNorm weight, LABGLU=1 a SiLU GLU over column pairs j, j + N / 2)
// on enough copies of the weights that none is read from L2 twice in a row, as a decode
// step reads a model's layers; each kernel's output is checked against the host. The lab
// behind docs/bench/h100/issue28-gemv-lab.md. gcc -O2 gemv_lab.c -lOpenCL -lm, then
//   ./a.out kernels/common.cl kernels/dequant.cl kernels/qmatmul.cl [more.cl] -- K N NAME:WG:COLS[:GROUPS] ...
// (WG items a work-group, COLS columns a work-group, or GROUPS work-groups). Build options
// from LABOPTS (default: the NVIDIA family's -DTL_MMA ...; PoCL's CPU family: -DTL_CPU ...);
// LABCOPIES=n: n copies of the weights instead (1: they stay in cache, as a small model's
// do); LABPTX: scripts/cl_lab.h.
#include "cl_lab.h"
#include <time.h>
int main(int argc, char **argv) {
  Lab lab;
  int a = lab_open(argc, argv, "-DTL_MMA -DTL_LOCAL_MEM=49152 -DTL_MAX_WG=1024", &lab);
  cl_int err; cl_context ctx = lab.ctx; cl_command_queue q = lab.q; cl_program p = lab.p;
  int K = atoi(argv[a]), N = atoi(argv[a + 1]); a += 2;
  int G = 128, groups = K / G, row_bytes = K / 2;
  size_t wbytes = (size_t)N * row_bytes, sbytes = (size_t)N * groups * 4;
  int R = (int)(400e6 / (wbytes + 2 * sbytes)) + 1; if (R > 64) R = 64;
  if (getenv("LABCOPIES")) R = atoi(getenv("LABCOPIES"));
  unsigned char *hw = malloc(wbytes); float *hs = malloc(sbytes), *ho = malloc(sbytes), *ha = malloc(K * 4);
  srand(7); for (size_t i = 0; i < wbytes; ++i) hw[i] = rand();
  for (size_t i = 0; i < (size_t)N * groups; ++i) { hs[i] = 0.01f + 0.01f * rand() / RAND_MAX; ho[i] = -0.03f + 0.01f * rand() / RAND_MAX; }
  for (int i = 0; i < K; ++i) ha[i] = 2.0f * rand() / RAND_MAX - 1.0f;
  const int norm = getenv("LABNW") && atoi(getenv("LABNW")), glu = getenv("LABGLU") && atoi(getenv("LABGLU"));
  const float eps = 1e-5f;
  float *hn = malloc(K * 4); double ss = 0, *an = malloc(K * 8);
  for (int i = 0; i < K; ++i) { hn[i] = 0.5f + (float)rand() / RAND_MAX; ss += (double)ha[i] * ha[i]; }
  for (int i = 0; i < K; ++i) an[i] = norm ? ha[i] * hn[i] / sqrt(ss / K + eps) : ha[i];
  double *ref = calloc(N, 8);
  for (int n = 0; n < N; ++n) { double s = 0; for (int k = 0; k < K; ++k) { int c = (hw[(size_t)n * row_bytes + k / 2] >> (4 * (k & 1))) & 15; double lv = 2.0 + c / 8.0; int g = k / G; s += an[k] * (hs[n * groups + g] * lv + ho[n * groups + g]); } ref[n] = s; }
  const int outs = glu ? N / 2 : N;
  if (glu) for (int j = 0; j < outs; ++j) ref[j] = ref[j] / (1.0 + exp(-ref[j])) * ref[j + outs];
  cl_mem *W = malloc(R * sizeof(cl_mem)), *S = malloc(R * sizeof(cl_mem)), *O = malloc(R * sizeof(cl_mem));
  for (int r = 0; r < R; ++r) {
    W[r] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, wbytes, hw, &err); CK(err);
    S[r] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sbytes, hs, &err); CK(err);
    O[r] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sbytes, ho, &err); CK(err);
  }
  cl_mem A = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, K * 4, ha, &err); CK(err);
  cl_mem C = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4 + 64, 0, &err); CK(err);
  cl_mem NWB = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, K * 4, hn, &err); CK(err);
  printf("K %d N %d%s%s: %.1f MB weights + %.1f MB scales, %d copies\n", K, N, norm ? " norm" : "", glu ? " glu" : "", wbytes / 1e6, 2 * sbytes / 1e6, R);
  for (; a < argc; ++a) {
    char name[128]; int wg = 64, cols = 4, ngr = 0; sscanf(argv[a], "%127[^:]:%d:%d:%d", name, &wg, &cols, &ngr);
    cl_kernel k = clCreateKernel(p, name, &err); if (err) { printf("%s: no kernel (%d)\n", name, err); continue; }
    int M = 1, zero = 0; cl_mem nul = 0;
    int ai = 0;
    CK(clSetKernelArg(k, ai++, sizeof A, &A)); CK(clSetKernelArg(k, ai++, sizeof(cl_mem), &W[0]));
    CK(clSetKernelArg(k, ai++, sizeof(cl_mem), &S[0])); CK(clSetKernelArg(k, ai++, sizeof(cl_mem), &O[0]));
    CK(clSetKernelArg(k, ai++, sizeof C, &C)); CK(clSetKernelArg(k, ai++, sizeof nul, &nul)); CK(clSetKernelArg(k, ai++, sizeof nul, &nul));
    CK(clSetKernelArg(k, ai++, 4, &N)); CK(clSetKernelArg(k, ai++, 4, &zero));
    CK(clSetKernelArg(k, ai++, sizeof nul, &nul)); CK(clSetKernelArg(k, ai++, sizeof nul, &nul));
    CK(clSetKernelArg(k, ai++, 4, &M)); CK(clSetKernelArg(k, ai++, 4, &N)); CK(clSetKernelArg(k, ai++, 4, &K));
    CK(clSetKernelArg(k, ai++, 4, &G)); CK(clSetKernelArg(k, ai++, 4, &row_bytes)); CK(clSetKernelArg(k, ai++, 4, &groups));
    CK(clSetKernelArg(k, ai++, sizeof(cl_mem), norm ? &NWB : &nul)); CK(clSetKernelArg(k, ai++, 4, &eps)); CK(clSetKernelArg(k, ai++, 4, &glu));
    cl_uint nargs; CK(clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, 0));
    if (nargs >= (cl_uint)ai + 5) {  // HAND_ARGS: no norm handed in or on
      CK(clSetKernelArg(k, ai++, sizeof nul, &nul)); CK(clSetKernelArg(k, ai++, 4, &zero));
      for (int i = 0; i < 3; ++i) CK(clSetKernelArg(k, ai++, sizeof nul, &nul));
    }
    size_t local = wg, global = (size_t)(ngr ? ngr : (N + cols - 1) / cols) * wg;
    float *hc = malloc(N * 4); float zf = 0.0f;
    CK(clEnqueueFillBuffer(q, C, &zf, 4, 0, N * 4, 0, 0, 0));
    CK(clEnqueueNDRangeKernel(q, k, 1, 0, &global, &local, 0, 0, 0));
    CK(clEnqueueReadBuffer(q, C, CL_TRUE, 0, N * 4, hc, 0, 0, 0));
    double maxe = 0, maxr = 0; for (int n = 0; n < outs; ++n) { double e = fabs(hc[n] - ref[n]); if (e > maxe) maxe = e; if (fabs(ref[n]) > maxr) maxr = fabs(ref[n]); }
    enum { REPS = 200 }; double ev[REPS];
    for (int r = 0; r < REPS; ++r) {
      CK(clSetKernelArg(k, 1, sizeof(cl_mem), &W[r % R])); CK(clSetKernelArg(k, 2, sizeof(cl_mem), &S[r % R])); CK(clSetKernelArg(k, 3, sizeof(cl_mem), &O[r % R]));
      cl_event e; CK(clEnqueueNDRangeKernel(q, k, 1, 0, &global, &local, 0, 0, &e));
      CK(clWaitForEvents(1, &e));
      ev[r] = lab_us(e); clReleaseEvent(e);
    }
    qsort(ev + 20, REPS - 20, sizeof(double), cmp);
    double med = ev[20 + (REPS - 20) / 2];
    // Back to back, as a step's launches run: wall time a launch, the best of 5 rounds.
    double b2b = 1e30;
    for (int round = 0; round < 5; ++round) {
      clFinish(q); struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
      for (int r = 0; r < REPS; ++r) {
        CK(clSetKernelArg(k, 1, sizeof(cl_mem), &W[r % R])); CK(clSetKernelArg(k, 2, sizeof(cl_mem), &S[r % R])); CK(clSetKernelArg(k, 3, sizeof(cl_mem), &O[r % R]));
        CK(clEnqueueNDRangeKernel(q, k, 1, 0, &global, &local, 0, 0, 0));
      }
      clFinish(q); clock_gettime(CLOCK_MONOTONIC, &t1);
      const double us = ((t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3) / REPS;
      if (us < b2b) b2b = us;
    }
    printf("  %-28s groups %5zu wg %4d cols %2d  median %7.2f us  q1 %7.2f  back-to-back %7.2f  %6.0f GB/s  maxerr %.2e (of %.2e)\n", name, global / wg, wg, cols, med,
           ev[20 + (REPS - 20) / 4], b2b, (wbytes + 2 * sbytes) / med / 1e3, maxe, maxr);
    free(hc); clReleaseKernel(k);
  }
  return 0;
}
