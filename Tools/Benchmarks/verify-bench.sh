#!/usr/bin/env bash
# Times `graph-journal verify DIR` for one or more binaries, alternating them run by run (the
# machine is noisy: alternation spreads its moods over all of them), and prints each one's
# median and the journal's bytes on disk per second of it.
#
# Usage: Tools/Benchmarks/verify-bench.sh DIR RUNS BIN...
#   e.g. verify-bench.sh /tmp/bench1m 15 /tmp/graph-journal-old /usr/local/bin/graph-journal
set -euo pipefail
dir=$1; runs=$2; shift 2
shopt -s nullglob
files=("$dir"/*.log "$dir"/*.base "$dir"/MANIFEST)
bytes=$(du -bc "${files[@]}" | tail -1 | cut -f1)
for b in "$@"; do "$b" verify "$dir" >/dev/null; "$b" verify "$dir" >/dev/null; done  # warm the page cache
declare -A t
for _ in $(seq "$runs"); do
  for b in "$@"; do
    s=$(date +%s%N); "$b" verify "$dir" >/dev/null; e=$(date +%s%N)
    t[$b]+="$(( (e - s) / 1000 )) "
  done
done
for b in "$@"; do
  med=$(echo ${t[$b]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  echo "$b: median ${med} us over $runs; $bytes bytes -> $(awk -v b="$bytes" -v m="$med" 'BEGIN{printf "%.0f", b/m}') MB/s"
done
