// Batched matrix product with broadcast batch dims and arbitrary element strides
// (so Gemm's transposes need no copy): C[b][m][n] = sum_k A[b][m][k] * B[b][k][n].
// 16x16 tiles through local memory.
#define TILE 16

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void matmul_f32(__global const float* A, __global const float* B, __global float* C, int M, int N, int K,
                int a_rs, int a_cs, int b_rs, int b_cs, int8 bdims, int8 bsa, int8 bsb) {
  __local float As[TILE][TILE];
  __local float Bs[TILE][TILE];
  const int n = get_global_id(0), m = get_global_id(1), b = get_global_id(2);
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int aoff = strided_offset(b, bdims, bsa), boff = strided_offset(b, bdims, bsb);
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ka = k0 + tn, kb = k0 + tm;
    As[tm][tn] = (m < M && ka < K) ? A[aoff + m * a_rs + ka * a_cs] : 0.0f;
    Bs[tm][tn] = (n < N && kb < K) ? B[boff + kb * b_rs + n * b_cs] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; ++k) acc += As[tm][k] * Bs[k][tn];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (m < M && n < N) C[(long)b * M * N + m * N + n] = acc;
}
