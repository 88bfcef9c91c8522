#!/bin/bash
# Windows off UTC midnights over a ledger whose dates are spread over the day (BENCHMARKS.md, "Where a
# window's correction spends its time"). Make and load the ledger, then time the windows:
#
#   sed -e 's/199999/999999/' \
#     -e 's/(i % 380) \* 86400000::bigint/(i % 380) * 86400000::bigint + (i::bigint * 7919 % 86400) * 1000/g' \
#     Benchmarks/analytics/ledger.postgres.sql > /tmp/ledger1m.spread.sql
#   renewal migrate --database URL && psql -q URL -f /tmp/ledger1m.spread.sql
#   renewal analytics --rebuild --database URL
#
#   Benchmarks/analytics/spread-windows.sh times URL OUTDIR [BINARY]   # every window twice: wall, user, RSS
#   Benchmarks/analytics/spread-windows.sh cpu URL RUNS BINARY...      # renewal's CPU (perf stat task-clock)
#
# `times` keeps each answer in OUTDIR (NAME.PASS.json) to compare two builds with `cmp`. `cpu` runs the
# two windows that correct the most (an hour inside one day, 28 days noon to noon) RUNS times, the
# binaries in turn, and prints each binary's median and least CPU: on a shared 2-core machine one run's
# time moves by 20 %, so a change is judged by many runs, never by one.
set -euo pipefail
mode=${1:?usage: spread-windows.sh times URL OUTDIR [BINARY] | cpu URL RUNS BINARY...}
url=${2:?usage: spread-windows.sh MODE URL ...}
windows=(
  "hour 2025-10-16T06:30:00Z 2025-10-16T07:30:00Z"
  "33h 2025-10-14T22:00:00Z 2025-10-16T07:30:00Z"
  "28d 2025-09-17T22:00:00Z 2025-10-16T07:30:00Z"
  "90d 2025-07-17T22:00:00Z 2025-10-16T07:30:00Z"
  "noon28 2025-09-18T12:00:00Z 2025-10-16T12:00:00Z"
  "mid28 2025-09-18T00:00:00Z 2025-10-16T00:00:00Z"
)

if [[ $mode == times ]]; then
  out=${3:?usage: spread-windows.sh times URL OUTDIR [BINARY]}
  renewal=${4:-.build/release/renewal}
  mkdir -p "$out"
  for pass in 1 2; do
    for window in "${windows[@]}"; do
      read -r name since until <<<"$window"
      /usr/bin/time -f "%e s wall, %U s user, %M KiB" -o "$out/$name.$pass.time" \
        "$renewal" analytics --json --since "$since" --until "$until" --database "$url" >"$out/$name.$pass.json"
      echo "pass $pass $name: $(cat "$out/$name.$pass.time")"
    done
  done
  exit 0
fi

if [[ $mode == cpu ]]; then
  runs=${3:?usage: spread-windows.sh cpu URL RUNS BINARY...}
  shift 3
  stat=$(mktemp)
  results=$(mktemp)
  trap 'rm -f "$stat" "$results"' EXIT
  for _ in $(seq "$runs"); do
    for renewal in "$@"; do
      for window in "${windows[0]}" "${windows[4]}"; do
        read -r name since until <<<"$window"
        perf stat -e task-clock -x, -o "$stat" \
          "$renewal" analytics --json --since "$since" --until "$until" --database "$url" >/dev/null
        echo "$renewal $name $(grep task-clock "$stat" | cut -d, -f1)" >>"$results"
      done
    done
  done
  sort -k1,2 -k3n "$results" | awk '
    { key = $1 " " $2; values[key] = values[key] " " int($3); count[key]++; all[key, count[key]] = $3 }
    END { for (key in count) { n = count[key]; m = all[key, int((n + 1) / 2)]
      printf "%s: median %d ms, least %d ms (%s)\n", key, m, all[key, 1], values[key] } }' | sort
  exit 0
fi
echo "unknown mode $mode" >&2
exit 64
