#!/usr/bin/env bash
# CI: build the device crate for AMD GPUs (amdgcn-amd-amdhsa, gfx90a), so the wavefront lanes and
# the protocol code they drive cannot rot. Uses the Debian compiler .ci/ptx.sh installs (it ships
# the AMDGPU back end and the `core` sources). Nothing here runs it: no AMD GPU on these machines.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}/amdgpu
RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$target \
    CARGO_ENCODED_RUSTFLAGS=-Ctarget-cpu=gfx90a \
    cargo build --release --target amdgcn-amd-amdhsa -Zbuild-std=core -p ferry-device
# The wavefront's protocol code was generated: the exported no-op call is in the library.
rlib=$(ls -t "$target"/amdgcn-amd-amdhsa/release/deps/libferry_device-*.rlib | head -1)
tmp=$(mktemp -d)
(cd "$tmp" && ar x "$rlib")
llvm-objdump-22 -d --mcpu=gfx90a "$tmp"/*.o > "$tmp/dis.txt"
grep -q '<ferry_amdgpu_noop>:' "$tmp/dis.txt"
rm -rf "$tmp"
echo "amdgpu: ok"
