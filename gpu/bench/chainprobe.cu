// What a small call's exchange costs across PCIe, piece by piece: one warp (or its lane 0) and
// one host thread through mapped pinned memory, every request and reply word an "LL" word
// (data | sequence), the variants differing in what else the GPU stores, what the host reads
// first, the fence after the GPU's stores, the load and store forms, and how the GPU polls.
// Not part of the library: a measurement kept beside floor.cu to reproduce BENCHMARKS-history.md
// ("Stores and loads across the bus", stop 27).
//
// On the GPU machine: nvcc -O3 -arch=sm_90 -std=c++17 chainprobe.cu -o chainprobe
//                     ./chainprobe 50000 5          (round trips per run, runs per variant)
//
// Variants (`mode`): 1 flag ping-pong, one thread (the floor); 2 the warp's LL request and reply
// words alone; 3 + a head word the host polls first; 4 + a bell word before the head; 5 + two
// meta words and a served word (the word line's whole chain); 6 as 5, the host prefetching every
// line on the bell; 7 meta and head in one line; 8 lane 0 alone, LL words only; 9 lane 0 alone,
// the whole chain; 10 lane 0 alone, meta and head in one line. `extra` bits: 1 a device-memory
// store before the request, 2 a dependent device-memory load before it, 4 a local-memory round
// trip, 16 a second request and reply word a lane in a second line, 32 / 64 four polls in flight
// 500 / 200 cycles apart (lane 0), 128 a second word in the same line (two loads), 256 the same
// with one 16-byte vector load and store. Stores and loads: relaxed.sys with the .global space,
// volatile, or relaxed.sys generic; after the stores: no fence, fence.sc.sys, fence.acq_rel.sys or
// fence.acq_rel.gpu. "lane 0 send ns" is the mean time of the GPU's request stores (and fence).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>
#include <thread>
#include <atomic>
#include <vector>
#include <algorithm>
#include <chrono>
#include <immintrin.h>
#include <cstring>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
typedef unsigned long long u64;
struct alignas(128) Line { u64 w[16]; };

struct Region {
  Line flag;         // floor: request flag
  Line flag2;        // floor: reply flag
  Line bell;         // w[0]: bell (port | seq)
  Line heads;        // w[0]: head (opcode | seq)
  Line meta;         // w[0]: mask | seq, w[1]: lengths | seq  (merged modes: w[2] = opcode | seq)
  Line req[2];       // 32 request words
  Line rep_meta;     // w[0]: served | seq
  Line rep[2];       // 32 reply words
  Line req2[2];      // second request word per lane (extra & 16)
  Line rep2[2];      // second reply word per lane (extra & 16)
};

__device__ __forceinline__ void st_(u64* p, u64 v) { asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory"); }
__device__ __forceinline__ void st2(u64* p, u64 a, u64 b) { asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1,%2};" :: "l"(p), "l"(a), "l"(b) : "memory"); }
__device__ __forceinline__ u64 ld_(const u64* p) { u64 v; asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v; }

__device__ __forceinline__ void stg_(u64* p, u64 v) { asm volatile("st.relaxed.sys.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory"); }
__device__ __forceinline__ u64 ldg_(const u64* p) { u64 v; asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ void stm_(int m, u64* p, u64 v) { if (m == 1) *(volatile u64*)p = v; else if (m == 2) stg_(p, v); else st_(p, v); }
__device__ __forceinline__ u64 ldm_(int m, const u64* p) { if (m == 1) return *(const volatile u64*)p; if (m == 2) return ldg_(p); return ld_(p); }
#define st(p, v) stm_(stm, p, v)
#define ld(p) ldm_(ldm, p)
#define fence_after() fence_(fm)
__device__ __forceinline__ void fence_(int g_fence) {
  if (g_fence == 1) asm volatile("fence.sc.sys;" ::: "memory");
  else if (g_fence == 2) asm volatile("fence.acq_rel.sys;" ::: "memory");
  else if (g_fence == 3) asm volatile("fence.acq_rel.gpu;" ::: "memory");
}
__device__ __forceinline__ u64 gt() { u64 v; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v)); return v; }
__global__ void kern(Region* r, int mode, int iters, int* bad, u64* send_ns, int stm, int fm, int ldm, int extra, unsigned* dev) {
  volatile unsigned loc[8];
  u64 send = 0;
  const int lane = threadIdx.x;
  const bool alone = mode >= 8;
  if (alone && lane) return;
  const long long limit = 2000000000LL;
  for (unsigned i = 1; i <= (unsigned)iters; i++) {
    u64 s = (u64)i << 32;
    if (mode == 1) {
      if (lane) return;
      st(&r->flag.w[0], i);
      fence_after();
      long long t = clock64();
      while (ld(&r->flag2.w[0]) != i) if (clock64() - t > limit) { atomicAdd(bad, 1); return; }
      continue;
    }
    u64 g0 = gt();
    if (extra & 2) { unsigned v; asm volatile("ld.relaxed.gpu.u32 %0, [%1];" : "=r"(v) : "l"(dev + 32) : "memory"); s |= (u64)(v & 0) << 32; }
    if (extra & 1) asm volatile("st.relaxed.gpu.u32 [%0], %1;" :: "l"(dev + lane), "r"(i) : "memory");
    if (!(extra & 256)) st(&r->req[lane / 16].w[lane % 16], s | (lane + 7));
    if (extra & 16) st(&r->req2[lane / 16].w[lane % 16], s | (lane + 3));
    if (extra & 128) st(&r->req[0].w[1], s | 3);
    if (extra & 256) st2(&r->req[0].w[0], s | 7, s | 3);
    if (extra & 4) { loc[i & 7] = 0; loc[(i + 1) & 7] = loc[i & 7] + 1; s |= (u64)(loc[(i + 1) & 7] - 1); }
    if (lane == 0) {
      if (mode == 5 || mode == 6 || mode == 9) { st(&r->meta.w[0], s | 1); st(&r->meta.w[1], s | 4); }
      if (mode == 7 || mode == 10) st2(&r->meta.w[0], s | 1, s | 4);
      if (mode == 7 || mode == 10) st(&r->meta.w[2], s | 9);
      if (mode >= 3 && mode != 7 && mode != 8 && mode != 10) st(&r->heads.w[0], s | 9);
      if (mode >= 4 && mode != 8) st(&r->bell.w[0], s | 0);
    }
    fence_after();
    send += gt() - g0;
    long long t = clock64();
    if (alone && (extra & 384)) {
      u64 a, b;
      while (true) {
        if (extra & 256) asm volatile("ld.relaxed.sys.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(&r->rep[0].w[0]) : "memory");
        else { a = ld(&r->rep[0].w[0]); b = ld(&r->rep[0].w[1]); }
        if ((a >> 32) == i && (b >> 32) == i) { if ((a & 0xffffffff) != 8 || (b & 0xffffffff) != 4) atomicAdd(bad, 1); break; }
        if (clock64() - t > limit) { atomicAdd(bad, 1); return; }
      }
      continue;
    }
    if (alone && (extra & 96)) {
      // Pipelined polling: four polls in flight, issued `sp` cycles apart.
      const long long sp = (extra & 32) ? 500 : 200;
      const u64* p1 = &r->rep[0].w[0];
      const u64* p2 = (extra & 16) ? &r->rep2[0].w[0] : p1;
      u64 a0, b0, a1, b1, a2, b2, a3, b3;
#define ISSUE(a, b) { a = ld(p1); b = ld(p2); long long u = clock64(); while (clock64() - u < sp) {} }
#define CHECK(a, b) if ((a >> 32) == i && (b >> 32) == i) { if ((a & 0xffffffff) != 8) atomicAdd(bad, 1); break; }
      ISSUE(a0, b0) ISSUE(a1, b1) ISSUE(a2, b2) ISSUE(a3, b3)
      while (true) {
        CHECK(a0, b0) ISSUE(a0, b0)
        CHECK(a1, b1) ISSUE(a1, b1)
        CHECK(a2, b2) ISSUE(a2, b2)
        CHECK(a3, b3) ISSUE(a3, b3)
        if (clock64() - t > limit) { atomicAdd(bad, 1); return; }
      }
      continue;
    }
    while (true) {
      u64 w = ld(&r->rep[lane / 16].w[lane % 16]);
      bool ok = (w >> 32) == i;
      if (extra & 16) { u64 w2 = ld(&r->rep2[lane / 16].w[lane % 16]); ok = ok && (w2 >> 32) == i && (w2 & 0xffffffff) == (u64)(lane + 4); }
      if (alone) { if (ok) { if ((w & 0xffffffff) != (u64)(lane + 8)) atomicAdd(bad, 1); break; } }
      else if (__all_sync(0xffffffffu, ok)) { if ((w & 0xffffffff) != (u64)(lane + 8)) atomicAdd(bad, 1); break; }
      if (clock64() - t > limit) { atomicAdd(bad, 1); return; }
    }
  }
  if (lane == 0) *send_ns = send;
}

static inline u64 L(volatile u64* p) { return *p; }
static inline void pf(const volatile void* p) { _mm_prefetch((const char*)p, _MM_HINT_T0); }

static void host(Region* r, int mode, int iters, std::atomic<int>* herr, int extra) {
  const int n = mode >= 8 ? 1 : 32;
  auto start = std::chrono::steady_clock::now();
  auto timed_out = [&] { return std::chrono::steady_clock::now() - start > std::chrono::seconds(20); };
  for (unsigned i = 1; i <= (unsigned)iters; i++) {
    volatile u64* req = r->req[0].w;
    if (mode == 1) {
      while (L(&r->flag.w[0]) != i) if (timed_out()) { herr->fetch_add(1); return; }
      ((volatile u64*)r->flag2.w)[0] = i; continue;
    }
    if (mode >= 4 && mode != 8) {
      while ((L(&r->bell.w[0]) >> 32) != i) if (timed_out()) { herr->fetch_add(1); return; }
      if (mode == 6 || mode == 7 || mode == 10) { pf(&r->heads); pf(&r->meta); pf(&r->req[0]); pf(&r->req[1]); }
    }
    if (mode >= 3 && mode != 7 && mode != 8 && mode != 10)
      while ((L(&r->heads.w[0]) >> 32) != i) if (timed_out()) { herr->fetch_add(1); return; }
    if (mode == 5 || mode == 6 || mode == 9 || mode == 7 || mode == 10) {
      int k = (mode == 7 || mode == 10) ? 3 : 2;
      for (int j = 0; j < k; j++) while ((L(&r->meta.w[j]) >> 32) != i) if (timed_out()) { herr->fetch_add(1); return; }
    }
    u64 sum = 0;
    for (int l = 0; l < n; l++) {
      u64 w;
      while (((w = L(&req[l])) >> 32) != i) if (timed_out()) { herr->fetch_add(1); return; }
      sum += w;
    }
    if (extra & 384)
      while ((L(&r->req[0].w[1]) >> 32) != i) if (timed_out()) { herr->fetch_add(1); return; }
    if (extra & 16) for (int l = 0; l < n; l++) {
      u64 w;
      while (((w = L(&r->req2[0].w[l])) >> 32) != i) if (timed_out()) { herr->fetch_add(1); return; }
      sum += w;
    }
    (void)sum;
    for (int l = 0; l < n; l++) {
      u64 d = (L(&req[l]) & 0xffffffffULL) + 1;
      ((volatile u64*)r->rep[l / 16].w)[l % 16] = ((u64)i << 32) | d;
    }
    if (extra & 384) ((volatile u64*)r->rep[0].w)[1] = ((u64)i << 32) | ((L(&r->req[0].w[1]) & 0xffffffffULL) + 1);
    if (extra & 16) for (int l = 0; l < n; l++) ((volatile u64*)r->rep2[l / 16].w)[l % 16] = ((u64)i << 32) | ((L(&r->req2[0].w[l]) & 0xffffffffULL) + 1);
    if (mode >= 5 && mode != 8) ((volatile u64*)r->rep_meta.w)[0] = (u64)i << 32;
  }
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 100000;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  CK(cudaSetDeviceFlags(cudaDeviceMapHost));
  Region* h; CK(cudaHostAlloc((void**)&h, sizeof(Region), cudaHostAllocMapped | cudaHostAllocPortable));
  Region* d; CK(cudaHostGetDevicePointer((void**)&d, h, 0));
  int* bad; CK(cudaMalloc(&bad, sizeof(int)));
  u64* sn; CK(cudaMalloc(&sn, 8));
  unsigned* dev; CK(cudaMalloc(&dev, 256)); CK(cudaMemset(dev, 0, 256));
  const char* names[] = {"", "flag ping-pong, 1 thread (floor)",
    "warp: LL request, LL reply (bare)",
    "warp: + head line (host polls head, then words)",
    "warp: + head + bell (host: bell, head, words)",
    "warp: + meta + head + bell, served word (the word line's chain)",
    "warp: the word line's chain, host prefetches every line on the bell",
    "warp: meta and head merged (one line), bell; host prefetches",
    "lane 0: LL request, LL reply (bare)",
    "lane 0: the word line's chain",
    "lane 0: merged line, bell, prefetch"};
  struct Cfg { int mode, st, fence, ld, extra; };
  const char* fn[] = {"none", "fence.sc.sys", "fence.acq_rel.sys", "fence.acq_rel.gpu"};
  std::vector<Cfg> cfgs = {
    // The floor, and the fence after the store.
    {1,1,1,1,0}, {1,0,0,0,0}, {1,1,0,1,0}, {1,0,1,0,0}, {1,0,2,0,0}, {1,0,3,0,0}, {1,2,3,2,0},
    // A warp: the chain of reads, with and without a fence after the stores.
    {2,0,0,0,0}, {3,0,0,0,0}, {4,0,0,0,0}, {5,0,0,0,0}, {6,0,0,0,0}, {7,0,0,0,0},
    {2,0,1,0,0}, {5,0,1,0,0}, {5,0,3,0,0}, {5,2,3,2,0}, {5,0,3,0,7},
    // Lane 0 alone.
    {8,0,0,0,0}, {8,0,3,0,0}, {9,0,0,0,0}, {9,0,3,0,0}, {9,0,0,0,7}, {10,0,0,0,0},
    // Lane 0: two words a lane, in two lines, in one line with two loads, with one vector load.
    {9,0,0,0,16}, {9,0,3,0,16}, {9,0,0,0,128}, {9,0,3,0,128}, {9,0,0,0,256}, {9,0,3,0,256},
    // Lane 0: four polls in flight.
    {9,0,3,0,32}, {9,0,3,0,64},
    {1,1,1,1,0}};
  printf("| variant | stores | after the stores | loads | extra | us (median of %d) | min | max | x floor | lane 0 send ns | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n", reps);
  double floor = 0;
  for (auto c : cfgs) {
    int mode = c.mode;
    std::vector<double> t, sends;
    int errs = 0;
    for (int rep = 0; rep < reps; rep++) {
      memset((void*)h, 0, sizeof(Region));
      CK(cudaMemset(bad, 0, sizeof(int)));
      std::atomic<int> herr{0};
      std::thread srv(host, h, mode, iters, &herr, c.extra);
      auto a = std::chrono::steady_clock::now();
      kern<<<1, 32>>>(d, mode, iters, bad, sn, c.st, c.fence, c.ld, c.extra, dev);
      CK(cudaDeviceSynchronize());
      auto b = std::chrono::steady_clock::now();
      srv.join();
      int hb; CK(cudaMemcpy(&hb, bad, sizeof(int), cudaMemcpyDeviceToHost));
      errs += hb + herr.load();
      t.push_back(std::chrono::duration<double, std::micro>(b - a).count() / iters);
      u64 hs; CK(cudaMemcpy(&hs, sn, 8, cudaMemcpyDeviceToHost)); sends.push_back((double)hs / iters);
    }
    std::sort(sends.begin(), sends.end());
    std::sort(t.begin(), t.end());
    double m = t[t.size() / 2];
    if (floor == 0) floor = m;
    printf("| %s | %s | %s | %s | %d | %.3f | %.3f | %.3f | %.2f | %.0f | %d |\n", names[mode], c.st == 1 ? "volatile" : c.st == 2 ? "generic relaxed.sys" : "relaxed.sys", fn[c.fence], c.ld == 1 ? "volatile" : c.ld == 2 ? "generic relaxed.sys" : "relaxed.sys", c.extra, m, t.front(), t.back(), m / floor, sends[sends.size() / 2], errs);
    fflush(stdout);
  }
  return 0;
}
