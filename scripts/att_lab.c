// Times the decode attention kernels of kernels/attention.cl (their arguments: q, k, v,
// mask, out, part, ATT_ARGS, splits, chunk, ATT_FRESH_ARGS) at one shape: H query heads over
// Hkv kv heads of D dims, one new row after T - 1 cached keys, fp16 caches of 4096 rows
// ([B, Hkv, T, D]) in 8 copies taken in turn, as a step's layers read theirs. KIND dec: a
// work-group of 64 per query row and split; gqa: 256 per kv head and split; the splits as
// lowering's keySplit (SPLITS=n: about n), then attention_combine_f32 where there are
// several (NOCOMBINE=1: not; KIND gqam: the gqa kernel's last work-group of a kv head merges
// them instead). FRESH=1: the step's RoPE inside (xq, xk, xv), the new key
// written into the cache; outputs then checked against the first kernel's, else against
// the host. The lab behind docs/tl-bench.md's "decode attention, a lab" (issue 28).
//   gcc -O2 att_lab.c -lOpenCL -lm, then
//   ./a.out kernels/common.cl kernels/mma.cl kernels/attention.cl -- H Hkv D T FRESH NAME:KIND ...
// Build options from LABOPTS (default: NVIDIA's with fp16 caches); LABPTX: scripts/cl_lab.h.
#include "cl_lab.h"
int main(int argc, char **argv) {
  Lab lab;
  int a = lab_open(argc, argv, "-cl-std=CL1.2 -DTL_MMA -DTL_LOCAL_MEM=49152 -DTL_MAX_WG=1024 -DTL_KV_HALF", &lab);
  cl_int err; cl_context ctx = lab.ctx; cl_command_queue q = lab.q; cl_program p = lab.p;
  cl_uint cus; clGetDeviceInfo(lab.dev, CL_DEVICE_MAX_COMPUTE_UNITS, 4, &cus, 0);
  int H = atoi(argv[a]), Hkv = atoi(argv[a + 1]), D = atoi(argv[a + 2]), T = atoi(argv[a + 3]), fresh = atoi(argv[a + 4]); a += 5;
  const int B = 1, S = 1, Tmax = 4096, rows = B * H * S, Dv = D;
  const int R = 8;  // cache copies, taken in turn (a step's layers)
  size_t kvn = (size_t)B * Hkv * Tmax * D;
  unsigned short *hk = malloc(kvn * 2), *hv = malloc(kvn * 2);
  float *hq = malloc(rows * D * 4), *hx = malloc((size_t)(H + 2 * Hkv) * D * 4), invf[256];
  srand(5);
  for (size_t i = 0; i < kvn; ++i) { hk[i] = f2h(2.0f * rand() / RAND_MAX - 1.0f); hv[i] = f2h(2.0f * rand() / RAND_MAX - 1.0f); }
  for (int i = 0; i < rows * D; ++i) hq[i] = 2.0f * rand() / RAND_MAX - 1.0f;
  for (int i = 0; i < (H + 2 * Hkv) * D; ++i) hx[i] = 2.0f * rand() / RAND_MAX - 1.0f;
  for (int i = 0; i < D / 2; ++i) invf[i] = powf(10000.0f, -2.0f * i / D);
  const float scale = 1.0f / sqrtf((float)D);
  double *ref = calloc(rows * Dv, 8);
  for (int h = 0; h < H; ++h) {  // without FRESH: q and the cache's T keys
    int g = h / (H / Hkv); double *sc = malloc(T * 8), mx = -1e300, sum = 0;
    for (int t = 0; t < T; ++t) { double d = 0; for (int e = 0; e < D; ++e) d += hq[h * D + e] * h2f(hk[((size_t)g * Tmax + t) * D + e]); sc[t] = d * scale; if (sc[t] > mx) mx = sc[t]; }
    for (int t = 0; t < T; ++t) { sc[t] = exp(sc[t] - mx); sum += sc[t]; }
    for (int e = 0; e < Dv; ++e) { double o = 0; for (int t = 0; t < T; ++t) o += sc[t] * h2f(hv[((size_t)g * Tmax + t) * D + e]); ref[h * Dv + e] = o / sum; }
    free(sc);
  }
  cl_mem K[R], V[R];
  for (int r = 0; r < R; ++r) {
    K[r] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, kvn * 2, hk, &err); CK(err);
    V[r] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, kvn * 2, hv, &err); CK(err);
  }
  cl_mem Q = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, rows * D * 4, hq, &err); CK(err);
  cl_mem X = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (H + 2 * Hkv) * D * 4, hx, &err); CK(err);
  cl_buffer_region rq = {0, (size_t)H * D * 4}, rk = {(size_t)H * D * 4, (size_t)Hkv * D * 4}, rv = {(size_t)(H + Hkv) * D * 4, (size_t)Hkv * D * 4};
  cl_mem XQ = clCreateSubBuffer(X, 0, CL_BUFFER_CREATE_TYPE_REGION, &rq, &err); CK(err);
  cl_mem XK = clCreateSubBuffer(X, 0, CL_BUFFER_CREATE_TYPE_REGION, &rk, &err); CK(err);
  cl_mem XV = clCreateSubBuffer(X, 0, CL_BUFFER_CREATE_TYPE_REGION, &rv, &err); CK(err);
  long posv = T - 1; cl_mem POS = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 8, &posv, &err); CK(err);
  cl_mem INV = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, D / 2 * 4, invf, &err); CK(err);
  cl_mem OUT = clCreateBuffer(ctx, CL_MEM_READ_WRITE, rows * Dv * 4, 0, &err); CK(err);
  cl_mem PART = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)rows * 1024 * (Dv + 2) * 4, 0, &err); CK(err);
  cl_kernel comb = clCreateKernel(p, "attention_combine_f32", &err); CK(err);
  int zeros[1024] = {0};  // gqam's counts, one per kv head (the kernel sets them back to 0)
  cl_mem DONE = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zeros, zeros, &err); CK(err);
  float *first = 0;
  printf("H %d Hkv %d D %d T %d fresh %d (%u compute units)\n", H, Hkv, D, T, fresh, cus);
  for (; a < argc; ++a) {
    char name[128], kind[16] = "dec"; sscanf(argv[a], "%127[^:]:%15s", name, kind);
    cl_kernel k = clCreateKernel(p, name, &err); if (err) { printf("%s: no kernel (%d)\n", name, err); continue; }
    const int merge = !strcmp(kind, "gqam"), gqa = merge || !strcmp(kind, "gqa"), groups = gqa ? B * Hkv : rows, gs = gqa ? 256 : 64;
    int most = 1024 / groups; if (most < 1) most = 1;
    int splits = gqa ? (T + 31) / 32 : T / 64; if (splits < 1) splits = 1; if (splits > most) splits = most;
    int chunk = (T + splits - 1) / splits;
    if (gqa) { chunk = (chunk + 31) / 32 * 32; splits = (T + chunk - 1) / chunk; }
    if (getenv("SPLITS")) { splits = atoi(getenv("SPLITS")); chunk = (T + splits - 1) / splits; if (gqa) { chunk = (chunk + 31) / 32 * 32; splits = (T + chunk - 1) / chunk; } }
    int ai = 0; cl_mem nul = 0; int zero = 0, has_mask = 0, causal = 1, rot = D, xbshd = 0; float softcap = 0.0f, mval = -INFINITY, cs = 1.0f, ss = 1.0f;
    int qsb = H * S * D, qsh = S * D, qss = D, ksb = Hkv * Tmax * D, ksh = Tmax * D, kst = D, osb = H * S * Dv, osh = S * Dv, oss = Dv;
    int pbs = 1, pss = 1;
#define ARG(x) CK(clSetKernelArg(k, ai++, sizeof(x), &(x)))
    ARG(Q); ARG(K[0]); ARG(V[0]); ARG(nul); ARG(OUT); ARG(PART);
    ARG(rows); ARG(H); ARG(Hkv); ARG(S); ARG(T); ARG(D); ARG(Dv); ARG(scale); ARG(softcap); ARG(has_mask);
    ARG(qsb); ARG(qsh); ARG(qss); ARG(ksb); ARG(ksh); ARG(kst); ARG(ksb); ARG(ksh); ARG(kst);
    ARG(zero); ARG(zero); ARG(zero); ARG(zero); ARG(osb); ARG(osh); ARG(oss); ARG(zero); ARG(causal); ARG(mval);
    ARG(nul); ARG(zero); ARG(zero); ARG(nul); ARG(splits); ARG(chunk);
    if (fresh) { ARG(XQ); ARG(XK); ARG(XV); ARG(K[0]); ARG(V[0]); ARG(POS); } else { ARG(nul); ARG(nul); ARG(nul); ARG(nul); ARG(nul); ARG(nul); }
    ARG(pbs); ARG(pss); ARG(INV); ARG(rot); ARG(cs); ARG(ss); ARG(xbshd);
    if (merge) ARG(DONE); else if (gqa) ARG(nul);
    int ci = 0;
    CK(clSetKernelArg(comb, ci++, sizeof PART, &PART)); CK(clSetKernelArg(comb, ci++, sizeof OUT, &OUT));
    CK(clSetKernelArg(comb, ci++, 4, &H)); CK(clSetKernelArg(comb, ci++, 4, &S)); CK(clSetKernelArg(comb, ci++, 4, &Dv)); CK(clSetKernelArg(comb, ci++, 4, &splits));
    CK(clSetKernelArg(comb, ci++, 4, &osb)); CK(clSetKernelArg(comb, ci++, 4, &osh)); CK(clSetKernelArg(comb, ci++, 4, &oss)); CK(clSetKernelArg(comb, ci++, 4, &zero));
    size_t gl[2] = {(size_t)groups * gs, (size_t)splits}, lo[2] = {(size_t)gs, 1}, cg = (size_t)rows * 64, cl = 64;
    const int combine = splits > 1 && !merge && !getenv("NOCOMBINE");
    float *hc = malloc(rows * Dv * 4);
    CK(clEnqueueNDRangeKernel(q, k, 2, 0, gl, lo, 0, 0, 0));
    if (combine) CK(clEnqueueNDRangeKernel(q, comb, 1, 0, &cg, &cl, 0, 0, 0));
    CK(clEnqueueReadBuffer(q, OUT, CL_TRUE, 0, rows * Dv * 4, hc, 0, 0, 0));
    double maxe = 0;
    if (!fresh) for (int i = 0; i < rows * Dv; ++i) { double e = fabs(hc[i] - ref[i]); if (e > maxe) maxe = e; }
    else if (first) for (int i = 0; i < rows * Dv; ++i) { double e = fabs(hc[i] - first[i]); if (e > maxe) maxe = e; }
    const int is_first = fresh && !first;
    if (is_first) { first = hc; hc = malloc(rows * Dv * 4); }
    enum { REPS = 200 }; double ev[REPS], evc[REPS], evs[REPS];
    for (int r = 0; r < REPS; ++r) {
      CK(clSetKernelArg(k, 1, sizeof(cl_mem), &K[r % R])); CK(clSetKernelArg(k, 2, sizeof(cl_mem), &V[r % R]));
      if (fresh) { CK(clSetKernelArg(k, 44, sizeof(cl_mem), &K[r % R])); CK(clSetKernelArg(k, 45, sizeof(cl_mem), &V[r % R])); }
      cl_event e, e2 = 0; CK(clEnqueueNDRangeKernel(q, k, 2, 0, gl, lo, 0, 0, &e));
      if (combine) CK(clEnqueueNDRangeKernel(q, comb, 1, 0, &cg, &cl, 0, 0, &e2));
      CK(clFinish(q));
      ev[r] = lab_us(e); evc[r] = 0; evs[r] = ev[r];
      if (e2) {  // first start to last end
        cl_ulong t0, t3;
        clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, 8, &t0, 0); clGetEventProfilingInfo(e2, CL_PROFILING_COMMAND_END, 8, &t3, 0);
        evc[r] = lab_us(e2); evs[r] = (t3 - t0) / 1e3; clReleaseEvent(e2);
      }
      clReleaseEvent(e);
    }
    qsort(ev + 20, REPS - 20, 8, cmp); qsort(evc + 20, REPS - 20, 8, cmp); qsort(evs + 20, REPS - 20, 8, cmp);
    const int m = 20 + (REPS - 20) / 2;
    printf("  %-26s %s groups %4d x %4d  kernel %7.2f us  combine %6.2f  start-to-end %7.2f  maxerr %.2e%s\n", name, kind, groups, splits, ev[m], evc[m], evs[m], maxe,
           fresh && !is_first ? " (against the first kernel)" : "");
    free(hc); clReleaseKernel(k);
  }
  return 0;
}
