#!/usr/bin/env bash
# Every GPU check and benchmark of ferry-gpu in one run on the GPU machine, then a summary.
# Built beforehand on the build machine: host binaries in gpu-out/bin (rpc-gpu-run,
# ferry-gpu-bench, gpu-tally of ferry-examples, and the tests/gpu.rs test binary as gpu-test), PTX in gpu-out/ptx
# (scripts/build-ptx) and, for each extra variant to compare, in gpu-out/VARIANT. Needs nvcc there
# for the CUDA C++ floor kernel. Usage:
#   [VARIANTS="ptx base"] gpu/bench/device-run.sh [OCCUPANCY_CALLS] [BENCH_CALLS]
set -u -o pipefail
G=gpu-out
calls=${1:-10000}
bcalls=${2:-200}
declare -A result
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nvcc -ptx -arch=sm_90 -O3 gpu/bench/floor.cu -o /tmp/floor.ptx || echo "nvcc failed"

echo "== loader: a program without the descriptor is refused"
$G/bin/rpc-gpu-run /tmp/floor.ptx; rc=$?; echo "exit $rc"
[ $rc = 125 ] && result[refusal]=ok || result[refusal]="FAILED (exit $rc)"

echo "== hello: 132 blocks x 64 threads"
$G/bin/rpc-gpu-run --stats --blocks 132 --threads 64 $G/ptx/hello.ptx > /tmp/hello.out
rc=$?; lines=$(wc -l < /tmp/hello.out); distinct=$(sort -u /tmp/hello.out | wc -l)
echo "exit $rc; lines $lines, distinct $distinct"
head -2 /tmp/hello.out; tail -1 /tmp/hello.out
[ $rc = 0 ] && [ $lines = 8448 ] && [ $distinct = 8448 ] && result[hello]=ok || result[hello]=FAILED

echo "== gpu-tally: a user's own service (Tally) plus Libc, 4 blocks x 96 threads"
timeout 120 $G/bin/gpu-tally $G/ptx/tally.ptx --blocks 4 --threads 96 --rounds 8 > /tmp/tally.out 2> /tmp/tally.err
rc=$?; echo "exit $rc; lines $(wc -l < /tmp/tally.out)"; head -2 /tmp/tally.out; cat /tmp/tally.err
# Exit 0 without a GPU too (it says "skipped"): that is a failure here.
[ $rc = 0 ] && ! grep -q skipped /tmp/tally.err && [ "$(grep -c ': ok$' /tmp/tally.out)" = 384 ] \
  && result[gpu-tally]=ok || result[gpu-tally]="FAILED (exit $rc)"

echo "== tests/gpu.rs"
FERRY_GPU_PTX=$G/ptx timeout 120 $G/bin/gpu-test --test-threads 1 --nocapture
rc=$?; [ $rc = 0 ] && result[gpu.rs]=ok || result[gpu.rs]="FAILED (exit $rc)"

echo "== full occupancy: 264 blocks x 1024 threads, $calls calls per warp"
timeout ${OCC_TIMEOUT:-200} $G/bin/rpc-gpu-run --stats --blocks 264 --threads 1024 --max-registers 32 \
  --server-threads ${OCC_SERVERS:-8} --timeout 190 $G/ptx/occupancy.ptx $calls
rc=$?; echo "occupancy exit $rc"
[ $rc = 0 ] && result[occupancy]=ok || result[occupancy]="FAILED (exit $rc)"

echo "== full occupancy, every warp's calls on word lines, 15 server threads"
timeout ${OCC_TIMEOUT:-200} $G/bin/rpc-gpu-run --stats --blocks 264 --threads 1024 --max-registers 32 \
  --server-threads 15 --word-lines-for-warps --timeout 190 $G/ptx/occupancy.ptx $calls
rc=$?; echo "occupancy on word lines exit $rc"
[ $rc = 0 ] && result[occupancy-words]=ok || result[occupancy-words]="FAILED (exit $rc)"

for v in ${VARIANTS:-ptx}; do
  echo "== benchmark ($v)"
  timeout 300 $G/bin/ferry-gpu-bench $G/$v/bench.ptx /tmp/floor.ptx --calls $bcalls ${BENCH_ARGS:-} \
    | tee /tmp/bench-$v.out
  rc=$?; echo "bench exit $rc"
  [ $rc = 0 ] && result[bench-$v]=ok || result[bench-$v]="FAILED (exit $rc)"
done

echo
echo "== summary"
echo "| check | result |"
echo "|---|---|"
for k in refusal hello gpu-tally gpu.rs occupancy occupancy-words; do echo "| $k | ${result[$k]} |"; done
for v in ${VARIANTS:-ptx}; do echo "| bench ($v) | ${result[bench-$v]} |"; done
for v in ${VARIANTS:-ptx}; do
  echo; echo "benchmark, variant $v:"
  grep '^|' /tmp/bench-$v.out
done
