#!/usr/bin/env bash
# examples/histogram (the README's GPU program) on the GPU machine at the launch sizes users run,
# with the loader's defaults, each run checked against a count made on the host; then a table.
# Built beforehand on the build machine: gpu-out/bin/{rpc-gpu-run,histogram-check} and
# gpu-out/ptx/ferry_histogram.ptx (examples/histogram, `ferry-ptx build`). Each TREE in $TREES is
# LABEL:LOADER:PTX, to set trees side by side (default: this tree's).
#   [TREES="..."] [SIZES="16M 256M"] gpu/bench/histogram-run.sh
set -u -o pipefail
G=${G:-gpu-out}
TREES=${TREES:-"this:$G/bin/rpc-gpu-run:$G/ptx/ferry_histogram.ptx"}
SIZES=${SIZES:-"16M 256M"}
LAUNCHES=${LAUNCHES:-"1x32 16x256 132x256 264x1024"}
for s in $SIZES; do $G/bin/histogram-check make /tmp/hist-$s $s || exit 1; done
rows=()
bad=0
for tree in $TREES; do
  IFS=: read -r label loader ptx <<< "$tree"
  kb=$(( $(stat -c %s "$ptx") / 1024 ))
  # The first run on a machine: the driver's JIT with its cache off.
  rm -f /tmp/hist-out
  CUDA_CACHE_DISABLE=1 timeout 300 "$loader" --stats "$ptx" /tmp/hist-$(echo $SIZES | cut -d' ' -f1) \
    /tmp/hist-out > /dev/null 2> /tmp/hist-first.err
  first=$(grep -o 'start-up [0-9.]*' /tmp/hist-first.err | cut -d' ' -f2)
  module=$(grep -o 'module [0-9.]*' /tmp/hist-first.err | cut -d' ' -f2)
  echo "== $label: PTX $kb KB, first run's start-up ${first:-?} s (module ${module:-?} s)"
  for s in $SIZES; do
    for launch in $LAUNCHES ${EXTRA:-}; do
      b=${launch%x*}; t=${launch#*x}; t=${t%%:*}
      flags=""; case $launch in *:*) flags=${launch#*:}; flags=${flags//,/ };; esac
      rm -f /tmp/hist-out
      timeout 300 "$loader" --stats --blocks $b --threads $t $flags "$ptx" /tmp/hist-$s /tmp/hist-out \
        > /tmp/hist.out 2> /tmp/hist.err
      rc=$?
      check=$($G/bin/histogram-check check /tmp/hist-$s /tmp/hist-out 2>&1)
      kernel=$(grep -o 'kernel [0-9.]*' /tmp/hist.err | cut -d' ' -f2)
      threads=$(grep -o 'server threads \[[0-9, ]*\]' /tmp/hist.err | sed 's/server threads //')
      failed=$(grep -vc '^rpc-gpu-run: \(start-up\|.*kernel\|server threads. time\)' /tmp/hist.err)
      bytes=$(stat -c %s /tmp/hist-$s)
      rate=$(awk -v b=$bytes -v k=${kernel:-0} 'BEGIN { if (k > 0) printf "%.2f", b / k / 1e9; else print "?" }')
      case $check in right*) ok=right;; *) ok="WRONG"; bad=1;; esac
      [ $rc = 0 ] || bad=1
      echo "$label $b x $t $flags, $s: exit $rc, $check, kernel ${kernel:-?} s ($rate GB/s), $failed error lines, per server thread $threads"
      [ $failed -gt 0 ] && head -3 /tmp/hist.err
      grep "time in handlers" /tmp/hist.err | cut -c1-400
      rows+=("| $label | $b × $t ${flags:+($flags)} | $s | $ok, exit $rc | ${kernel:-?} s | $rate GB/s | $failed | $kb KB | ${first:-?} s |")
    done
  done
done
echo
echo "| tree | launch | input | result | kernel | read rate | error lines | PTX | first start-up |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $bad
