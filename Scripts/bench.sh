#!/usr/bin/env bash
# Benchmark: import N receipts, then one `renewal run` against the App Store simulator with L ms of
# latency per answer. Prints receipts/second, CPU time and peak memory (GNU time) for import and run.
#
#   Scripts/bench.sh [N=10000] [LATENCY_MS=50]      env: CONFIG=release|debug, CONCURRENCY=16,
#                                                        SCRATCH=.build-release (a separate build folder)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-10000}
latency=${2:-50}
config=${CONFIG:-release}
concurrency=${CONCURRENCY:-16}

build=(swift build -c "$config")
[ -n "${SCRATCH:-}" ] && build+=(--scratch-path "$SCRATCH")
"${build[@]}" --product renewal >/dev/null
"${build[@]}" --product appstore-simulator >/dev/null
bin=$("${build[@]}" --show-bin-path)
dir=$(mktemp -d /tmp/renewal-bench.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

export APPSTORE_SHARED_SECRET=bench-secret
"$bin/appstore-simulator" serve --port "$port" --latency-ms "$latency" >"$dir/simulator.log" 2>&1 &
simulator=$!
trap 'kill $simulator 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -s "http://127.0.0.1:$port/_simulator/stats" >/dev/null 2>&1 && break
  sleep 0.1
done

export RENEWAL_DATABASE="$dir/bench.sqlite"
export APPSTORE_VERIFY_RECEIPT_URL="http://127.0.0.1:$port/verifyReceipt"
export APPSTORE_SANDBOX_VERIFY_RECEIPT_URL="http://127.0.0.1:$port/sandbox/verifyReceipt"
export RENEWAL_LOG_LEVEL=warning

"$bin/renewal" migrate >/dev/null
"$bin/appstore-simulator" receipts --count "$count" \
  --scenario renewal --scenario voluntary_expiry --scenario billing_retry --scenario grace_period \
  --scenario refund --scenario upgrade --scenario sandbox --scenario family_shared >"$dir/receipts.jsonl"

measure() {
  local label=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$dir/time.$label" "$@" >"$dir/out.$label" 2>"$dir/err.$label" || true
  read -r wall user sys rss <"$dir/time.$label"
  echo "$label: wall ${wall}s, cpu $(python3 -c "print(round($user+$sys,2))")s (user ${user}s, sys ${sys}s), peak RSS $((rss / 1024)) MiB; $(tail -n 1 "$dir/out.$label")"
  echo "$label receipts/s: $(python3 -c "print(round($count / max($wall, 0.001)))")"
}

echo "renewal benchmark: $count receipts, simulator latency ${latency} ms, concurrency $concurrency, $config build"
measure import "$bin/renewal" import "$dir/receipts.jsonl"
measure run "$bin/renewal" run --concurrency "$concurrency" --report "$dir/report.json"
measure second-run "$bin/renewal" run --concurrency "$concurrency"
echo "files: $dir"
