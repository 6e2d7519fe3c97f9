#!/usr/bin/env bash
# The 8448-warp slice row (every warp reads its own 64 KiB of a file into device memory) three
# times as it is and three times with the host's threads and memory on NUMA node 0, to tell its
# fast runs from its slow ones (BENCHMARKS-history.md, "Bulk on the GPU: announced copies": some
# runs' file reads take twice as long). On the GPU machine, with gpu-out/bin/ferry-gpu-bench and
# gpu-out/ptx/bench.ptx built beforehand (BENCHMARKS.md, command B). Usage:
#   gpu/bench/slice-numa.sh [SERVER_THREADS]
set -u -o pipefail
G=gpu-out
servers=${1:-8}
lscpu | grep -iE 'numa|socket|model name'
command -v numactl >/dev/null && numactl -H | head -8
row() {
    timeout 60 "$@" $G/bin/ferry-gpu-bench $G/ptx/bench.ptx --bulk-only --bulk-mib 8 \
        --servers "$servers" --bulk-warps 8448 --file-threads 8 --reps 3 2>&1 |
        grep -E '8448 warps each' | grep -v 'waiting for the reply'
}
for _ in 1 2 3; do
    echo "== as it is"
    row
done
if command -v numactl >/dev/null; then
    for _ in 1 2 3; do
        echo "== node 0 only"
        row numactl --cpunodebind=0 --membind=0
    done
else
    echo "numactl is not installed: no pinned runs"
fi
