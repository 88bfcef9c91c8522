-- Fills a migrated, empty PostgreSQL database with a generated subscriber population for the scale
-- benchmark (Scripts/bench.sh big). psql variables:
--   subscribers   rows in `receipts`, one subscription each for the verified ones
--   receipt_rows  how many of them hold a 3,000-character receipt (the rest are StoreKit 2 rows:
--                 a transaction id and no receipt)
--   now_ms        the benchmark's "now", epoch milliseconds
--   days          days of history: changes, failures, notifications and runs
-- The mix: 2 apps (70 % / 30 %), 6 products, 99 % Production; receipts 97 % verified, 2 % unverified,
-- 1 % invalid; subscriptions 76 % active, 15 % expired, 3 % billing retry, 2 % grace period, 4 %
-- revoked; 5 % family shared; about 1 % of receipts due now, the rest spread over the next 30 days.
-- Each day: changes for 1 % of subscribers (each sent as a webhook), failures for 0.05 %,
-- notifications for 0.5 %, 48 runs.
\set ON_ERROR_STOP on
SET synchronous_commit = off;

-- 1,000 receipts of 3,000 random base64 characters; each row gets one with its own prefix, so no two
-- rows hold the same value and TOAST compresses each as it would a real receipt (hardly at all).
CREATE TEMP TABLE receipt_pool AS
SELECT k, replace(encode(decode(string_agg(md5(k || '-' || j), '' ORDER BY j), 'hex'), 'base64'), E'\n', '') AS body
FROM generate_series(0, 999) k, generate_series(1, 141) j
GROUP BY k;

INSERT INTO receipts (
    user_id, latest_receipt, imported_product_id, status, environment, next_check_at, last_checked_at,
    last_verified_at, consecutive_failures, last_failure_reason, created_at, updated_at, source,
    original_transaction_id, migrated_at, bundle_id)
SELECT 'user-' || i,
       CASE WHEN i <= :receipt_rows THEN 'r' || i || (SELECT body FROM receipt_pool WHERE k = i % 1000) ELSE '' END,
       'com.example.' || (ARRAY['pro.monthly', 'pro.yearly', 'basic.monthly', 'basic.yearly', 'family.monthly',
                                'family.yearly'])[1 + i % 6],
       CASE WHEN i % 100 < 97 THEN 'verified' WHEN i % 100 < 99 THEN 'unverified' ELSE 'invalid' END,
       CASE WHEN i % 100 = 37 THEN 'Sandbox' ELSE 'Production' END,
       CASE WHEN i % 100 = 11 THEN :now_ms - 3600000
            ELSE :now_ms + (i * 7919 % 30 + 1) * 86400000::bigint - (i % 86400) * 1000 END,
       :now_ms - (i % 86400) * 1000,
       CASE WHEN i % 100 < 97 THEN :now_ms - (i % 86400) * 1000 END,
       CASE WHEN i % 2000 = 5 THEN 1 ELSE 0 END,
       CASE WHEN i % 2000 = 5 THEN 'apple_unavailable' END,
       :now_ms - 400 * 86400000::bigint, :now_ms - (i % 86400) * 1000,
       CASE WHEN i % 100 >= 97 AND i % 100 < 99 THEN NULL
            WHEN i <= :receipt_rows AND i % 2 = 0 THEN 'verify_receipt' ELSE 'server_api' END,
       CASE WHEN i % 100 < 97 OR i > :receipt_rows THEN (1000000000000 + i)::text END,
       CASE WHEN i <= :receipt_rows AND i % 2 = 1 AND i % 100 < 97
            THEN :now_ms - (i % (:days * 86400)) * 1000 END,
       CASE WHEN i % 10 < 7 THEN 'com.example.app' ELSE 'com.example.mac' END
FROM generate_series(1::bigint, :subscribers) i;

INSERT INTO subscriptions (
    original_transaction_id, receipt_id, user_id, product_id, state, entitled, expires_at, auto_renew,
    grace_period_expires_at, billing_retry, cancelled_at, ownership_type, environment, latest_transaction_id,
    subscription_group_id, last_verified_at, next_check_at, updated_at)
SELECT r.original_transaction_id, r.id, r.user_id, r.imported_product_id, g.state,
       CASE WHEN g.state IN ('active', 'grace_period') THEN 1 ELSE 0 END,
       CASE WHEN g.state IN ('active') THEN r.next_check_at + 86400000
            WHEN r.id % 500 = 3 THEN NULL
            ELSE :now_ms - (r.id % (:days * 86400)) * 1000 END,
       CASE WHEN g.state = 'active' AND r.id % 10 <> 0 THEN 1 ELSE 0 END,
       CASE WHEN g.state = 'grace_period' THEN :now_ms + (r.id % 16) * 86400000::bigint END,
       CASE WHEN g.state IN ('billing_retry', 'grace_period') THEN 1 ELSE 0 END,
       CASE WHEN g.state = 'revoked' THEN :now_ms - (r.id % (:days * 86400)) * 1000 END,
       CASE WHEN r.id % 20 = 7 THEN 'FAMILY_SHARED' ELSE 'PURCHASED' END,
       r.environment, (2000000000000 + r.id)::text, '20000001', r.last_verified_at, r.next_check_at, r.updated_at
FROM receipts r
CROSS JOIN LATERAL (
    SELECT CASE WHEN r.id * 31 % 100 < 76 THEN 'active' WHEN r.id * 31 % 100 < 91 THEN 'expired'
                WHEN r.id * 31 % 100 < 94 THEN 'billing_retry' WHEN r.id * 31 % 100 < 96 THEN 'grace_period'
                ELSE 'revoked' END AS state
) g
WHERE r.status = 'verified';

INSERT INTO runs (id, command, started_at, finished_at, status, exit_code, checked, changed, unchanged, failed,
                  host, process_id, worker_id, due_at_start)
SELECT 'run-' || n, 'run', :now_ms - n * 1800000::bigint, :now_ms - n * 1800000::bigint + 240000, 'completed', 0,
       :subscribers / 1440, :subscribers / 144000, :subscribers / 1440 - :subscribers / 144000, 0, 'bench', 1,
       'worker-' || n, :subscribers / 1440
FROM generate_series(1::bigint, :days * 48) n;

-- A day's changes: 1 % of subscribers, the kinds in rough proportion, each in that day's run.
INSERT INTO entitlement_changes (
    run_id, user_id, original_transaction_id, product_id, kind, from_state, to_state, old_expires_at,
    new_expires_at, environment, ownership_type, occurred_at, source, bundle_id)
SELECT 'run-' || (1 + c % (:days * 48)), 'user-' || u, (1000000000000 + u)::text,
       'com.example.' || (ARRAY['pro.monthly', 'pro.yearly', 'basic.monthly', 'basic.yearly', 'family.monthly',
                                'family.yearly'])[1 + u % 6],
       k.kind, k.from_state, k.to_state, t - 2592000000, t, 'Production', 'PURCHASED', t,
       CASE WHEN c % 2 = 0 THEN 'server_api' ELSE 'verify_receipt' END,
       CASE WHEN u % 10 < 7 THEN 'com.example.app' ELSE 'com.example.mac' END
FROM generate_series(1::bigint, :subscribers / 100 * :days) c
CROSS JOIN LATERAL (SELECT 1 + (c * 7907) % :subscribers AS u,
                           :now_ms - (c % (:days * 86400)) * 1000::bigint AS t) p
CROSS JOIN LATERAL (
    SELECT (ARRAY['renewed', 'renewed', 'renewed', 'renewed', 'expired', 'billing_issue', 'grace_period_started',
                  'billing_recovered', 'auto_renew_disabled', 'refunded'])[1 + c % 10] AS kind,
           (ARRAY['active', 'active', 'active', 'active', 'active', 'active', 'active', 'billing_retry',
                  'active', 'active'])[1 + c % 10] AS from_state,
           (ARRAY['active', 'active', 'active', 'active', 'expired', 'billing_retry', 'grace_period', 'active',
                  'active', 'revoked'])[1 + c % 10] AS to_state
) k;

INSERT INTO run_failures (run_id, receipt_id, user_id, reason, message, occurred_at, bundle_id)
SELECT 'run-' || (1 + f % (:days * 48)), 1 + (f * 7901) % :subscribers, 'user-' || (1 + (f * 7901) % :subscribers),
       (ARRAY['apple_unavailable', 'timeout', 'malformed_response', 'rejected'])[1 + f % 4],
       'generated failure', :now_ms - (f % (:days * 86400)) * 1000::bigint,
       CASE WHEN f % 10 < 7 THEN 'com.example.app' ELSE 'com.example.mac' END
FROM generate_series(1::bigint, :subscribers / 2000 * :days) f;

INSERT INTO feed_notifications (notification_uuid, environment, notification_type, subtype, original_transaction_id,
                                receipt_id, signed_at, received_at, run_id, bundle_id)
SELECT 'n-' || n, 'Production',
       (ARRAY['DID_RENEW', 'DID_RENEW', 'DID_CHANGE_RENEWAL_STATUS', 'DID_FAIL_TO_RENEW', 'EXPIRED', 'REFUND'])[1 + n % 6],
       (ARRAY[NULL, 'BILLING_RECOVERY', 'AUTO_RENEW_DISABLED', 'GRACE_PERIOD', 'VOLUNTARY', NULL])[1 + n % 6],
       (1000000000000 + 1 + (n * 7883) % :subscribers)::text,
       CASE WHEN n % 50 = 0 THEN NULL ELSE 1 + (n * 7883) % :subscribers END,
       :now_ms - (n % (:days * 86400)) * 1000::bigint, :now_ms - (n % (:days * 86400)) * 1000::bigint + 5000,
       'run-' || (1 + n % (:days * 48)),
       CASE WHEN n % 10 < 7 THEN 'com.example.app' ELSE 'com.example.mac' END
FROM generate_series(1::bigint, :subscribers / 200 * :days) n;

-- Every change went out as a webhook: delivered two seconds later, one in a thousand given up, the
-- last ten minutes' still queued.
INSERT INTO webhook_outbox (change_id, user_id, created_at, attempts, next_attempt_at, last_attempt_at, delivered_at,
                            failed_at)
SELECT id, user_id, occurred_at, CASE WHEN occurred_at > :now_ms - 600000 THEN 0 ELSE 1 END, occurred_at,
       CASE WHEN occurred_at <= :now_ms - 600000 THEN occurred_at + 2000 END,
       CASE WHEN occurred_at <= :now_ms - 600000 AND id % 1000 <> 0 THEN occurred_at + 2000 END,
       CASE WHEN occurred_at <= :now_ms - 600000 AND id % 1000 = 0 THEN occurred_at + 2000 END
FROM entitlement_changes;

DROP TABLE receipt_pool;
VACUUM ANALYZE;
