#!/bin/bash
# The ten-million-subscription ledger of BENCHMARKS.md (about 125 million transactions, 33 GB), for
# PostgreSQL: Benchmarks/analytics/ledger-10m.postgres.sh postgresql://…/DB, after renewal migrate on DB.
# Loads a million subscriptions a batch (BATCHES=10 of BATCH_SUBSCRIPTIONS=1000000) with the ledger's
# indexes dropped, then builds them again.
set -euo pipefail
url=${1:?usage: ledger-10m.postgres.sh DATABASE_URL}
export PGOPTIONS='-c maintenance_work_mem=2GB'
psql=(psql "$url" -v ON_ERROR_STOP=1 -q)
"${psql[@]}" -c "ALTER TABLE transactions DROP CONSTRAINT transactions_pkey" \
  -c "DROP INDEX transactions_purchased_at_idx" -c "DROP INDEX transactions_subscription_idx"
head=$(sed -n '/^INSERT INTO transactions/,/^  CASE WHEN j = 0 THEN/p' "$(dirname "$0")/ledger.postgres.sql" \
  | sed 's/- 400 \* 86400000/- 1070 * 86400000/g')
batch=${BATCH_SUBSCRIPTIONS:-1000000}
for k in $(seq 0 $((${BATCHES:-10} - 1))); do
  lo=$((k * batch)); hi=$((lo + batch - 1))
  printf '%s\nFROM generate_series(%d, %d) i, generate_series(0, 23) j WHERE j < 1 + (i * 7 %% 24);\n' \
    "$head" "$lo" "$hi" | "${psql[@]}"
  echo "batch $k loaded"
done
"${psql[@]}" -c "ALTER TABLE transactions ADD PRIMARY KEY (transaction_id)" \
  -c "CREATE INDEX transactions_purchased_at_idx ON transactions (purchased_at)" \
  -c "CREATE INDEX transactions_subscription_idx ON transactions (original_transaction_id, purchased_at)" \
  -c "ANALYZE transactions"
