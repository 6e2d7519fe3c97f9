#!/usr/bin/env bash
# How the driver compiles a program's PTX, on the GPU machine: the first start-up (the driver's
# cache off) of each PTX given, compiled separately (the loader's default) and whole
# (`FERRY_JIT=whole`); then the bench's latency rows under both, alternated ROUNDS times.
# Built beforehand on the build machine: gpu-out/bin/{rpc-gpu-run,ferry-gpu-bench} and
# gpu-out/ptx (scripts/build-ptx); nvcc on the GPU machine for the CUDA C++ floor.
#   [ROUNDS=2] gpu/bench/jit-run.sh [PROGRAM.ptx ...]
set -u -o pipefail
G=${G:-gpu-out}
for p in "${@:-$G/ptx/exit.ptx}"; do
  for jit in separate whole; do
    FERRY_JIT=$jit CUDA_CACHE_DISABLE=1 $G/bin/rpc-gpu-run --stats "$p" /dev/null /dev/null \
      > /dev/null 2> /tmp/jit.err
    echo "$(basename "$p") ($(( $(stat -c %s "$p") / 1024 )) KB), compiled $jit: \
$(grep -o 'start-up [0-9.]* s' /tmp/jit.err), $(grep -o 'module [0-9.]* s' /tmp/jit.err)"
  done
done
nvcc -ptx -arch=sm_90 -O3 gpu/bench/floor.cu -o /tmp/floor.ptx || exit 1
for round in $(seq 1 "${ROUNDS:-2}"); do
  for jit in whole separate; do
    echo "== bench, PTX compiled $jit, round $round"
    FERRY_JIT=$jit timeout 120 $G/bin/ferry-gpu-bench $G/ptx/bench.ptx /tmp/floor.ptx --calls 100 \
      --servers 8 --bulk-mib 0 | grep '^| \(floor\|no-op\)'
  done
done
