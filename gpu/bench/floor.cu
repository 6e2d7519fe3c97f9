// The CUDA C++ floor: one thread ping-pongs a flag with a host thread through mapped pinned
// memory, the CUDA idiom (volatile accesses, __threadfence_system after the store).
// Built on the GPU machine with `nvcc -ptx -arch=sm_90 -O3 floor.cu -o floor.ptx` and launched by
// ferry-gpu-bench with the same arguments and host echo thread as the Rust kernel `pingpong`.

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void pingpong(volatile unsigned *ping, volatile unsigned *pong,
                                    unsigned iters, unsigned long long *stamps) {
    stamps[0] = globaltimer();
    for (unsigned i = 1; i <= iters; ++i) {
        *ping = i;
        __threadfence_system();
        while (*pong != i) {
        }
        if (i % 100 == 0) stamps[i / 100] = globaltimer();
    }
}
