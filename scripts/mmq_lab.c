// Times 4-bit GEMM kernels on int8 tensor cores (scripts/mmq_lab.cl's convention) at one
// shape, against double sums: over A as given (what A's int8 rounding costs) and over A as
// the kernel takes it (the kernel's own error: int8 A times the codes, the offsets times
// A's exact group sums). Random A in [-1, 1], codes 0..15 with a
// scale and offset per group of G (e0m4's levels 2 + q / 8). LABBLOCK=32: A's int8 steps per
// 32 k (build with -DABLOCK32), else per group; LABOUTLIER=X: channel 7 of every row X.
// gcc -O2 mmq_lab.c -lOpenCL -lm, then
//   ./a.out kernels/mma.cl scripts/mmq_lab.cl -- M N K G NAME:BM:BN[:SPLITS] ...
// (SPLITS: K cut into that many, up to 8, each writing partial sums; the time is the
// kernel's alone, without the reduction.)
// LABOPTS (default -cl-std=CL1.2 -DTL_MMA), LABRUNS (default 20, median reported), LABLOG, LABPTX: scripts/cl_lab.h.
#include "cl_lab.h"
int main(int argc, char **argv) {
  Lab lab;
  int a = lab_open(argc, argv, "-cl-std=CL1.2 -DTL_MMA", &lab);
  cl_int err;
  const int M = atoi(argv[a]), N = atoi(argv[a + 1]), K = atoi(argv[a + 2]), G = atoi(argv[a + 3]); a += 4;
  if (K % 64 || G % 64 || M % 4) { printf("K and G must be multiples of 64, M of 4\n"); return 2; }
  const int runs = getenv("LABRUNS") ? atoi(getenv("LABRUNS")) : 20, groups = (K + G - 1) / G;
  const int AB = getenv("LABBLOCK") ? atoi(getenv("LABBLOCK")) : G, ablocks = K / AB;  // A's int8 blocks (32: build with -DABLOCK32)
  float *ha = malloc((size_t)M * K * 4), *hq = malloc((size_t)M * K * 4);  // A, A as taken
  unsigned char *aq = malloc((size_t)M * K), *w = malloc((size_t)N * K / 2);
  float *ad = malloc((size_t)M * ablocks * 4), *as = malloc((size_t)M * ablocks * 4);
  float *s = malloc((size_t)N * groups * 4), *o = malloc((size_t)N * groups * 4);
  srand(7);
  for (size_t i = 0; i < (size_t)M * K; ++i) ha[i] = 2.0f * rand() / RAND_MAX - 1.0f;
  if (getenv("LABOUTLIER"))  // an outlier channel, as real models' activations have
    for (int m = 0; m < M; ++m) ha[(size_t)m * K + 7] = (float)atof(getenv("LABOUTLIER"));
  for (size_t i = 0; i < (size_t)N * K / 2; ++i) w[i] = (unsigned char)(rand() & 255);
  for (size_t i = 0; i < (size_t)N * groups; ++i) s[i] = 0.002f + 0.01f * rand() / RAND_MAX, o[i] = -0.03f + 0.01f * rand() / RAND_MAX;
  for (int m = 0; m < M; ++m)
    for (int gi = 0; gi < ablocks; ++gi) {
      const int k0 = gi * AB, k1 = k0 + AB < K ? k0 + AB : K;
      float amax = 0, sum = 0;
      for (int k = k0; k < k1; ++k) amax = fmaxf(amax, fabsf(ha[(size_t)m * K + k])), sum += ha[(size_t)m * K + k];
      const float d = amax > 0 ? amax / 127 : 1;
      ad[(size_t)m * ablocks + gi] = d, as[(size_t)m * ablocks + gi] = sum;
      for (int k = k0; k < k1; ++k) {
        const int q = (int)rintf(ha[(size_t)m * K + k] / d);
        hq[(size_t)m * K + k] = q * d;
        aq[(size_t)m * K + (k & ~7) + (k & 7) / 2 + (k & 1) * 4] = (unsigned char)(signed char)q;
      }
    }
  {  // A's scales and sums [blocks][M]
    float *t = malloc((size_t)M * ablocks * 4);
    float *all[2] = {ad, as};
    for (int v = 0; v < 2; ++v) {
      for (int x = 0; x < M; ++x)
        for (int gi = 0; gi < ablocks; ++gi) t[(size_t)gi * M + x] = all[v][(size_t)x * ablocks + gi];
      memcpy(all[v], t, (size_t)M * ablocks * 4);
    }
    free(t);
  }
  cl_mem A = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)M * K, aq, &err); CK(err);
  cl_mem W = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N * K / 2, w, &err); CK(err);
  cl_mem AD = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)M * ablocks * 4, ad, &err); CK(err);
  cl_mem AS = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)M * ablocks * 4, as, &err); CK(err);
  cl_mem S = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N * groups * 4, s, &err); CK(err);
  cl_mem O = clCreateBuffer(lab.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N * groups * 4, o, &err); CK(err);
  cl_mem C = clCreateBuffer(lab.ctx, CL_MEM_READ_WRITE, (size_t)M * N * 4 * 8, 0, &err); CK(err);  // up to 8 splits
  float *hc = malloc((size_t)M * N * 4 * 8);
  for (; a < argc; ++a) {
    char name[128]; int bm, bn, splits = 1;
    if (sscanf(argv[a], "%127[^:]:%d:%d:%d", name, &bm, &bn, &splits) < 3) { printf("bad kernel spec %s\n", argv[a]); return 2; }
    cl_kernel k = clCreateKernel(lab.p, name, &err); CK(err);
    cl_mem args[3] = {A, W, C};
    for (int i = 0; i < 3; ++i) CK(clSetKernelArg(k, i, sizeof(cl_mem), &args[i]));
    CK(clSetKernelArg(k, 3, 4, &M)); CK(clSetKernelArg(k, 4, 4, &N)); CK(clSetKernelArg(k, 5, 4, &K));
    cl_mem more[4] = {AD, AS, S, O};
    for (int i = 0; i < 4; ++i) CK(clSetKernelArg(k, 6 + i, sizeof(cl_mem), &more[i]));
    CK(clSetKernelArg(k, 10, 4, &G));
    size_t gs[3] = {(size_t)(N + bn - 1) / bn * 256, (size_t)(M + bm - 1) / bm, (size_t)splits}, ls[3] = {256, 1, 1};
    CK(clEnqueueFillBuffer(lab.q, C, (float[]){NAN}, 4, 0, (size_t)M * N * 4 * splits, 0, 0, 0));
    const double med = lab_median_us(&lab, k, 3, gs, ls, runs);
    CK(clEnqueueReadBuffer(lab.q, C, CL_TRUE, 0, (size_t)M * N * 4 * splits, hc, 0, 0, 0));
    for (int z = 1; z < splits; ++z)  // the splits' partial sums (a reduce launch would add them)
      for (size_t i = 0; i < (size_t)M * N; ++i) hc[i] += hc[(size_t)z * M * N + i];
    double own = 0, total = 0, big = 0;
    for (int sm = 0; sm < 2048; ++sm) {
      const int m = (int)((long)sm * 7919 % M), n = (int)((long)sm * 104729 % N);
      double ref = 0, refq = 0;
      for (int kk = 0; kk < K; ++kk) {
        const int q = (w[((size_t)n * K + kk) / 2] >> ((kk & 1) * 4)) & 15;
        const size_t gi = (size_t)n * groups + kk / G;
        const double wv = (2.0 + q / 8.0) * s[gi] + o[gi];
        ref += (double)ha[(size_t)m * K + kk] * wv;
        refq += (double)hq[(size_t)m * K + kk] * q / 8.0 * s[gi] + (double)ha[(size_t)m * K + kk] * (2.0 * s[gi] + o[gi]);
      }
      const double got = hc[(size_t)m * N + n];
      if (!(fabs(got - refq) <= own)) own = fabs(got - refq);
      if (!(fabs(got - ref) <= total)) total = fabs(got - ref);
      if (fabs(ref) > big) big = fabs(ref);
    }
    if (splits > 1) snprintf(name + strlen(name), sizeof name - strlen(name), "/%d", splits);
    printf("%-14s M %5d N %5d K %5d G %4d  %8.1f us  %6.1f TOP/s  err %.1e (own %.1e) of %.2e%s\n", name, M, N, K, G,
           med, 2.0 * M * N * K / med / 1e6, total, own, big, own <= 1e-4 * big ? "" : "  WRONG");
    clReleaseKernel(k);
  }
  return 0;
}
