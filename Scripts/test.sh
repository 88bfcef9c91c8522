#!/usr/bin/env bash
# The whole test suite in three phases, so the tests that measure a process's wall time
# (drain bounds, breaker bounds, database-fault watchdogs) never share two cores with the
# dozens of processes the kill tests start:
#   1. everything else, in parallel;
#   2. the kill -9 tests (each starts and kills the real binary many times);
#   3. the tests that bound how long the real binary takes, and those that count requests per second
#      against a rate limit (the order endpoints), which a loaded machine makes late.
# Extra arguments go to every `swift test` call (for example --skip-build).
# Each phase has a time limit (RENEWAL_TEST_PHASE_MINUTES scales them: 2 doubles every limit;
# RENEWAL_TEST_PHASE_LIMIT_SECONDS replaces them all, to try the watchdog itself). A phase
# that passes its limit is stopped, and the log names the tests that started and never finished, the
# processes still running, and (where gdb is installed) every thread's stack of the stuck processes, so
# a hang costs minutes and says where it is instead of taking the whole CI budget.
# The closing line adds up the three phases' counts: "Test run with N tests in M suites passed".
set -uo pipefail
cd "$(dirname "$0")/.."

kill_suites='KillLoopTests|PostgresKillTests|FeedKillTests|WebhookKillTests|HistoryKillTests|ExtendKillTests|DiscoverKillTests'
timed_suites='ShutdownTests|AppleDownTests|DatabaseFaultTests|PostgresFaultTests|MetricsAndLogsTests|OrderEndpointsTests|SimulatedOrderTests'
scale=${RENEWAL_TEST_PHASE_MINUTES:-1}
# At most this many test cases at once. Unbounded, the parallel phase held about 1,550 file descriptors
# in the test process and 215 PostgreSQL connections at its peak; past about 1,300 descriptors
# Foundation's Process.run on Linux (Swift 6.3.1) can over-read the end of its /proc/self/fd listing
# and crash the whole test process (it did in CI). With 6 the peak is about 150 descriptors and the
# phase takes the same time (140 s against 144 s here).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-6}

log=$(mktemp /tmp/renewal-tests.XXXXXX)
work=$(mktemp -d /tmp/renewal-test-phase.XXXXXX)
trap 'rm -rf "$log" "$work"' EXIT

# Every process below `1` (pids), deepest first.
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    descendants "$child"
    echo "$child"
  done
}

# What a phase that passed its limit leaves behind: the unfinished tests, the processes, their stacks.
report_hang() {
  local output=$1 root=$2 limit=$3
  echo "== tests: the phase passed its limit of $limit s; stopping it"
  echo "== tests: started and not finished:"
  python3 - "$output" <<'PY'
import re, sys
started, finished = [], set()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if m := re.search(r'Test (".*") started\.', line):
        started.append(m.group(1))
    elif m := re.search(r'Test (".*?") (?:with \d+ test cases? )?(?:passed|failed|skipped|recorded)', line):
        finished.add(m.group(1))
    elif m := re.search(r"Test Case '(.*)' started", line):
        started.append(m.group(1))
    elif m := re.search(r"Test Case '(.*)' (?:passed|failed|skipped)", line):
        finished.add(m.group(1))
for name in started:
    if name not in finished:
        print("   ", name)
PY
  local pids
  pids=$(descendants "$root")
  echo "== tests: processes still running:"
  # shellcheck disable=SC2086
  [ -n "$pids" ] && ps -o pid,ppid,etimes,rss,args -p "$(echo $pids | tr ' ' ',')" | cut -c1-300
  if command -v gdb >/dev/null 2>&1; then
    local pid
    for pid in $pids; do
      # The stacks that matter: the test process and the binaries it started, not chromium or the shell.
      case "$(ps -o args= -p "$pid" | awk '{print $1}')" in
        *.xctest | */renewal | */appstore-simulator | */renewal-bench) ;;
        *) continue ;;
      esac
      echo "== tests: stacks of $pid ($(ps -o args= -p "$pid" | cut -c1-120))"
      timeout 60 gdb -p "$pid" -batch -nx -ex "set pagination off" -ex "thread apply all bt 30" 2>/dev/null \
        | grep -E "^Thread|^#" | cut -c1-220 | head -n 400
    done
  fi
  # shellcheck disable=SC2086
  kill -9 $pids "$root" 2>/dev/null
}

status=0
phase() {
  local name=$1 minutes=$(($2 * scale))
  shift 2
  local limit=${RENEWAL_TEST_PHASE_LIMIT_SECONDS:-$((minutes * 60))}
  echo "== tests: $name (limit $limit s)"
  local output="$work/phase-output" code_file="$work/phase-code"
  : >"$output"
  rm -f "$code_file"
  (
    # Line-buffered, so the log is current when the watchdog reads it (a pipe is otherwise written in
    # 4 KB blocks, and a killed process's last block is lost).
    stdbuf -oL -eL swift test "$@" 2>&1
    echo $? >"$code_file"
  ) > >(tee -a "$log" "$output") &
  local runner=$! waited=0
  while kill -0 "$runner" 2>/dev/null; do
    if [ "$waited" -ge "$limit" ]; then
      report_hang "$output" "$runner" "$limit" 2>&1 | tee -a "$log"
      break
    fi
    sleep 2
    waited=$((waited + 2))
  done
  wait "$runner" 2>/dev/null
  local code
  code=$(cat "$code_file" 2>/dev/null || echo 124)
  if [ "$code" -ne 0 ]; then
    echo "== tests: $name failed (exit $code)"
    status=$code
  fi
}

phase "everything but the kill and timed suites" 25 --skip "$kill_suites|$timed_suites" "$@"
phase "kill -9 suites" 15 --filter "$kill_suites" "$@"
phase "suites that bound the binary's wall time" 15 --filter "$timed_suites" "$@"

tests=0
suites=0
while read -r n m; do
  tests=$((tests + n))
  suites=$((suites + m))
done < <(sed -nE 's/.*Test run with ([0-9]+) tests? in ([0-9]+) suites?.*/\1 \2/p' "$log")
if [ "$status" -eq 0 ]; then
  echo "Test run with $tests tests in $suites suites passed (three phases)."
else
  echo "Test run with $tests tests in $suites suites: some failed (three phases; see above)."
fi
exit "$status"
