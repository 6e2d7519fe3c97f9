// The CUDA C++ side of the print benchmark: the same lines as device/examples/printbench.rs
// (`line <i>` for every i < N, thread t of T printing i = t, t + T, ...) through CUDA's device
// printf, from the same grid. Built on the GPU machine with
//   nvcc -O3 -arch=sm_90 printbench.cu -o printbench
// and run as `printbench N BLOCKS THREADS [FIFO_BYTES]` with standard output sent to a file.
// FIFO_BYTES sets cudaLimitPrintfFifoSize (default: the driver's, 8.25 MiB on the H200);
// records that do not fit the FIFO are dropped by CUDA, which is what the benchmark counts. Prints on standard error the time
// from launch to the end of cudaDeviceSynchronize (which writes the FIFO out).
#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void printbench(unsigned n) {
    unsigned threads = gridDim.x * blockDim.x;
    unsigned me = blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned i = me; i < n; i += threads) printf("line %u\n", i);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: printbench N BLOCKS THREADS [FIFO_BYTES]\n");
        return 2;
    }
    unsigned n = strtoul(argv[1], 0, 10), blocks = strtoul(argv[2], 0, 10),
             threads = strtoul(argv[3], 0, 10);
    if (cudaFree(0) != cudaSuccess) return fprintf(stderr, "no CUDA device\n"), 3;
    size_t fifo = 0;
    if (argc > 4 && cudaDeviceSetLimit(cudaLimitPrintfFifoSize, strtoull(argv[4], 0, 10)) != cudaSuccess)
        return fprintf(stderr, "cudaDeviceSetLimit failed\n"), 3;
    cudaDeviceGetLimit(&fifo, cudaLimitPrintfFifoSize);
    auto start = std::chrono::steady_clock::now();
    printbench<<<blocks, threads>>>(n);
    cudaError_t e = cudaDeviceSynchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fflush(stdout);
    fprintf(stderr, "printbench: %u lines asked, %u x %u threads, printf FIFO %zu bytes, kernel + sync %.3f s, %s\n",
            n, blocks, threads, fifo, s, cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
