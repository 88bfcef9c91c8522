#!/usr/bin/env bash
# The whole test suite in three phases, so the tests that measure a process's wall time
# (drain bounds, breaker bounds, database-fault watchdogs) never share two cores with the
# dozens of processes the kill tests start:
#   1. everything else, in parallel;
#   2. the kill -9 tests (each starts and kills the real binary many times);
#   3. the tests that bound how long the real binary takes.
# Extra arguments go to every `swift test` call (for example --skip-build).
# The closing line adds up the three phases' counts: "Test run with N tests in M suites passed".
set -uo pipefail
cd "$(dirname "$0")/.."

kill_suites='KillLoopTests|PostgresKillTests|FeedKillTests|WebhookKillTests'
timed_suites='ShutdownTests|AppleDownTests|DatabaseFaultTests|PostgresFaultTests|MetricsAndLogsTests'

log=$(mktemp /tmp/renewal-tests.XXXXXX)
trap 'rm -f "$log"' EXIT

status=0
phase() {
  local name=$1
  shift
  echo "== tests: $name"
  swift test "$@" 2>&1 | tee -a "$log"
  local code=${PIPESTATUS[0]}
  if [ "$code" -ne 0 ]; then
    echo "== tests: $name failed (exit $code)"
    status=$code
  fi
}

phase "everything but the kill and timed suites" --skip "$kill_suites|$timed_suites" "$@"
phase "kill -9 suites" --filter "$kill_suites" "$@"
phase "suites that bound the binary's wall time" --filter "$timed_suites" "$@"

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
