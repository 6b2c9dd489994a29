// A decode step's GEMVs under a CPU OpenCL (issue 28): bytellama's 16 (4 layers of 256 x
// 512, 256 x 256, 256 x 1376, 704 x 256; kernels in scripts/cpu_step_lab.cl, the loop of
// qgemv_cpu_i8 without scales or epilogue), timed as a step is: wall µs from the first
// enqueue to clFinish, median of 300 steps. Forms: a launch a GEMV of TASKS work-groups
// (the library had 2 a compute unit), the same with one, and the 16 as one launch of one
// task (phases in order: what a step lowered into one kernel would pay). Beside
// scripts/cpu_step_lab.c, the same loop in C.
//   gcc -O2 scripts/cpu_step_cl_lab.c -lOpenCL -lm -o /tmp/cpu_step_cl_lab
//   /tmp/cpu_step_cl_lab scripts/cpu_gemv_lab.cl scripts/cpu_step_lab.cl -- [TASKS]
#include <time.h>

#include "cl_lab.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  Lab lab;
  const int a = lab_open(argc, argv, "-cl-std=CL1.2 -DNC=8", &lab);
  const int tasks = a < argc ? atoi(argv[a]) : 4;
  const int shapes[4][2] = {{256, 512}, {256, 256}, {256, 1376}, {704, 256}};
  long table[48];
  size_t bytes = 0;
  for (int g = 0; g < 16; ++g) {
    const int K = shapes[g % 4][0], N = shapes[g % 4][1];
    table[3 * g] = (long)bytes, table[3 * g + 1] = K, table[3 * g + 2] = N;
    bytes += (size_t)K / 2 * N;
  }
  unsigned char *W = malloc(bytes);
  for (size_t i = 0; i < bytes; ++i) W[i] = (unsigned char)rand();
  float x[1024];
  for (int i = 0; i < 1024; ++i) x[i] = (rand() % 2001 - 1000) / 1000.0f;
  cl_int err;
  cl_mem bW = clCreateBuffer(lab.ctx, CL_MEM_COPY_HOST_PTR, bytes, W, &err); CK(err);
  cl_mem bx = clCreateBuffer(lab.ctx, CL_MEM_COPY_HOST_PTR, sizeof x, x, &err); CK(err);
  cl_mem by = clCreateBuffer(lab.ctx, 0, 4096 * sizeof(float), 0, &err); CK(err);
  cl_mem bt = clCreateBuffer(lab.ctx, CL_MEM_COPY_HOST_PTR, sizeof table, table, &err); CK(err);
  cl_mem bq = clCreateBuffer(lab.ctx, 0, 8192 * 64, 0, &err); CK(err);  // up to 64 tasks' scratch
  cl_mem bd = clCreateBuffer(lab.ctx, 0, 128 * 32 * 64, 0, &err); CK(err);
  cl_mem bs = clCreateBuffer(lab.ctx, 0, 64 * 4 * 64, 0, &err); CK(err);
  cl_kernel kg = clCreateKernel(lab.p, "step_gemv", &err); CK(err);
  cl_kernel ks = clCreateKernel(lab.p, "step_all", &err); CK(err);
  cl_mem sub[16];
  for (int g = 0; g < 16; ++g) {
    cl_buffer_region r = {(size_t)table[3 * g], (size_t)table[3 * g + 1] / 2 * table[3 * g + 2]};
    sub[g] = clCreateSubBuffer(bW, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err); CK(err);
  }
  const int n = 16;
  CK(clSetKernelArg(ks, 0, sizeof bW, &bW)); CK(clSetKernelArg(ks, 1, sizeof bx, &bx));
  CK(clSetKernelArg(ks, 2, sizeof by, &by)); CK(clSetKernelArg(ks, 3, sizeof bt, &bt)); CK(clSetKernelArg(ks, 4, 4, &n));
  CK(clSetKernelArg(kg, 1, sizeof bx, &bx)); CK(clSetKernelArg(kg, 2, sizeof by, &by));
  const cl_mem scratch[3] = {bq, bd, bs};
  for (int i = 0; i < 3; ++i) {
    CK(clSetKernelArg(ks, 5 + i, sizeof(cl_mem), &scratch[i]));
    CK(clSetKernelArg(kg, 5 + i, sizeof(cl_mem), &scratch[i]));
  }
  if (tasks < 1 || tasks > 64) { printf("TASKS: 1 to 64\n"); return 2; }
  const int forms[3] = {tasks, 1, 0};
  const char *names[3] = {"a launch a GEMV, TASKS tasks", "a launch a GEMV, 1 task", "one launch, 1 task"};
  for (int round = 0; round < 3; ++round)
    for (int f = 0; f < 3; ++f) {
      double us[300];
      for (int r = -5; r < 300; ++r) {
        const double t0 = now();
        if (forms[f]) {
          for (int g = 0; g < 16; ++g) {
            const int K = (int)table[3 * g + 1], N = (int)table[3 * g + 2];
            const size_t gs = (size_t)forms[f], one = 1;
            CK(clSetKernelArg(kg, 0, sizeof sub[g], &sub[g])); CK(clSetKernelArg(kg, 3, 4, &K)); CK(clSetKernelArg(kg, 4, 4, &N));
            CK(clEnqueueNDRangeKernel(lab.q, kg, 1, 0, &gs, &one, 0, 0, 0));
          }
        } else {
          const size_t one = 1;
          CK(clEnqueueNDRangeKernel(lab.q, ks, 1, 0, &one, &one, 0, 0, 0));
        }
        CK(clFinish(lab.q));
        if (r >= 0) us[r] = (now() - t0) * 1e6;
      }
      qsort(us, 300, sizeof(double), cmp);
      printf("%-32s (TASKS %d): %.1f us a step (quartiles %.1f, %.1f)\n", names[f], tasks, us[150], us[75], us[225]);
    }
  return 0;
}
