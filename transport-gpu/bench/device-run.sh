#!/usr/bin/env bash
# Every GPU check and benchmark of transport-gpu in one run on the GPU machine.
# Built beforehand on the build machine: host binaries in gpu-out/bin, PTX in gpu-out/ptx
# (scripts/build-ptx). Needs nvcc there for the CUDA C++ floor kernel. Usage:
#   transport-gpu/bench/device-run.sh [OCCUPANCY_CALLS] [BENCH_CALLS]
set -u
G=gpu-out
calls=${1:-10000}
bcalls=${2:-100}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nvcc -ptx -arch=sm_90 -O3 transport-gpu/bench/floor.cu -o /tmp/floor.ptx || echo "nvcc failed"

echo "== loader: a program without the descriptor is refused"
$G/bin/rpc-gpu-run /tmp/floor.ptx; echo "exit $?"

echo "== hello: 132 blocks x 64 threads"
$G/bin/rpc-gpu-run --stats --blocks 132 --threads 64 $G/ptx/hello.ptx > /tmp/hello.out
echo "exit $?; lines $(wc -l < /tmp/hello.out), distinct $(sort -u /tmp/hello.out | wc -l)"
head -3 /tmp/hello.out; tail -2 /tmp/hello.out

for v in ${VARIANTS:-ptx}; do
  echo "== benchmark ($v)"
  timeout 300 $G/bin/ferry-gpu-bench $G/$v/bench.ptx /tmp/floor.ptx --calls $bcalls ${BENCH_ARGS:-}
  echo "bench exit $?"
done

echo "== full occupancy: 264 blocks x 1024 threads, $calls calls per warp"
timeout ${OCC_TIMEOUT:-200} $G/bin/rpc-gpu-run --stats --blocks 264 --threads 1024 --max-registers 32 \
  --server-threads ${OCC_SERVERS:-8} --timeout 190 $G/ptx/occupancy.ptx $calls
echo "occupancy exit $?"
