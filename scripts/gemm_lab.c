// Times f16 x f16 -> f32 GEMM kernels of the lab convention (A [M][K] and W [N][K] halves as
// uint4 chunks, C [M][N] floats: NAME(A, W, C, M, N, K)), BM x BN tiles of WG items, and
// checks 4096 of each kernel's outputs against the host (double sums over the same halves).
// Kernels named gfa_*: A as floats (the same values) and an RMSNorm, NAME(A, W, C, M, N, K,
// NW, eps): C = (A nw) W^T / rms(A's row); LABNW=0 passes no NW.
// gcc -O2 gemm_lab.c -lOpenCL -lm, then
//   ./a.out kernels/mma.cl more.cl -- M N K NAME:BM:BN:WG ...
// Build options from LABOPTS (default -DTL_MMA); LABRUNS runs a kernel (default 20, median
// reported); LABPTX: scripts/cl_lab.h.
#include "cl_lab.h"
static unsigned short to_half(float f) { _Float16 h = (_Float16)f; unsigned short u; memcpy(&u, &h, 2); return u; }
static float from_half(unsigned short u) { _Float16 h; memcpy(&h, &u, 2); return (float)h; }
int main(int argc, char **argv) {
  Lab lab;
  int a = lab_open(argc, argv, "-DTL_MMA", &lab);
  cl_int err;
  const int M = atoi(argv[a]), N = atoi(argv[a + 1]), K = atoi(argv[a + 2]); a += 3;
  const int runs = getenv("LABRUNS") ? atoi(getenv("LABRUNS")) : 20;
  unsigned short *ha = malloc((size_t)M * K * 2), *hw = malloc((size_t)N * K * 2);
  srand(7);
  for (size_t i = 0; i < (size_t)M * K; ++i) ha[i] = to_half(2.0f * rand() / RAND_MAX - 1.0f);
  for (size_t i = 0; i < (size_t)N * K; ++i) hw[i] = to_half(0.05f * (2.0f * rand() / RAND_MAX - 1.0f));
  cl_mem A = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)M * K * 2, ha, &err); CK(err);
  cl_mem W = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N * K * 2, hw, &err); CK(err);
  cl_mem C = clCreateBuffer(lab.ctx, CL_MEM_READ_WRITE, (size_t)M * N * 4, 0, &err); CK(err);
  float *hc = malloc((size_t)M * N * 4), *hf = malloc((size_t)M * K * 4), *hn = malloc((size_t)K * 4);
  for (size_t i = 0; i < (size_t)M * K; ++i) hf[i] = from_half(ha[i]);
  for (int i = 0; i < K; ++i) hn[i] = 0.5f + (float)(rand() % 64) / 64;
  const int norm = !getenv("LABNW") || atoi(getenv("LABNW"));
  const float eps = 1e-5f;
  cl_mem AF = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)M * K * 4, hf, &err); CK(err);
  cl_mem NWB = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)K * 4, hn, &err); CK(err);
  cl_mem NONE = 0;
  for (; a < argc; ++a) {
    char name[128]; int bm, bn, wg;
    if (sscanf(argv[a], "%127[^:]:%d:%d:%d", name, &bm, &bn, &wg) != 4) { printf("bad kernel spec %s\n", argv[a]); return 2; }
    cl_kernel k = clCreateKernel(lab.p, name, &err); CK(err);
    const int fa = !strncmp(name, "gfa", 3);
    CK(clSetKernelArg(k, 0, sizeof A, fa ? &AF : &A));
    if (fa) { CK(clSetKernelArg(k, 6, sizeof NWB, norm ? &NWB : &NONE)); CK(clSetKernelArg(k, 7, 4, &eps)); } CK(clSetKernelArg(k, 1, sizeof W, &W)); CK(clSetKernelArg(k, 2, sizeof C, &C));
    CK(clSetKernelArg(k, 3, 4, &M)); CK(clSetKernelArg(k, 4, 4, &N)); CK(clSetKernelArg(k, 5, 4, &K));
    size_t gs[2] = {(size_t)(N + bn - 1) / bn * wg, (size_t)(M + bm - 1) / bm}, ls[2] = {(size_t)wg, 1};
    CK(clEnqueueFillBuffer(lab.q, C, (float[]){NAN}, 4, 0, (size_t)M * N * 4, 0, 0, 0));
    const double med = lab_median_us(&lab, k, 2, gs, ls, runs);
    CK(clEnqueueReadBuffer(lab.q, C, CL_TRUE, 0, (size_t)M * N * 4, hc, 0, 0, 0));
    double worst = 0, big = 0;
    for (int s = 0; s < 4096; ++s) {
      const int m = (int)((long)s * 7919 % M), n = (int)((long)s * 104729 % N);
      double ref = 0, ss = 0;
      for (int kk = 0; kk < K; ++kk) {
        const double x = from_half(ha[(size_t)m * K + kk]);
        ref += x * (fa && norm ? hn[kk] : 1.0) * from_half(hw[(size_t)n * K + kk]);
        ss += x * x;
      }
      if (fa && norm) ref /= sqrt(ss / K + eps);
      const double d = fabs(hc[(size_t)m * N + n] - ref);
      if (!(d <= worst)) worst = d;
      if (fabs(ref) > big) big = fabs(ref);
    }
    printf("%-28s M %5d N %5d K %5d  %8.1f us  %6.1f TFLOP/s  max err %.2e of %.2e%s\n", name, M, N, K, med,
           2.0 * M * N * K / med / 1e6, worst, big, worst <= 1e-3 * big + 1e-4 ? "" : "  WRONG");
    clReleaseKernel(k);
  }
  return 0;
}
