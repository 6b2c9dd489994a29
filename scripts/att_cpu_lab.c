// Times the CPU prefill attention (kernels/attention.cl's attention_cpu_f32: a task of one
// item per ATT_CPUQ_ROWS query rows of a head) at one shape: H query heads over Hkv kv heads
// of D dims, S new rows over as many keys, causal, k and v [1, Hkv, S, D] in fp32 (LABHALF=1:
// fp16, as tl-plan's default in-place caches); checks the output against the host's. The lab
// behind docs/tl-bench.md's CPU prefill attention rows.
//   gcc -O2 att_cpu_lab.c -lOpenCL -lm, then
//   ./a.out kernels/common.cl kernels/attention.cl -- H Hkv D S [ROWS_A_TASK] NAME ...
// Build options from LABOPTS (default: the library's CPU options on AVX-512, TL_KV_HALF with LABHALF).
#include "cl_lab.h"
int main(int argc, char **argv) {
  Lab lab;
  const int half = getenv("LABHALF") != 0;
  int a = lab_open(argc, argv,
                   half ? "-cl-std=CL1.2 -DTL_LOCAL_MEM=1048576 -DTL_MAX_WG=4096 -DTL_CPU -DTL_VEC=16 -DTL_KV_HALF"
                        : "-cl-std=CL1.2 -DTL_LOCAL_MEM=1048576 -DTL_MAX_WG=4096 -DTL_CPU -DTL_VEC=16",
                   &lab);
  cl_int err;
  const int H = atoi(argv[a]), Hkv = atoi(argv[a + 1]), D = atoi(argv[a + 2]), S = atoi(argv[a + 3]), T = S;
  const int given = argc > a + 5 && atoi(argv[a + 4]) > 0;  // ROWS_A_TASK, else the library's 16
  const int per = given ? atoi(argv[a + 4]) : 16;
  a += given ? 5 : 4;
  size_t nq = (size_t)H * S * D, nk = (size_t)Hkv * T * D;
  float *hq = malloc(nq * 4), *hk = malloc(nk * 4), *hv = malloc(nk * 4), *ho = malloc(nq * 4);
  srand(5);
  for (size_t i = 0; i < nq; ++i) hq[i] = 2.0f * rand() / RAND_MAX - 1.0f;
  unsigned short *hk16 = malloc(nk * 2), *hv16 = malloc(nk * 2);
  for (size_t i = 0; i < nk; ++i) {  // the host reads what the kernel reads
    hk16[i] = f2h(2.0f * rand() / RAND_MAX - 1.0f), hv16[i] = f2h(2.0f * rand() / RAND_MAX - 1.0f);
    hk[i] = h2f(hk16[i]), hv[i] = h2f(hv16[i]);
  }
  const float scale = 1.0f / sqrtf((float)D);
  double *ref = calloc(nq, 8), *sc = malloc(T * 8);
  for (int h = 0; h < H; ++h)
    for (int s = 0; s < S; ++s) {
      const int g = h / (H / Hkv); double mx = -1e300, sum = 0;
      for (int t = 0; t <= s; ++t) { double d = 0; for (int e = 0; e < D; ++e) d += (double)hq[((size_t)h * S + s) * D + e] * hk[((size_t)g * T + t) * D + e]; sc[t] = d * scale; if (sc[t] > mx) mx = sc[t]; }
      for (int t = 0; t <= s; ++t) { sc[t] = exp(sc[t] - mx); sum += sc[t]; }
      for (int e = 0; e < D; ++e) { double o = 0; for (int t = 0; t <= s; ++t) o += sc[t] * hv[((size_t)g * T + t) * D + e]; ref[((size_t)h * S + s) * D + e] = o / sum; }
    }
  cl_mem bq = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nq * 4, hq, &err); CK(err);
  cl_mem bk = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nk * (half ? 2 : 4), half ? (void *)hk16 : hk, &err); CK(err);
  cl_mem bv = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nk * (half ? 2 : 4), half ? (void *)hv16 : hv, &err); CK(err);
  cl_mem bo = clCreateBuffer(lab.ctx, CL_MEM_READ_WRITE, nq * 4, 0, &err); CK(err);
  // pairs of (causal) query-key products, each D multiply-adds twice (scores, values)
  const double flops = 4.0 * D * H * ((double)S * (S + 1) / 2);
  for (; a < argc; ++a) {
    cl_kernel k = clCreateKernel(lab.p, argv[a], &err); CK(err);
    const int zero = 0, rows = H * S; const float soft = 0.0f, mv = -INFINITY; cl_mem nul = 0;
    const int ia[] = {rows, H, Hkv, S, T, D, D};
    const int st[] = {H * S * D, S * D, D, Hkv * T * D, T * D, D, Hkv * T * D, T * D, D, 0, 0, 0, 0, H * S * D, S * D, D, 0, 1};
    int n = 0;
    CK(clSetKernelArg(k, n++, sizeof bq, &bq)); CK(clSetKernelArg(k, n++, sizeof bk, &bk));
    CK(clSetKernelArg(k, n++, sizeof bv, &bv)); CK(clSetKernelArg(k, n++, sizeof nul, &nul));
    CK(clSetKernelArg(k, n++, sizeof bo, &bo));
    for (int i = 0; i < 7; ++i) CK(clSetKernelArg(k, n++, 4, &ia[i]));
    CK(clSetKernelArg(k, n++, 4, &scale)); CK(clSetKernelArg(k, n++, 4, &soft)); CK(clSetKernelArg(k, n++, 4, &zero));
    for (int i = 0; i < 18; ++i) CK(clSetKernelArg(k, n++, 4, &st[i]));  // strides, zero_rows, causal
    CK(clSetKernelArg(k, n++, 4, &mv)); CK(clSetKernelArg(k, n++, sizeof nul, &nul));
    CK(clSetKernelArg(k, n++, 4, &zero)); CK(clSetKernelArg(k, n++, 4, &zero)); CK(clSetKernelArg(k, n++, sizeof nul, &nul));
    const size_t gs = (size_t)H * ((S + per - 1) / per), ls = 1;
    const double us = lab_median_us(&lab, k, 1, &gs, &ls, 21);
    CK(clEnqueueReadBuffer(lab.q, bo, CL_TRUE, 0, nq * 4, ho, 0, 0, 0));
    double err_max = 0;
    for (size_t i = 0; i < nq; ++i) if (!(fabs(ho[i] - ref[i]) <= err_max)) err_max = isnan(ho[i]) ? INFINITY : fabs(ho[i] - ref[i]);
    printf("%-24s H %d Hkv %d D %d S %d: %8.1f us  %6.1f GFLOP/s  max abs err %.2e\n", argv[a], H, Hkv, D, S, us, flops / us / 1e3, err_max);
    clReleaseKernel(k);
  }
  return 0;
}
