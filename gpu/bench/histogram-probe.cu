// The histogram program's own work with no RPC at all (examples/histogram's shape): every thread
// reads its slice of 256 MiB in chunks of up to 4 KiB into a buffer on its stack, byte by byte
// (from pinned host memory mapped into the GPU, or from device memory), counts into a local
// 256-entry array and adds it to 256 grid-wide atomics; at the four launch sizes the histogram
// runs at, best of 3. "copy" keeps only the copy (its count reduced to one byte a chunk).
//   nvcc -O3 -arch=sm_90 gpu/bench/histogram-probe.cu -o /tmp/probe && /tmp/probe
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cuda_runtime.h>
__device__ unsigned long long COUNTS[256];
template <bool COUNT>
__global__ void histo(const uint8_t* __restrict__ in, uint64_t size, uint32_t chunk) {
  uint64_t me = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  uint64_t threads = (uint64_t)gridDim.x * blockDim.x;
  uint64_t part = (size + threads - 1) / threads;
  uint64_t start = me * part < size ? me * part : size;
  uint64_t end = start + part < size ? start + part : size;
  uint8_t buf[4096];
  uint32_t counts[256];
  for (int i = 0; i < 256; i++) counts[i] = 0;
  for (uint64_t at = start; at < end;) {
    uint32_t want = (uint32_t)((end - at) < chunk ? (end - at) : chunk);
    // the "read_at": a copy into the stack buffer, byte by byte as a generic copy would
    for (uint32_t i = 0; i < want; i++) buf[i] = in[at + i];
    if (COUNT) for (uint32_t i = 0; i < want; i++) counts[buf[i]]++;
    else counts[buf[want - 1]]++;
    at += want;
  }
  for (int i = 0; i < 256; i++) if (counts[i]) atomicAdd(&COUNTS[i], (unsigned long long)counts[i]);
}
int main(int argc, char** argv) {
  uint64_t size = 256ull << 20;
  uint8_t *host, *dhost, *dev;
  cudaSetDeviceFlags(cudaDeviceMapHost);
  cudaHostAlloc(&host, size, cudaHostAllocMapped);
  for (uint64_t i = 0; i < size; i++) host[i] = (uint8_t)(i * 2654435761u >> 13);
  cudaHostGetDevicePointer(&dhost, host, 0);
  cudaMalloc(&dev, size);
  cudaMemcpy(dev, host, size, cudaMemcpyHostToDevice);
  int launches[][2] = {{1, 32}, {16, 256}, {132, 256}, {264, 1024}};
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (auto& l : launches) {
    for (int src = 0; src < 2; src++) for (int count = 0; count < 2; count++) {
      const uint8_t* p = src ? dev : dhost;
      float best = 1e9;
      for (int rep = 0; rep < 3; rep++) {
        cudaEventRecord(a);
        if (count) histo<true><<<l[0], l[1]>>>(p, size, 4096); else histo<false><<<l[0], l[1]>>>(p, size, 4096);
        cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
      }
      cudaError_t e = cudaGetLastError();
      printf("probe %4d x %4d  %-6s %-8s %8.2f ms  %6.2f GB/s %s\n", l[0], l[1], src ? "device" : "host", count ? "count" : "copy", best, size / best / 1e6, e ? cudaGetErrorString(e) : "");
    }
  }
}
