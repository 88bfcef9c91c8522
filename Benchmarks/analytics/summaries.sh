#!/bin/bash
# The analytics summaries benchmark of BENCHMARKS.md ("Issue 45 targets"): the time and memory of
# `renewal analytics --rebuild`, then windows of 1 to 90 days answered from the summaries.
#
#   Benchmarks/analytics/summaries.sh rebuild DATABASE            # --rebuild under GNU time -v
#   Benchmarks/analytics/summaries.sh check DATABASE UNTIL DAYS   # --check-summaries --json (recomputes too)
#   Benchmarks/analytics/summaries.sh reads DATABASE UNTIL DAYS   # the same reads in sqlite3 or psql, timed
#   Benchmarks/analytics/summaries.sh plan DATABASE UNTIL DAYS    # EXPLAIN (ANALYZE) of each read
#   Benchmarks/analytics/summaries.sh mark DATABASE               # the ledger's mark alone, three times
#
# DATABASE is a SQLite path or a postgres:// URL, already migrated and loaded (ledger.sqlite.sql with
# 199999 replaced by N - 1, or ledger-10m.postgres.sh). UNTIL is a UTC day (2025-12-01); the window is
# [UNTIL - DAYS days, UNTIL). RENEWAL is the binary (default .build/release/renewal). Every line printed
# starts with the load average, since the figures move with the machine's load.
#
# `reads` runs the SQL of analyticsSummary (SQLSubscriptionStore+AnalyticsSummary.swift: the three range
# reads) and of analyticsLedgerMark (the check that the summaries are current) in the database's own
# client, three times, without the recomputation `check` makes (about 40 s at a million subscriptions,
# 17 minutes at ten million). `renewal analytics --json` does not answer from the summaries yet, and no
# flag of the binary times the summaries alone, so this is the repeatable measurement of the read.
# SKIP_MARK=1 leaves the mark out of `reads` and `plan` (a scan of every transaction: minutes at ten million);
# `mark` times it alone.
set -euo pipefail
mode=${1:?usage: summaries.sh rebuild|check|reads|plan DATABASE [UNTIL DAYS]}
db=${2:?usage: summaries.sh MODE DATABASE [UNTIL DAYS]}
renewal=${RENEWAL:-.build/release/renewal}
load() { cut -d' ' -f1-3 /proc/loadavg; }
day_number() { echo $(($(date -u -d "$1" +%s) / 86400)); }

if [[ $mode == rebuild ]]; then
  echo "load $(load)"
  /usr/bin/time -v "$renewal" analytics --database "$db" --rebuild --json 2>&1 \
    | grep -E '^\{|Elapsed|Maximum resident|User time|System time'
  echo "load $(load)"
  exit 0
fi

if [[ $mode == mark ]]; then
  until=2025-12-01 days=1
else
  until=${3:?UNTIL (a UTC day) is required}
  days=${4:?DAYS is required}
fi
since=$(date -u -d "$until - $days days" +%F)
if [[ $mode == check ]]; then
  echo "load $(load) window $since..$until ($days d)"
  "$renewal" analytics --database "$db" --check-summaries --json --since "$since" --until "$until"
  exit 0
fi

s=$(day_number "$since")
u=$(day_number "$until")
filter="environment = 'Production'"
events="SELECT row_key, SUM(count) AS n, 0 AS at_since FROM analytics_summary_rows
  WHERE shape = 'event' AND day >= $s AND day < $u AND $filter GROUP BY row_key"
steps="SELECT row_key, SUM(count) AS n, SUM(CASE WHEN day <= $s THEN count ELSE 0 END) AS at_since
  FROM analytics_summary_rows WHERE shape = 'step' AND day <= $u AND $filter GROUP BY row_key"
corners="SELECT row_key, SUM(count) AS n, 0 AS at_since FROM analytics_summary_rows
  WHERE shape = 'corner' AND day > $s AND day <= $u AND since_day <= $s AND $filter GROUP BY row_key"
mark="SELECT MAX(updated_at) AS latest, COUNT(*) AS n FROM transactions"
facts="SELECT MAX(id) AS latest FROM subscription_facts"
state="SELECT * FROM analytics_summary_state WHERE id = 1"

# One timed statement per line: "name seconds rows", the time by the client's own timer (sqlite3's
# .timer, psql's \timing): the statement, not the client's start or connection.
timed_sqlite() {
  local name=$1 sql=$2 out
  out=$(printf '.timer on\n%s;\n' "$sql" | sqlite3 "$db")
  printf '%s %s %s\n' "$name" "$(grep '^Run Time' <<<"$out" | awk '{print $4}')" \
    "$(grep -vc '^Run Time' <<<"$out" || true)"
}
timed_postgres() {
  local name=$1 sql=$2 out
  out=$(psql "$db" -Atq -v ON_ERROR_STOP=1 -c '\timing on' -c "$sql")
  printf '%s %.3f %s\n' "$name" "$(grep '^Time:' <<<"$out" | awk '{print $2 / 1000}')" \
    "$(grep -vc '^Time:' <<<"$out" || true)"
}

if [[ $db == postgres* ]]; then timed=timed_postgres; else timed=timed_sqlite; fi
if [[ $mode == plan ]]; then
  plans=("$events" "$steps" "$corners")
  [[ ${SKIP_MARK:-0} == 1 ]] || plans+=("$mark")
  for sql in "${plans[@]}"; do
    if [[ $db == postgres* ]]; then
      psql "$db" -Atq -c "EXPLAIN (ANALYZE, BUFFERS) $sql"
    else
      sqlite3 "$db" "EXPLAIN QUERY PLAN $sql"
    fi
    echo
  done
  exit 0
fi
if [[ $mode == mark ]]; then
  for run in 1 2 3; do
    echo "load $(load) mark run $run"
    "$timed" mark "$mark"
    "$timed" facts "$facts"
  done
  exit 0
fi
[[ $mode == reads ]] || { echo "unknown mode $mode" >&2; exit 64; }
for run in 1 2 3; do
  echo "load $(load) window $since..$until ($days d) run $run"
  "$timed" state "$state"
  "$timed" events "$events"
  "$timed" steps "$steps"
  "$timed" corners "$corners"
  if [[ ${SKIP_MARK:-0} != 1 ]]; then
    "$timed" mark "$mark"
    "$timed" facts "$facts"
  fi
done
