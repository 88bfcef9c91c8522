-- A generated transaction ledger for the analytics benchmark (BENCHMARKS.md, "Subscription analytics"), SQLite.
-- sqlite3 DB < Benchmarks/analytics/ledger.sqlite.sql after renewal migrate --database DB; change 199999 for another size.
WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 199999),
k(j) AS (SELECT 0 UNION ALL SELECT j+1 FROM k WHERE j < 11)
INSERT INTO transactions (transaction_id, original_transaction_id, user_id, bundle_id, product_id, environment,
  ownership_type, purchased_at, expires_at, price_milliunits, currency, is_trial, quantity, revoked_at, transaction_reason,
  upgraded, origin, recorded_at, updated_at)
SELECT 'tx-' || i || '-' || j, 'ot-' || printf('%08d', i), 'u-' || i, 'com.example.app',
  CASE i % 3 WHEN 0 THEN 'p.monthly' WHEN 1 THEN 'p.monthly.eu' ELSE 'p.weekly' END,
  CASE WHEN i % 50 = 0 THEN 'Sandbox' ELSE 'Production' END, 'PURCHASED',
  1764547200000 - 400 * 86400000 + (i % 380) * 86400000 + j * 30 * 86400000,
  1764547200000 - 400 * 86400000 + (i % 380) * 86400000 + (j + 1) * 30 * 86400000,
  CASE WHEN j = 0 AND i % 4 = 0 THEN 0 ELSE 9990 END, CASE i % 3 WHEN 1 THEN 'EUR' ELSE 'USD' END,
  CASE WHEN j = 0 AND i % 4 = 0 THEN 1 ELSE 0 END, 1,
  CASE WHEN i % 97 = 0 AND j = 3 THEN 1764547200000 - 400 * 86400000 + (i % 380) * 86400000 + j * 30 * 86400000 + 86400000 ELSE NULL END,
  CASE WHEN j = 0 THEN 'PURCHASE' ELSE 'RENEWAL' END, 0, 'status_answer', 0, 0
FROM s, k WHERE j < 1 + (i * 7 % 12);
