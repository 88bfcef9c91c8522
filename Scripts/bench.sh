#!/usr/bin/env bash
# Benchmarks of the release build against the project's App Store simulator on loopback.
# Every figure is of the job process alone (GNU time on it); the simulator runs as its own process
# and its CPU is printed beside, so a saturated simulator shows.
#
#   Scripts/bench.sh verify [N=3000] [LATENCY_MS=100] [CONCURRENCY=64]
#       import N simulator receipts into a fresh SQLite file, then one `renewal run`: receipts/s,
#       Apple requests/s against the limit concurrency / latency (efficiency), CPU ms per 1,000
#       receipts, peak RSS. RECHECK=1 then checks every receipt again (`backfill --all`), Apple
#       answering as before, and prints the job CPU per 1,000 re-checks.
#   Scripts/bench.sh scale [N=100000] [DUE_PERCENT=1]
#       N stored receipts, DUE_PERCENT of them due: import rate and memory, time to the first claim
#       (`run --limit 1`, process start included), then run / status --json / report / backfill
#       memory. PostgreSQL too when RENEWAL_BENCH_POSTGRES_URL is set (a database it may wipe).
#   Scripts/bench.sh workers [N=6000] [LATENCY_MS=100] [CONCURRENCY=16] [STORED=N] [WORKERS="1 2 4"]
#       PostgreSQL (RENEWAL_BENCH_POSTGRES_URL): N due receipts taken by 1, 2, 4 (or WORKERS) workers at
#       once; wall time, speed-up against one worker, and the receipts checked in all (a receipt checked
#       twice would show). With STORED > N, STORED receipts are imported once and the same N, spread
#       through the table, are made due before each round.
#   Scripts/bench.sh import-forms [N=20000]
#       the import rate of each line form (receipt, StoreKit 2 transaction id, StoreKit 2 signed
#       transaction, verified at import) into fresh SQLite files, and PostgreSQL schemas when
#       RENEWAL_BENCH_POSTGRES_URL is set: rows/s and peak RSS.
#   Scripts/bench.sh import-bulk [N=100000] [RECEIPT_BYTES=3000]
#       N lines with receipts of RECEIPT_BYTES base64 characters into a fresh SQLite file, and a fresh
#       PostgreSQL schema when RENEWAL_BENCH_POSTGRES_URL is set: the first import (all new), the same
#       file again (all unchanged), then a file whose every other receipt is new (half replaced):
#       rows/s and peak RSS of each.
#   Scripts/bench.sh big [SUBSCRIBERS=10000000] [RECEIPT_ROWS=2000000]
#       PostgreSQL (RENEWAL_BENCH_POSTGRES_URL, wiped): a generated population (Scripts/generate-
#       subscribers.sql: RECEIPT_ROWS rows with a 3,000-character receipt, the rest StoreKit 2 rows, 30
#       days of changes, failures, notifications, webhooks and runs), then the claim of a page of due
#       rows (EXPLAIN ANALYZE), `status --user`, `report` of the last day, and each dashboard view's
#       example query. BIG_REUSE=1 keeps the database and first migrates it to this build's schema,
#       timing the migration and the longest single-row write made meanwhile.
#   Scripts/bench.sh month [SUBSCRIBERS=1000] [DAYS=30] [INTERVAL_MINUTES=30] [renewal-bench options…]
#       a month of a subscriber population (renewals, annual plans, cancellations, refunds, billing
#       failures, recoveries, grace periods, upgrades) on the simulator's clock, in one process
#       (renewal-bench), a run every INTERVAL_MINUTES: Apple requests per subscriber per month by
#       endpoint and the delay from each event to the database (p50, p95, max), with the change feed
#       and with polling alone; then a backfill --all that shows what each left wrong. Further
#       options go to renewal-bench month: --import-form id|receipt|both, --outage-day D
#       --outage-hours H (Notification History down), --duplicate-percent, --forged-refunds,
#       --postgres-url URL --workers N, --mode feed|polling|both (renewal-bench month --help).
#   Scripts/bench.sh webhooks [CHANGES=2000] [LATENCY_MS=50] [CONCURRENCY=8,32]
#       CHANGES queued webhook deliveries (SQLite) sent to an in-process receiver answering 204 after
#       LATENCY_MS: changes/s per concurrency; then the time a run's delivery spends against a dead
#       endpoint (connection refused) before its breaker opens.
#   Scripts/bench.sh jws [N=20000]
#       the job's JWS verifier (App Store Server API path), chain cache warm, on N answers (a signed
#       transaction and a signed renewal info each) the simulator signs: answers/s per core.
#
# env: BIN (a folder holding renewal and appstore-simulator; default: build the release),
#      SIMULATOR_CPUS / JOB_CPUS (taskset lists, e.g. 1 and 0: each process on its own core),
#      KEEP=1 keeps the scratch folder,
#      RUN_FLAGS (verify: more flags for the measured run, e.g. "--webhook-seconds 2"; with
#      RENEWAL_WEBHOOK_URL and RENEWAL_WEBHOOK_SECRET_FILE set, the run queues and delivers webhooks).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-verify}
shift || true

if [ -z "${BIN:-}" ]; then
  swift build -c release --product renewal >/dev/null
  swift build -c release --product appstore-simulator >/dev/null
  swift build -c release --product renewal-bench >/dev/null
  BIN=$(swift build -c release --show-bin-path)
fi
dir=$(mktemp -d /tmp/renewal-bench.XXXXXX)
simulator=
cleanup() {
  [ -n "$simulator" ] && kill "$simulator" 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

# start_simulator LATENCY_MS: the simulator on a free port, with the job's URLs exported.
start_simulator() {
  local port
  port=$(free_port)
  ${SIMULATOR_CPUS:+taskset -c "$SIMULATOR_CPUS"} "$BIN/appstore-simulator" serve --port "$port" --latency-ms "$1" >"$dir/simulator.log" 2>&1 &
  simulator=$!
  for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$port/_simulator/stats" >/dev/null 2>&1 && break
    sleep 0.05
  done
  export APPSTORE_VERIFY_RECEIPT_URL="http://127.0.0.1:$port/verifyReceipt"
  export APPSTORE_SANDBOX_VERIFY_RECEIPT_URL="http://127.0.0.1:$port/sandbox/verifyReceipt"
  stats_url="http://127.0.0.1:$port/_simulator/stats"
}

# CPU seconds (user + system) the simulator has used so far.
simulator_cpu() { python3 -c "import os; f=open('/proc/$simulator/stat').read().rsplit(')',1)[1].split(); print((int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK'))"; }
requests() { curl -sf "$stats_url" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

# receipts FILE N: N simulator receipts of every scenario (1 in 8 sandbox, so two requests).
receipts() {
  "$BIN/appstore-simulator" receipts --count "$2" \
    --scenario renewal --scenario voluntary_expiry --scenario billing_retry --scenario grace_period \
    --scenario refund --scenario upgrade --scenario sandbox --scenario family_shared >"$1"
}

# measure LABEL COMMAND...: runs it under GNU time; sets wall, cpu, rss_mib and prints a line.
measure() {
  local label=$1
  shift
  local code=0
  /usr/bin/time -f "%e %U %S %M" -o "$dir/time.$label" ${JOB_CPUS:+taskset -c "$JOB_CPUS"} "$@" >"$dir/out.$label" 2>"$dir/err.$label" || code=$?
  read -r wall user sys rss <"$dir/time.$label"
  cpu=$(python3 -c "print(round($user + $sys, 3))")
  rss_mib=$((rss / 1024))
  printf '%-22s exit %s  wall %7.2f s  cpu %7.2f s (user %s, sys %s)  peak RSS %4d MiB\n' \
    "$label" "$code" "$wall" "$cpu" "$user" "$sys" "$rss_mib"
}

export APPSTORE_SHARED_SECRET=bench-secret RENEWAL_LOG_LEVEL=error

bench_verify() {
  local count=${1:-3000} latency=${2:-100} concurrency=${3:-64}
  echo "verify: $count receipts, simulator latency $latency ms, concurrency $concurrency, $(nproc) cores"
  start_simulator "$latency"
  export RENEWAL_DATABASE="$dir/bench.sqlite"
  "$BIN/renewal" migrate >/dev/null
  receipts "$dir/receipts.jsonl" "$count"
  measure import "$BIN/renewal" import "$dir/receipts.jsonl"
  echo "  import: $(python3 -c "print(round($count / max($wall, 0.001)))") rows/s"
  local before_requests before_cpu
  before_requests=$(requests)
  before_cpu=$(simulator_cpu)
  # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
  measure run "$BIN/renewal" run --concurrency "$concurrency" --metrics-textfile "$dir/metrics.prom" ${RUN_FLAGS:-}
  local sent sim_cpu
  sent=$(($(requests) - before_requests))
  sim_cpu=$(python3 -c "print(round($(simulator_cpu) - $before_cpu, 2))")
  python3 - "$count" "$sent" "$wall" "$cpu" "$concurrency" "$latency" "$sim_cpu" <<'EOF'
import sys
count, sent, wall, cpu, concurrency, latency, sim = map(float, sys.argv[1:])
limit = concurrency / (latency / 1000)
print(f"  receipts/s {count / wall:.0f}; Apple requests {sent:.0f} ({sent / count:.3f} per receipt), {sent / wall:.0f}/s "
      f"against a limit of {limit:.0f}/s: efficiency {sent / wall / limit:.3f}")
print(f"  job CPU {cpu * 1e6 / count:.0f} ms per 1,000 receipts; simulator CPU {sim:.2f} s "
      f"({sim / wall:.2f} of a core while the run lasted)")
EOF
  python3 - "$dir/metrics.prom" <<'PY'
import sys, re
text = open(sys.argv[1]).read()
total = sum(float(v) for v in re.findall(r'^renewal_apple_request_duration_seconds_sum\{[^}]*\} (\S+)', text, re.M))
count = sum(float(v) for v in re.findall(r'^renewal_apple_request_duration_seconds_count\{[^}]*\} (\S+)', text, re.M))
if count:
    print(f"  mean Apple request as the job timed it: {total / count * 1000:.1f} ms over {count:.0f} requests")
PY
  tail -n 1 "$dir/out.run" | sed 's/^/  /'
  if [ "${RECHECK:-0}" = 1 ]; then
    # Every receipt checked again at once, Apple answering as before: the cost of a check that changes nothing.
    measure recheck "$BIN/renewal" backfill --all --concurrency "$concurrency"
    python3 -c "print(f'  re-check job CPU {$cpu * 1e6 / $count:.0f} ms per 1,000 receipts')"
  fi
}

# make_mostly_not_due sqlite|postgres FILE_OR_URL PERCENT: all but PERCENT % of the rows become due a week later.
make_mostly_not_due() {
  local kind=$1 target=$2 percent=$3
  local sql="UPDATE receipts SET next_check_at = next_check_at + 7 * 86400000 WHERE id % 100 >= $percent"
  if [ "$kind" = sqlite ]; then
    python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()" "$target" "$sql"
  else
    psql -q "$target" -c "$sql" -c "ANALYZE receipts" >/dev/null
  fi
}

bench_scale_one() {
  local kind=$1 count=$2 percent=$3
  echo "scale on $kind: $count stored receipts, $percent % due"
  "$BIN/renewal" migrate >/dev/null
  measure "import" "$BIN/renewal" import "$dir/receipts.jsonl"
  echo "  import: $(python3 -c "print(round($count / max($wall, 0.001)))") rows/s"
  make_mostly_not_due "$kind" "$RENEWAL_DATABASE" "$percent"
  measure "first-claim" "$BIN/renewal" run --limit 1
  echo "  time to the first claim (process start, schema check, due count, claim, one answer): ${wall} s"
  measure "run" "$BIN/renewal" run --concurrency 64
  echo "  run over the due rows: $(tail -n 1 "$dir/out.run")"
  measure "status" "$BIN/renewal" status --json
  measure "report" "$BIN/renewal" report --format json
  measure "backfill-all" "$BIN/renewal" backfill --all --concurrency 64 --limit 20000
}

bench_scale() {
  local count=${1:-100000} percent=${2:-1}
  start_simulator 0
  receipts "$dir/receipts.jsonl" "$count"
  export RENEWAL_DATABASE="$dir/scale.sqlite"
  bench_scale_one sqlite "$count" "$percent"
  if [ -n "${RENEWAL_BENCH_POSTGRES_URL:-}" ]; then
    psql -q "$RENEWAL_BENCH_POSTGRES_URL" -c "DROP SCHEMA public CASCADE" -c "CREATE SCHEMA public" >/dev/null 2>&1
    export RENEWAL_DATABASE=$RENEWAL_BENCH_POSTGRES_URL
    bench_scale_one postgres "$count" "$percent"
  fi
}

bench_workers() {
  local count=${1:-6000} latency=${2:-100} concurrency=${3:-16} stored=${4:-${1:-6000}} counts=${5:-1 2 4}
  : "${RENEWAL_BENCH_POSTGRES_URL:?set RENEWAL_BENCH_POSTGRES_URL to a PostgreSQL database the benchmark may wipe}"
  export RENEWAL_DATABASE=$RENEWAL_BENCH_POSTGRES_URL
  start_simulator "$latency"
  receipts "$dir/receipts.jsonl" "$stored"
  echo "workers: $count due receipts of $stored stored on PostgreSQL, latency $latency ms, concurrency $concurrency per worker"
  local one= step=$((stored / count))
  if [ "$stored" -gt "$count" ]; then
    fresh_database postgres "" >/dev/null
    measure "import" "$BIN/renewal" import "$dir/receipts.jsonl"
  fi
  for workers in $counts; do
    if [ "$stored" -gt "$count" ]; then
      # The same rows are due each round, spread through the table; the others are not due for a year.
      psql -q -X "$RENEWAL_BENCH_POSTGRES_URL" -c "UPDATE receipts SET lease_owner = NULL, lease_expires_at = NULL,
          next_check_at = CASE WHEN id % $step = 0 THEN 0 ELSE $(date +%s000) + 31536000000 END
          WHERE next_check_at < $(date +%s000) + 30000000000 OR id % $step = 0" -c "VACUUM ANALYZE receipts" >/dev/null
    else
      fresh_database postgres "" >/dev/null
      "$BIN/renewal" import "$dir/receipts.jsonl" >/dev/null
    fi
    local start end sent pids=()
    sent=$(requests)
    start=$(date +%s.%N)
    for w in $(seq 1 "$workers"); do
      /usr/bin/time -f "%e %U %S %M" -o "$dir/time.w$workers.$w" \
        "$BIN/renewal" run --concurrency "$concurrency" >"$dir/out.w$workers.$w" 2>&1 &
      pids+=($!)
    done
    wait "${pids[@]}" || true
    end=$(date +%s.%N)
    sent=$(($(requests) - sent))
    local elapsed
    elapsed=$(python3 -c "print(round($end - $start, 2))")
    [ -z "$one" ] && one=$elapsed
    python3 - "$workers" "$elapsed" "$one" "$count" "$concurrency" "$latency" "$dir" "$sent" <<'EOF'
import glob, re, sys
workers, elapsed, one, count, concurrency, latency, folder, sent = sys.argv[1:]
workers, elapsed, one, count, sent = int(workers), float(elapsed), float(one), int(count), int(sent)
limit = workers * int(concurrency) / (int(latency) / 1000)
cpu = sum(float(p.split()[1]) + float(p.split()[2]) for p in (open(f).read().strip().splitlines()[-1] for f in glob.glob(f"{folder}/time.w{workers}.*")))
rss = max(int(open(f).read().strip().splitlines()[-1].split()[3]) for f in glob.glob(f"{folder}/time.w{workers}.*"))
checked = sum(int(m) for f in glob.glob(f"{folder}/out.w{workers}.*") for m in re.findall(r"checked (\d+)", open(f).read()))
print(f"  {workers} worker(s): {elapsed:.2f} s, {count / elapsed:.0f} receipts/s, speed-up {one / elapsed:.2f}x "
      f"(ideal {workers}x; request limit {limit:.0f}/s), job CPU {cpu * 1e6 / count:.0f} ms per 1,000, "
      f"peak RSS {rss // 1024} MiB; checked {checked} of {count} due, {sent} Apple requests")
EOF
  done
}

# bench_databases: sqlite, and postgres when RENEWAL_BENCH_POSTGRES_URL is set.
bench_databases() {
  echo sqlite
  [ -n "${RENEWAL_BENCH_POSTGRES_URL:-}" ] && echo postgres
  return 0
}

# fresh_database sqlite|postgres SQLITE_PATH: a migrated, empty database (PostgreSQL: its public schema
# wiped); prints its path or URL.
fresh_database() {
  local url=$2
  if [ "$1" = postgres ]; then
    url=$RENEWAL_BENCH_POSTGRES_URL
    PGOPTIONS=--client-min-messages=warning psql -q -X -d "$url" -c "DROP SCHEMA public CASCADE; CREATE SCHEMA public" >/dev/null
  fi
  "$BIN/renewal" migrate --database "$url" >/dev/null
  echo "$url"
}

bench_import_forms() {
  local count=${1:-20000}
  "$BIN/appstore-simulator" receipts --count "$count" --scenario renewal --user-prefix u >"$dir/receipt.jsonl"
  # The simulator exports the chain it signs with; the signed lines are signed by it.
  "$BIN/appstore-simulator" serve --port 0 --export-dir "$dir/credentials" >"$dir/simulator.log" 2>&1 &
  simulator=$!
  for _ in $(seq 1 200); do [ -f "$dir/credentials/server-api.env" ] && break; sleep 0.05; done
  kill "$simulator"
  simulator=
  "$BIN/appstore-simulator" storekit2 "$dir/receipt.jsonl" --form transaction-id >"$dir/transaction-id.jsonl"
  "$BIN/appstore-simulator" storekit2 "$dir/receipt.jsonl" --form signed-transaction \
    --signing-chain "$dir/credentials/signing-chain.pem" >"$dir/signed-transaction.jsonl"
  export APPSTORE_ROOT_CERTIFICATES="$dir/credentials/root.pem" APPSTORE_BUNDLE_ID=com.example.app
  for form in receipt transaction-id signed-transaction; do
    for backend in $(bench_databases); do
      local url
      url=$(fresh_database "$backend" "$dir/$form.sqlite")
      measure "$form-$backend" "$BIN/renewal" import "$dir/$form.jsonl" --database "$url"
      python3 -c "print(f'  {$count} lines, {$(stat -c %s "$dir/$form.jsonl") / $count:.0f} bytes each: {$count / $wall:.0f} rows/s')"
      head -1 "$dir/out.$form-$backend" 2>/dev/null | sed 's/^/  /' || true
    done
  done
}

bench_import_bulk() {
  local count=${1:-100000} bytes=${2:-3000}
  python3 - "$count" "$bytes" "$dir/first.jsonl" "$dir/second.jsonl" <<'EOF'
import base64, json, os, sys
count, size = int(sys.argv[1]), int(sys.argv[2])
raw = size * 3 // 4
with open(sys.argv[3], "w") as first, open(sys.argv[4], "w") as second:
    for n in range(count):
        receipt = base64.b64encode(os.urandom(raw)).decode()
        line = {"user_id": f"user-{n}", "latest_receipt": receipt, "product_id": "com.example.pro.monthly"}
        first.write(json.dumps(line) + "\n")
        if n % 2:
            line["latest_receipt"] = base64.b64encode(os.urandom(raw)).decode()
        second.write(json.dumps(line) + "\n")
EOF
  for backend in $(bench_databases); do
    local url
    url=$(fresh_database "$backend" "$dir/bulk.sqlite")
    for step in first:first again:first half-replaced:second; do
      local label=${step%%:*} file=${step#*:}
      measure "$backend-$label" "$BIN/renewal" import "$dir/$file.jsonl" --database "$url"
      echo "  $backend $label: $count lines of $bytes-byte receipts, $(python3 -c "print(round($count / max($wall, 0.001)))") rows/s; $(head -1 "$dir/out.$backend-$label")"
    done
  done
}

# The dashboard views' example queries (docs/dashboards.md), one per line.
dashboard_queries() {
  cat <<'SQL'
SELECT product_id, SUM(subscribers) AS entitled FROM entitlements_by_product WHERE entitled = 1 AND environment = 'Production' GROUP BY product_id ORDER BY entitled DESC
SELECT day, kind, SUM(changes) AS changes FROM changes_per_day WHERE day >= '2026-11-01' GROUP BY day, kind ORDER BY day
SELECT state, COUNT(*) AS subscriptions, MAX(days_in_state) AS oldest_days FROM billing_backlog GROUP BY state
SELECT day, SUM(refunds) AS refunds FROM refunds_per_day GROUP BY day ORDER BY day DESC LIMIT 30
SELECT run_id, command, status, exit_code, duration_seconds, checked, failed FROM run_history ORDER BY started_at_ms DESC LIMIT 50
SELECT reason, SUM(failures) AS failures FROM failures_by_reason WHERE day >= '2026-11-01' GROUP BY reason ORDER BY failures DESC
SELECT day, notification_type, SUM(notifications) AS notifications, SUM(unmatched) AS unmatched FROM notifications_per_day WHERE environment = 'Production' GROUP BY day, notification_type ORDER BY day DESC
SELECT state, changes, oldest_age_seconds, max_attempts, avg_delivery_seconds FROM webhook_deliveries ORDER BY state
SELECT day, COUNT(*) AS conflicts FROM shared_apple_id_conflicts GROUP BY day ORDER BY day
SELECT source, environment, status, receipts, with_transaction_id, migrated FROM receipts_by_source
SELECT bundle_id AS app, product_id, environment, ownership_type, state, entitled, subscribers FROM entitlements_by_product ORDER BY bundle_id, product_id, environment, ownership_type, state
SELECT l.user_id, r.bundle_id AS app, l.product_id, l.environment, l.state, l.days_in_state FROM (SELECT * FROM (SELECT original_transaction_id, user_id, product_id, environment, state, days_in_state FROM billing_backlog WHERE expires_at_ms IS NOT NULL ORDER BY expires_at_ms LIMIT 20) AS dated UNION ALL SELECT * FROM (SELECT original_transaction_id, user_id, product_id, environment, state, days_in_state FROM billing_backlog WHERE expires_at_ms IS NULL ORDER BY since_ms NULLS LAST LIMIT 20) AS undated) AS l JOIN subscriptions s ON s.original_transaction_id = l.original_transaction_id LEFT JOIN receipts r ON r.id = s.receipt_id ORDER BY l.days_in_state DESC NULLS LAST LIMIT 20
SQL
}

# best_ms URL SQL: the fastest of three runs of SQL, in milliseconds, as psql's \timing gives them;
# "timeout" when a run takes more than BIG_QUERY_TIMEOUT seconds (default 60).
best_ms() {
  local times out
  times=$(for _ in 1 2 3; do
    if out=$(PGOPTIONS="-c statement_timeout=${BIG_QUERY_TIMEOUT:-60}s" psql -X -q -v ON_ERROR_STOP=1 -d "$1" \
      -c '\timing on' -c "$2" 2>/dev/null); then
      echo "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
    fi
  done | sort -n)
  if [ "$(echo "$times" | grep -c .)" -lt 3 ]; then echo "timeout"; else echo "$times" | head -1; fi
}

# probe_writes URL FILE: until killed, one single-row write to receipts at a time, each one's
# milliseconds (psql start included) appended to FILE; what a worker would wait meanwhile.
probe_writes() {
  local i=0 start
  while :; do
    start=$(date +%s%N)
    psql -X -q -d "$1" -c "UPDATE receipts SET updated_at = updated_at WHERE id = $((i % 1000 + 1))" >/dev/null 2>&1 || true
    echo $((($(date +%s%N) - start) / 1000000)) >>"$2"
    i=$((i + 1))
  done
}

bench_big() {
  local count=${1:-10000000} receipt_rows=${2:-2000000}
  : "${RENEWAL_BENCH_POSTGRES_URL:?set RENEWAL_BENCH_POSTGRES_URL to a PostgreSQL database the benchmark may wipe}"
  local url=$RENEWAL_BENCH_POSTGRES_URL
  if [ "${BIG_REUSE:-0}" = 1 ]; then
    echo "big: reusing the generated database; migrating it to this build's schema, one write probe alongside"
    probe_writes "$url" "$dir/probe.ms" &
    local probe=$!
    sleep 2
    measure "migrate" "$BIN/renewal" migrate --database "$url"
    sleep 2
    kill "$probe" 2>/dev/null || true
    wait "$probe" 2>/dev/null || true
    echo "  migrate: $(tail -n 1 "$dir/out.migrate")"
    python3 - "$dir/probe.ms" <<'EOF'
import sys
ms = sorted(int(line) for line in open(sys.argv[1]) if line.strip())
print(f"  writes meanwhile: {len(ms)}, median {ms[len(ms) // 2]} ms, longest {ms[-1]} ms")
EOF
  else
    fresh_database postgres "" >/dev/null
    echo "big: generating $count subscribers ($receipt_rows with a 3,000-character receipt)"
    measure "generate" psql -X -q -d "$url" -v subscribers="$count" -v receipt_rows="$receipt_rows" \
      -v now_ms="$(date +%s000)" -v days=30 -f Scripts/generate-subscribers.sql
    # From schema 11 on, the summaries' triggers counted every generated row; migrate folds the deltas.
    measure "fold-summaries" "$BIN/renewal" migrate --database "$url"
  fi
  psql -X -d "$url" -c "SELECT relname AS table, reltuples::bigint AS rows,
      pg_size_pretty(pg_total_relation_size(oid)) AS size FROM pg_class
      WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace AND reltuples > 1000
      ORDER BY pg_total_relation_size(oid) DESC"
  # The claim a worker makes: 200 due rows (the run's page), leased, in a transaction rolled back.
  local now_ms
  now_ms=$(date +%s000)
  echo "  claim of 200 due rows:"
  psql -X -q -d "$url" -c "BEGIN" -c "EXPLAIN (ANALYZE, COSTS OFF) UPDATE receipts SET lease_owner = 'bench', lease_expires_at = $now_ms + 600000
      WHERE id IN (SELECT r.id FROM receipts r WHERE r.next_check_at <= $now_ms
                   AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= $now_ms)
                   ORDER BY r.next_check_at, r.id LIMIT 200 FOR UPDATE SKIP LOCKED)
      RETURNING id, user_id, latest_receipt" -c "ROLLBACK" | grep -E "Execution Time|Index" | sed 's/^ */    /'
  local uid="user-$((count / 2 + 7))"
  measure "status-user" "$BIN/renewal" status --user "$uid" --json --database "$url"
  echo "  status --user $uid: ${wall} s (process start included), $(grep -c '"user_id"' "$dir/out.status-user") row(s)"
  measure "report-day" "$BIN/renewal" report --since "$(date -u -d '1 day ago' +%Y-%m-%dT%H:%M:%SZ)" \
    --format jsonl --output "$dir/day.jsonl" --database "$url"
  echo "  report of the last day (jsonl): ${wall} s, $(wc -l <"$dir/day.jsonl") lines"
  echo "  dashboard example queries (best of 3, ms):"
  while IFS= read -r query; do
    printf '    %8s  %s\n' "$(best_ms "$url" "$query")" "${query:0:110}"
  done < <(dashboard_queries)
}

case $mode in
  verify) bench_verify "$@" ;;
  scale) bench_scale "$@" ;;
  workers) bench_workers "$@" ;;
  import-forms) bench_import_forms "$@" ;;
  import-bulk) bench_import_bulk "$@" ;;
  big) bench_big "$@" ;;
  webhooks) "$BIN/renewal-bench" webhooks --changes "${1:-2000}" --latency-ms "${2:-50}" --concurrency "${3:-8,32}" ;;
  month) "$BIN/renewal-bench" month --subscribers "${1:-1000}" --days "${2:-30}" --interval-minutes "${3:-30}" "${@:4}" ;;
  jws) ${JOB_CPUS:+taskset -c "$JOB_CPUS"} "$BIN/appstore-simulator" bench-jws --count "${1:-20000}" ;;
  *) echo "usage: Scripts/bench.sh verify|scale|workers|import-forms|jws [args]" >&2; exit 64 ;;
esac
