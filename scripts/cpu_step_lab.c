// What this CPU can do for a decode step's GEMVs outside OpenCL (issue 28): bytellama's 16
// (4 layers of q/k/v 256 x 512, attention output 256 x 256, gate/up 256 x 1376, down
// 688 x 256, K rounded up to 64), distinct random 4-bit codes in qgemv_cpu_i8's layout (a
// column's codes contiguous, 8 columns a pass, 64 k a step: the low and high nibbles times
// int8 x by pmaddubsw, pairs by pmaddwd, a float step a block), each column's codes asked
// for 256 bytes ahead. No scales, norm or store: the loop the kernel's time is measured
// against. µs a step (2,000 steps, 3 rounds).
//   gcc -O2 -mavx2 -mfma scripts/cpu_step_lab.c -o /tmp/cpu_step_lab && /tmp/cpu_step_lab
// Two threads, the columns shared out by OpenMP, one parallel region a GEMV as a kernel a
// launch: waits that spin (llama.cpp's thread pool does) against waits that sleep (as
// PoCL's workers do between kernels):
//   gcc -O2 -mavx2 -mfma -fopenmp scripts/cpu_step_lab.c -o /tmp/cpu_step_lab
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active /tmp/cpu_step_lab; OMP_WAIT_POLICY=passive ...
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void gemv(const uint8_t* W, const int8_t* xq, const float* d, int K, int N, float* y) {
  const __m256i m = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);
#pragma omp parallel for
  for (int c0 = 0; c0 < N; c0 += 8) {
    __m256 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
    for (int k = 0; k < K; k += 64) {
      const __m256i xe = _mm256_loadu_si256((const __m256i*)(xq + k)), xo = _mm256_loadu_si256((const __m256i*)(xq + k + 32));
      const __m256 dd = _mm256_loadu_ps(d + k / 64 * 8);
      for (int j = 0; j < 8; ++j) {
        const uint8_t* p = W + (size_t)(c0 + j) * (K / 2) + k / 2;
        _mm_prefetch((const char*)p + 256, _MM_HINT_T0);
        const __m256i w = _mm256_loadu_si256((const __m256i*)p);
        const __m256i lo = _mm256_and_si256(w, m), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m);
        const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s, one)), dd, acc[j]);
      }
    }
    for (int j = 0; j < 8; ++j) {
      float t[8];
      _mm256_storeu_ps(t, acc[j]);
      y[c0 + j] = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    }
  }
}

int main(void) {
  const int shapes[4][2] = {{256, 512}, {256, 256}, {256, 1376}, {704, 256}}, layers = 4;
  size_t bytes = 0;
  long macs = 0;
  for (int s = 0; s < 4; ++s) bytes += (size_t)shapes[s][0] / 2 * shapes[s][1], macs += (long)shapes[s][0] * shapes[s][1];
  bytes *= layers, macs *= layers;
  uint8_t* W = aligned_alloc(64, bytes + 4096);
  for (size_t i = 0; i < bytes + 4096; ++i) W[i] = (uint8_t)rand();
  static int8_t xq[1024];
  static float d[1024], y[2048];
  for (int i = 0; i < 1024; ++i) xq[i] = (int8_t)(rand() % 100 - 50), d[i] = 0.01f;
  for (int round = 0; round < 3; ++round) {
    const int steps = 2000;
    const double t0 = now();
    for (int r = 0; r < steps; ++r) {
      size_t at = 0;
      for (int l = 0; l < layers; ++l)
        for (int s = 0; s < 4; ++s) {
          gemv(W + at, xq, d, shapes[s][0], shapes[s][1], y);
          at += (size_t)shapes[s][0] / 2 * shapes[s][1];
        }
    }
    const double dt = (now() - t0) / steps;
    printf("a step's 16 GEMVs: %.1f us, %.1f GMAC/s, %.2f MB of codes at %.1f GB/s\n", dt * 1e6, macs / dt * 1e-9,
           bytes / 1e6, bytes / dt * 1e-9);
  }
  return 0;
}
