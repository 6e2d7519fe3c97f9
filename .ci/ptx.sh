#!/usr/bin/env bash
# CI: build the device crate and the GPU example programs to PTX, so device code cannot rot.
# Installs Debian's Rust with the NVPTX back end and LLVM 22 if they are missing (needs root and
# the Debian archive), then runs scripts/build-ptx and checks each program's entry points.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if ! [ -x /usr/bin/rustc ] || ! command -v llvm-link-22 >/dev/null \
    || ! [ -d /usr/lib/rustlib/src/rust/library/core ]; then
    apt-get update -qq
    apt-get install -y -qq rustc-web rust-web-src llvm-22 >/dev/null
fi
out=${1:-$root/gpu-out/ptx}
"$root/scripts/build-ptx" "$out"
# Each program must carry its kernels and the descriptor the loader fills in.
grep -q '^\.visible \.entry _start(' "$out/hello.ptx"
grep -q '^\.visible \.entry _start(' "$out/occupancy.ptx"
grep -q '^\.visible \.entry _start(' "$out/exit.ptx"
grep -q '^\.visible \.entry _start(' "$out/files.ptx"
grep -q '^\.visible \.entry _start(' "$out/printbench.ptx"
grep -q '^\.visible \.entry _start(' "$out/tally.ptx"
for k in pingpong call_latency call_latency_kept call_phases call_throughput bulk_read bulk_write chunk_read; do
    grep -q "^\.visible \.entry $k(" "$out/bench.ptx"
done
for p in hello occupancy exit bench files printbench tally; do
    grep -q '^\.visible \.global .* FERRY_RPC\[40\]' "$out/$p.ptx"
done
# The calls keep the client handle in registers: a handle whose address escapes (an outlined
# call, or a merge of its pointer with other bytes) lives in local memory, and every field access
# of every call then goes to memory (gpu/NOTES.md). A kernel of calls and nothing else
# has one local access (the kernel's error word); allow a few.
"$root/scripts/ptx-locals" "$out/bench.ptx" 8 call_latency call_latency_kept call_latency_lane0 \
    call_latency_lane0_kept call_throughput call_phases_words call_phases_values_open
# The occupancy program's calls are `host::noop` in a loop (`hot`), then its exit, a call through
# the runtime's shared functions: the loop's handle stays in registers, the exit stores a copy of
# it and reads back its state (so: loads only, a few). The shared functions themselves (the
# `wire` module's, the port's `*_shared` steps) work on that copy and pass their port between
# them through memory by design, so they are left out of the count: it is the program's own.
"$root/scripts/ptx-locals" --loads --skip '4wire[0-9]|_shared' "$out/occupancy.ptx" 8 _start
# And the host side of the device crate builds and its simulated-warp tests pass.
cargo test -q -p ferry-device --features sim
echo "ptx: ok"
