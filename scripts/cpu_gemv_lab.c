// A CPU decode GEMV through int8 activations (issue 28): the library's fp32 form of
// qgemv_cpu_e0m4 against the codes multiplied by x rounded to int8 a block of 32, with
// AVX2's pmaddubsw and pmaddwd, which PoCL's OpenCL C takes as clang builtins where the
// target has AVX2 (kernels in scripts/cpu_gemv_lab.cl). Random e0m4 codes, group 128;
// both checked against the host in double; median µs of `runs` launches (the int8 form's
// x rounding a launch of its own, counted).
//   gcc -O2 scripts/cpu_gemv_lab.c -lOpenCL -lm -o /tmp/cpu_gemv_lab
//   /tmp/cpu_gemv_lab scripts/cpu_gemv_lab.cl -- [K N]... (default bytellama's and Llama-2-7B's shapes)
//   LABOPTS="-DNC=32": 32 columns a task in the int8 form (default 8)
// Then ROWS rows of x at once (gemv_i8_rows, RC columns a task, the codes unpacked once for
// all rows) against ROWS launches of the int8 form: µs a row each way (LABOPTS="-DNC=8
// -DROWS=8 -DRC=2" for 8 rows; default 4 rows, 4 columns a task; the same x in every row,
// each row checked against the host).
#include "cl_lab.h"

int main(int argc, char **argv) {
  Lab lab;
  int a = lab_open(argc, argv, "-DNC=8", &lab);
  int shapes[16][2] = {{256, 768}, {256, 1376}, {768, 256}, {4096, 4096}, {4096, 11008}, {11008, 4096}}, ns = 6;
  if (a + 1 < argc) for (ns = 0; a + 1 < argc && ns < 16; a += 2, ++ns) shapes[ns][0] = atoi(argv[a]), shapes[ns][1] = atoi(argv[a + 1]);
  const int nc = getenv("LABOPTS") && strstr(getenv("LABOPTS"), "NC=32") ? 32 : 8, runs = 50;
  cl_int err;
  cl_kernel kf = clCreateKernel(lab.p, "gemv_f32", &err); CK(err);
  cl_kernel kq = clCreateKernel(lab.p, "quant_x", &err); CK(err);
  cl_kernel ki = clCreateKernel(lab.p, "gemv_i8", &err); CK(err);
  const char *lo = getenv("LABOPTS");
  const int rows = lo && strstr(lo, "ROWS=") ? atoi(strstr(lo, "ROWS=") + 5) : 4, rc = lo && strstr(lo, "RC=") ? atoi(strstr(lo, "RC=") + 3) : 4;
  cl_kernel kr = clCreateKernel(lab.p, "gemv_i8_rows", &err); CK(err);
  printf("| K | N | fp32 levels µs | int8 x: rounding + GEMV µs | %d rows: int8 GEMV a row, µs each way | error fp32, int8, rows (of the largest |y|) |\n"
         "|---:|---:|---:|---:|---:|---:|\n", rows);
  for (int s = 0; s < ns; ++s) {
    const int K = shapes[s][0], N = shapes[s][1], groups = K / 128;
    unsigned char *W = malloc((size_t)N * K / 2);
    float *S = malloc(sizeof(float) * N * groups), *O = malloc(sizeof(float) * N * groups), *x = malloc(sizeof(float) * K);
    double *want = calloc(N, sizeof(double));
    srand(K + N);
    for (size_t i = 0; i < (size_t)N * K / 2; ++i) W[i] = rand() & 255;
    for (int i = 0; i < N * groups; ++i) S[i] = (rand() % 1000) / 1e4f + 1e-3f, O[i] = -((rand() % 1000) / 5e3f);
    for (int k = 0; k < K; ++k) x[k] = (rand() % 2001 - 1000) / 1000.0f;
    double big = 0;
    for (int n = 0; n < N; ++n) {
      for (int k = 0; k < K; ++k) {
        const int c = (W[(size_t)n * K / 2 + k / 2] >> (4 * (k & 1))) & 15;
        const long g = (long)n * groups + k / 128;
        want[n] += (double)x[k] * ((2.0 + c / 8.0) * S[g] + O[g]);
      }
      if (fabs(want[n]) > big) big = fabs(want[n]);
    }
    cl_mem bW = clCreateBuffer(lab.ctx, CL_MEM_COPY_HOST_PTR, (size_t)N * K / 2, W, &err); CK(err);
    cl_mem bS = clCreateBuffer(lab.ctx, CL_MEM_COPY_HOST_PTR, sizeof(float) * N * groups, S, &err); CK(err);
    cl_mem bO = clCreateBuffer(lab.ctx, CL_MEM_COPY_HOST_PTR, sizeof(float) * N * groups, O, &err); CK(err);
    cl_mem bx = clCreateBuffer(lab.ctx, CL_MEM_COPY_HOST_PTR, sizeof(float) * K, x, &err); CK(err);
    cl_mem by = clCreateBuffer(lab.ctx, 0, sizeof(float) * N, 0, &err); CK(err);
    cl_mem bxq = clCreateBuffer(lab.ctx, 0, K, 0, &err); CK(err);
    cl_mem bd8 = clCreateBuffer(lab.ctx, 0, sizeof(float) * 8 * (K / 64), 0, &err); CK(err);
    cl_mem bxs = clCreateBuffer(lab.ctx, 0, sizeof(float) * groups, 0, &err); CK(err);
    cl_mem fargs[] = {bW, bS, bO, bx, by};
    for (int i = 0; i < 5; ++i) CK(clSetKernelArg(kf, i, sizeof(cl_mem), &fargs[i]));
    CK(clSetKernelArg(kf, 5, 4, &K)); CK(clSetKernelArg(kf, 6, 4, &N));
    cl_mem qargs[] = {bx, bxq, bd8, bxs};
    for (int i = 0; i < 4; ++i) CK(clSetKernelArg(kq, i, sizeof(cl_mem), &qargs[i]));
    CK(clSetKernelArg(kq, 4, 4, &K));
    cl_mem iargs[] = {bW, bS, bO, bxq, bd8, bxs, by};
    for (int i = 0; i < 7; ++i) CK(clSetKernelArg(ki, i, sizeof(cl_mem), &iargs[i]));
    CK(clSetKernelArg(ki, 7, 4, &K)); CK(clSetKernelArg(ki, 8, 4, &N));
    const size_t one = 1, gf = N / 8, gi = N / nc;
    float *y = malloc(sizeof(float) * N);
    double errs[2];
    const double tf = lab_median_us(&lab, kf, 1, &gf, &one, runs);
    CK(clEnqueueReadBuffer(lab.q, by, 1, 0, sizeof(float) * N, y, 0, 0, 0));
    errs[0] = 0; for (int n = 0; n < N; ++n) errs[0] = fmax(errs[0], fabs(y[n] - want[n]));
    const double tq = lab_median_us(&lab, kq, 1, &one, &one, runs), ti = lab_median_us(&lab, ki, 1, &gi, &one, runs);
    CK(clEnqueueReadBuffer(lab.q, by, 1, 0, sizeof(float) * N, y, 0, 0, 0));
    errs[1] = 0; for (int n = 0; n < N; ++n) errs[1] = fmax(errs[1], fabs(y[n] - want[n]));
    // ROWS copies of the rounded x (quant_x's output), then gemv_i8_rows over them.
    char *xq = malloc(K);
    float *d8 = malloc(sizeof(float) * 8 * (K / 64)), *xs = malloc(sizeof(float) * groups);
    CK(clEnqueueReadBuffer(lab.q, bxq, 1, 0, K, xq, 0, 0, 0));
    CK(clEnqueueReadBuffer(lab.q, bd8, 1, 0, sizeof(float) * 8 * (K / 64), d8, 0, 0, 0));
    CK(clEnqueueReadBuffer(lab.q, bxs, 1, 0, sizeof(float) * groups, xs, 0, 0, 0));
    cl_mem rxq = clCreateBuffer(lab.ctx, 0, (size_t)rows * K, 0, &err); CK(err);
    cl_mem rd8 = clCreateBuffer(lab.ctx, 0, sizeof(float) * 8 * (K / 64) * rows, 0, &err); CK(err);
    cl_mem rxs = clCreateBuffer(lab.ctx, 0, sizeof(float) * groups * rows, 0, &err); CK(err);
    cl_mem ry = clCreateBuffer(lab.ctx, 0, sizeof(float) * N * rows, 0, &err); CK(err);
    for (int r = 0; r < rows; ++r) {
      CK(clEnqueueWriteBuffer(lab.q, rxq, 1, (size_t)r * K, K, xq, 0, 0, 0));
      CK(clEnqueueWriteBuffer(lab.q, rd8, 1, sizeof(float) * 8 * (K / 64) * r, sizeof(float) * 8 * (K / 64), d8, 0, 0, 0));
      CK(clEnqueueWriteBuffer(lab.q, rxs, 1, sizeof(float) * groups * r, sizeof(float) * groups, xs, 0, 0, 0));
    }
    cl_mem rargs[] = {bW, bS, bO, rxq, rd8, rxs, ry};
    for (int i = 0; i < 7; ++i) CK(clSetKernelArg(kr, i, sizeof(cl_mem), &rargs[i]));
    CK(clSetKernelArg(kr, 7, 4, &K)); CK(clSetKernelArg(kr, 8, 4, &N));
    const size_t gr = N / rc;
    const double tr = lab_median_us(&lab, kr, 1, &gr, &one, runs);
    float *yr = malloc(sizeof(float) * N * rows);
    CK(clEnqueueReadBuffer(lab.q, ry, 1, 0, sizeof(float) * N * rows, yr, 0, 0, 0));
    double er = 0;
    for (int r = 0; r < rows; ++r) for (int n = 0; n < N; ++n) er = fmax(er, fabs(yr[(size_t)r * N + n] - want[n]));
    printf("| %d | %d | %.1f | %.1f + %.1f | %.1f apart, %.1f together | %.1e, %.1e, %.1e |\n", K, N, tf, tq, ti, ti,
           tr / rows, errs[0] / big, errs[1] / big, er / big);
    free(W); free(S); free(O); free(x); free(want); free(y); free(xq); free(d8); free(xs); free(yr);
    cl_mem all[] = {bW, bS, bO, bx, by, bxq, bd8, bxs, rxq, rd8, rxs, ry};
    for (int i = 0; i < 12; ++i) clReleaseMemObject(all[i]);
  }
  return 0;
}
