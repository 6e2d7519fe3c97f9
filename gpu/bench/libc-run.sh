#!/usr/bin/env bash
# The Libc host services on the GPU machine, then the print benchmark, then a summary.
# Built beforehand on the build machine: gpu-out/bin (rpc-gpu-run, gpu-test: tests/gpu.rs) and
# gpu-out/ptx (scripts/build-ptx). Needs nvcc there for the CUDA C++ printf side. Usage:
#   gpu/bench/libc-run.sh [LINES] [REPEATS]
set -u -o pipefail
G=gpu-out
lines=${1:-1000000}
reps=${2:-3}
blocks=132 threads=256
declare -A result
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O3 -arch=sm_90 gpu/bench/printbench.cu -o /tmp/printbench || echo "nvcc failed"
tmp=$(mktemp -d)
rm -f /tmp/bench.rows

echo "== loader regressions: hello, exit 7"
$G/bin/rpc-gpu-run --blocks 132 --threads 64 $G/ptx/hello.ptx > /tmp/hello.out; rc=$?
n=$(wc -l < /tmp/hello.out); d=$(sort -u /tmp/hello.out | wc -l); echo "hello exit $rc, lines $n, distinct $d"
[ $rc = 0 ] && [ $n = 8448 ] && [ $d = 8448 ] && result[hello]=ok || result[hello]=FAILED
$G/bin/rpc-gpu-run $G/ptx/exit.ptx 7; rc=$?; echo "exit.ptx 7: exit $rc"
[ $rc = 7 ] && result[exit]=ok || result[exit]="FAILED (exit $rc)"

echo "== tests/gpu.rs"
FERRY_GPU_PTX=$G/ptx timeout 120 $G/bin/gpu-test --test-threads 1
rc=$?; [ $rc = 0 ] && result[gpu.rs]=ok || result[gpu.rs]="FAILED (exit $rc)"

echo "== files: 2 blocks x 64 threads, files in $tmp, code 7"
timeout 60 $G/bin/rpc-gpu-run --timeout 50 --stats --blocks 2 --threads 64 $G/ptx/files.ptx $tmp 7 > /tmp/files.out; rc=$?
n=$(wc -l < /tmp/files.out); ok=$(grep -c '^thread [0-9]*: ok$' /tmp/files.out)
hello=$(grep -c ': hello$' /tmp/files.out); left=$(ls $tmp | wc -l)
echo "exit $rc; lines $n (hello $hello, ok $ok); files left $left"
head -2 /tmp/files.out; grep ': ok$' /tmp/files.out | tail -1
[ $rc = 7 ] && [ $n = 256 ] && [ $ok = 128 ] && [ $hello = 128 ] && [ $left = 0 ] \
  && result[files]=ok || result[files]=FAILED
echo "== files, exit call with code 42"
timeout 60 $G/bin/rpc-gpu-run --timeout 50 --stats --blocks 2 --threads 64 $G/ptx/files.ptx $tmp 42 exit > /tmp/files2.out; rc=$?
echo "exit $rc; lines $(wc -l < /tmp/files2.out) (lines still in flight at exit may be lost)"
[ $rc = 42 ] && result[files-exit]=ok || result[files-exit]="FAILED (exit $rc)"
# Every malloc fails (MALLOC, 16), and so does the copy engine's step, whose blocks come from the
# heap (DEVICE_COPY, 128): each thread says FAILED 0x90, and the program exits 64|16|128 = 208.
echo "== files, no heap (--heap 0): every malloc fails, code 64|16|128"
timeout 60 $G/bin/rpc-gpu-run --timeout 50 --heap 0 --blocks 2 --threads 64 $G/ptx/files.ptx $tmp 7 > /tmp/files3.out; rc=$?
said=$(grep -c ': FAILED 0x90$' /tmp/files3.out)
echo "exit $rc; $said lines say FAILED 0x90"
[ $rc = 208 ] && [ $said = 128 ] && result[files-noheap]=ok || result[files-noheap]="FAILED (exit $rc, $said lines FAILED 0x90)"
rm -rf $tmp

# count FILE: well-formed distinct lines `line i`, i < N.
count() { grep -E '^line [0-9]+$' "$1" | awk -v n=$lines '$2 < n' | sort -u | wc -l; }
now() { date +%s.%N; }
echo "== print benchmark: $lines lines, $blocks x $threads threads, $reps runs each"
for r in $(seq $reps); do
  for side in ours printf printf256; do
    t0=$(now)
    case $side in
      ours) timeout 90 $G/bin/rpc-gpu-run --timeout 60 --stats --server-threads 4 --blocks $blocks --threads $threads \
              $G/ptx/printbench.ptx $lines > /tmp/p.out 2> /tmp/p.err; rc=$?
            k=$(grep -o 'kernel [0-9.]* s' /tmp/p.err | awk '{print $2}') ;;
      printf) timeout 90 /tmp/printbench $lines $blocks $threads > /tmp/p.out 2> /tmp/p.err; rc=$?
            k=$(grep -o 'sync [0-9.]* s' /tmp/p.err | awk '{print $2}') ;;
      printf256) timeout 90 /tmp/printbench $lines $blocks $threads $((256 << 20)) > /tmp/p.out 2> /tmp/p.err; rc=$?
            k=$(grep -o 'sync [0-9.]* s' /tmp/p.err | awk '{print $2}') ;;
    esac
    t1=$(now)
    cat /tmp/p.err
    got=$(wc -l < /tmp/p.out); good=$(count /tmp/p.out)
    wall=$(awk -v a=$t0 -v b=$t1 'BEGIN {printf "%.3f", b - a}')
    echo "run $r $side: exit $rc, lines $got, distinct well-formed $good, lost $((lines - good)), kernel ${k:-?} s, process ${wall} s"
    echo "$side $good $((lines - good)) ${k:-0} $wall" >> /tmp/bench.rows
  done
done

echo
echo "== summary"
echo "| check | result |"
echo "|---|---|"
for k in hello exit gpu.rs files files-exit files-noheap; do echo "| $k | ${result[$k]} |"; done
echo
echo "print benchmark, $lines lines from $blocks x $threads threads, medians of $reps runs:"
echo "| printer | lines received | lines lost | kernel s | process s | lines/s (kernel) | vs ours |"
echo "|---|---|---|---|---|---|---|"
med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(awk '$1=="ours" {print $4}' /tmp/bench.rows | med)
for side in ours printf printf256; do
  good=$(awk -v s=$side '$1==s {print $2}' /tmp/bench.rows | med)
  lost=$(awk -v s=$side '$1==s {print $3}' /tmp/bench.rows | sort -g | tail -1)
  k=$(awk -v s=$side '$1==s {print $4}' /tmp/bench.rows | med)
  w=$(awk -v s=$side '$1==s {print $5}' /tmp/bench.rows | med)
  echo "| $side | $good | $lost (most of $reps) | $k | $w | $(awk -v g=$good -v k=$k 'BEGIN {printf "%.0f", g / k}') | $(awk -v k=$k -v b=$base 'BEGIN {printf "%.2fx time", k / b}') |"
done
