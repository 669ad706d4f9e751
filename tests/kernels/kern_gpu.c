/* tests/kernels/kern_gpu.c: see kern_gpu.h. */
#include "kern_gpu.h"

void kg_require_gpu(const char *test) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    printf("%s: no usable GPU (%s): skipped\n", test,
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    exit(77);
  }
  struct cudaDeviceProp p;
  KG_CUDA(cudaGetDeviceProperties(&p, 0));
  printf("%s on %s (sm_%d%d)\n", test, p.name, p.major, p.minor);
}

void kg_fail(const char *what, const char *file, int line) {
  fprintf(stderr, "%s:%d: %s failed\n", file, line, what);
  exit(1);
}

kern_bf16 *kg_bf16(const float *host, long n) {
  kern_bf16 *h = malloc(sizeof(kern_bf16) * (n > 0 ? n : 1)), *d;
  for (long i = 0; i < n; i++) h[i] = kern_float_to_bf16(host ? host[i] : 0.0f);
  KG_CUDA(cudaMalloc((void **)&d, sizeof(kern_bf16) * (n > 0 ? n : 1)));
  KG_CUDA(cudaMemcpy(d, h, sizeof(kern_bf16) * n, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

float *kg_f32(const float *host, long n) {
  float *d;
  KG_CUDA(cudaMalloc((void **)&d, sizeof(float) * (n > 0 ? n : 1)));
  if (host)
    KG_CUDA(cudaMemcpy(d, host, sizeof(float) * n, cudaMemcpyHostToDevice));
  else
    KG_CUDA(cudaMemset(d, 0, sizeof(float) * n));
  return d;
}

int *kg_i32(const int *host, long n) {
  int *d;
  KG_CUDA(cudaMalloc((void **)&d, sizeof(int) * (n > 0 ? n : 1)));
  KG_CUDA(cudaMemcpy(d, host, sizeof(int) * n, cudaMemcpyHostToDevice));
  return d;
}

void kg_get_bf16(float *host, const kern_bf16 *dev, long n) {
  kern_bf16 *h = malloc(sizeof(kern_bf16) * (n > 0 ? n : 1));
  KG_CUDA(cudaDeviceSynchronize());
  KG_CUDA(cudaMemcpy(h, dev, sizeof(kern_bf16) * n, cudaMemcpyDeviceToHost));
  for (long i = 0; i < n; i++) host[i] = kern_bf16_to_float(h[i]);
  free(h);
}

void kg_get_f32(float *host, const float *dev, long n) {
  KG_CUDA(cudaDeviceSynchronize());
  KG_CUDA(cudaMemcpy(host, dev, sizeof(float) * n, cudaMemcpyDeviceToHost));
}
