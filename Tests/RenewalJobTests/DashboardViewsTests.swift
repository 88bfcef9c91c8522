import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalJob
import RenewalPostgres
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

@Suite("Dashboard views agree with the data on both backends")
struct DashboardViewsTests {
    /// Runs `sql` on the harness's database, whichever backend it is.
    static func query(_ h: JobHarness, _ sql: String) async throws -> [SQLRow] {
        if let store = h.store as? SQLiteSubscriptionStore {
            return try await store.database.withConnection { try $0.execute(sql, []) }
        }
        let store = try #require(h.store as? PostgresSubscriptionStore)
        return try await store.database.withConnection { try $0.execute(sql, []) }
    }

    static func int(_ row: SQLRow, _ column: String) -> Int? {
        switch row[column] {
        case .int64(let value): return Int(value)
        case .double(let value): return Int(value)
        case .text(let text): return Int(text) ?? Double(text).map { Int($0) }
        default: return nil
        }
    }

    static func double(_ row: SQLRow, _ column: String) -> Double? {
        switch row[column] {
        case .int64(let value): return Double(value)
        case .double(let value): return value
        case .text(let text): return Double(text)
        default: return nil
        }
    }

    static func text(_ row: SQLRow, _ column: String) -> String? {
        if case .text(let text) = row[column] { return text }
        return nil
    }

    @Test(
        """
        Seven views over a run with renewals, billing retry, grace period, a refund, family sharing, sandbox, an \
        outage and a shared Apple ID
        """,
        arguments: Backend.available)
    func viewsMatchTheRun(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let shared = h.receipt("payer", .renewal, daysAgo: 40)
            try await h.importReceipts([
                ("payer", shared), ("payer-2", shared),
                ("retry", h.receipt("retry", .billingRetry, daysAgo: 33)),
                ("grace", h.receipt("grace", .gracePeriod, daysAgo: 2)),
                ("refund", h.receipt("refund", .refund, daysAgo: 20)),
                ("family", h.receipt("family", .familyShared, daysAgo: 5)),
                ("tester", h.receipt("tester", .sandbox, daysAgo: 5)),
                ("down", h.receipt("down", .outage, daysAgo: 5)),
            ])
            // Two runs 30 days apart: the refund lands between them, everything else moves on.
            let first = try await h.run()
            h.state.advance(by: 30 * 86_400)
            let outcome = try await h.run()
            let history = try #require(h.store as? any RunHistoryStore)
            let changes = try await history.changes(ofRun: first.runID) + history.changes(ofRun: outcome.runID)
            let status = try await h.status()

            // entitlements_by_product: the status rows, grouped.
            var expected: [String: Int] = [:]
            // Subscriptions only: a receipt without one (the shared Apple ID's second user) has a placeholder status
            // row.
            for row in status where row.state != .unverified && !(row.originalTransactionID ?? "").isEmpty {
                expected[
                    "\(row.productID ?? "-")|\(row.environment?.rawValue ?? "-")|\(row.ownershipType ?? "PURCHASED")|\(row.state.rawValue)",
                    default: 0] += 1
            }
            var seen: [String: Int] = [:]
            for row in try await Self.query(h, "SELECT * FROM entitlements_by_product") {
                let state = Self.text(row, "state") ?? "-"
                guard state != "unverified" else { continue }
                let key =
                    "\(Self.text(row, "product_id") ?? "-")|\(Self.text(row, "environment") ?? "-")|\(Self.text(row, "ownership_type") ?? "-")|\(state)"
                seen[key] = Self.int(row, "subscribers")
                #expect(
                    Self.int(row, "entitled") == (SubscriptionState(rawValue: state)?.grantsAccess == true ? 1 : 0),
                    "\(key)")
            }
            #expect(seen == expected)
            #expect(seen.keys.contains { $0.contains("|FAMILY_SHARED|") }, "family sharing apart: \(seen)")
            #expect(seen.keys.contains { $0.contains("|Sandbox|") }, "sandbox apart: \(seen)")

            // changes_per_day and refunds_per_day: the run's changes, counted.
            var kinds: [String: Int] = [:]
            for change in changes { kinds[change.event.kind.rawValue, default: 0] += 1 }
            var perKind: [String: Int] = [:]
            for row in try await Self.query(h, "SELECT kind, SUM(changes) AS n FROM changes_per_day GROUP BY kind") {
                perKind[Self.text(row, "kind") ?? "-"] = Self.int(row, "n")
            }
            #expect(perKind == kinds)
            let days = Set(
                try await Self.query(h, "SELECT day FROM changes_per_day").compactMap { Self.text($0, "day") })
            #expect(
                days == Set(changes.map { String(Timestamp.string($0.occurredAt).prefix(10)) }),
                "day is the UTC date of the change")
            #expect(days.count == 2)
            let refunds = try await Self.query(h, "SELECT SUM(refunds) AS n FROM refunds_per_day")
            #expect(refunds.first.flatMap { Self.int($0, "n") } == kinds["refunded"], "refunds: \(kinds)")
            #expect(kinds["refunded", default: 0] >= 1)

            // billing_backlog: every subscription in billing retry or grace, since its expiry.
            let backlog = try await Self.query(h, "SELECT * FROM billing_backlog ORDER BY user_id")
            let inBacklog = status.filter { $0.state == .billingRetry || $0.state == .gracePeriod }
            #expect(backlog.map { Self.text($0, "user_id") ?? "" } == inBacklog.map(\.userID).sorted())
            #expect(
                Set(inBacklog.map(\.state)) == [.billingRetry, .gracePeriod],
                "the scenarios give both: \(status.map { "\($0.userID) \($0.state)" })")
            for row in backlog {
                let user = Self.text(row, "user_id") ?? ""
                let expiry = try #require(status.first { $0.userID == user }?.expiresAt)
                #expect(Self.int(row, "since_ms") == Int(AppleDateFormat.milliseconds(expiry)), "\(user)")
                let days = try #require(Self.double(row, "days_in_state"))
                #expect(abs(days - Date().timeIntervalSince(expiry) / 86_400) < 0.01, "\(user): \(days) days")
            }

            // run_history: the run row, with its duration.
            let runs = try await Self.query(h, "SELECT * FROM run_history ORDER BY started_at_ms")
            #expect(runs.map { Self.text($0, "run_id") } == [first.runID, outcome.runID])
            let run = try #require(runs.last)
            #expect(Self.text(run, "run_id") == outcome.runID)
            #expect(Self.int(run, "checked") == outcome.counts.checked)
            #expect(Self.int(run, "changed") == outcome.counts.changed)
            #expect(Self.int(run, "exit_code") == Int(outcome.status.exitCode))
            #expect((Self.double(run, "duration_seconds") ?? -1) >= 0)

            // failures_by_reason: the outage.
            let failures = try await Self.query(h, "SELECT * FROM failures_by_reason")
            #expect(Set(failures.map { Self.text($0, "reason") ?? "" }) == ["http_503"])
            #expect(
                failures.compactMap { Self.int($0, "failures") }.reduce(0, +) == first.counts.failed
                    + outcome.counts.failed)
            #expect(failures.allSatisfy { Self.int($0, "receipts") == 1 })

            // shared_apple_id_conflicts: the second user of the same receipt.
            let conflicts = try await Self.query(h, "SELECT * FROM shared_apple_id_conflicts")
            #expect(conflicts.count == first.counts.conflicts + outcome.counts.conflicts)
            #expect(conflicts.first.flatMap { Self.text($0, "owner_user_id") } == "payer")
            #expect(conflicts.first.flatMap { Self.text($0, "claimant_user_id") } == "payer-2")
            #expect(conflicts.first.flatMap { Self.text($0, "run_id") } == first.runID)
        }
    }

    /// Claims three queued deliveries (one per user) and records them three ways: the first
    /// delivered 90 s after it was queued, the second to be retried, the third given up.
    static func deliverThreeWays(_ outbox: any WebhookOutboxStore, now: Date) async throws {
        let claimed = try await outbox.claimDeliveries(
            owner: "w", now: now, leaseExpiresAt: now.addingTimeInterval(60), limit: 3)
        try #require(claimed.count == 3)
        try await outbox.recordDeliveries(
            [
                DeliveryRecord(
                    changeID: claimed[0].changeID, outcome: .delivered,
                    at: claimed[0].createdAt.addingTimeInterval(90)),
                DeliveryRecord(
                    changeID: claimed[1].changeID,
                    outcome: .retry(error: "HTTP 500", next: now.addingTimeInterval(30)), at: now),
                DeliveryRecord(changeID: claimed[2].changeID, outcome: .failed(error: "gave up"), at: now),
            ], owner: "w")
    }

    @Test(
        "webhook_deliveries: the outbox by state after a run that queued changes and deliveries that went three ways",
        arguments: Backend.available)
    func webhookDeliveriesView(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([
                ("renew", h.receipt("renew", .renewal, daysAgo: 40)),
                ("refund", h.receipt("refund", .refund, daysAgo: 20)),
                ("retry", h.receipt("retry", .billingRetry, daysAgo: 33)),
                ("grace", h.receipt("grace", .gracePeriod, daysAgo: 2)),
            ])
            let first = try await h.run { $0.queueWebhooks = true }
            h.state.advance(by: 30 * 86_400)
            let second = try await h.run { $0.queueWebhooks = true }
            let queued = first.counts.changed + second.counts.changed
            #expect(queued >= 4, "the scenarios change something: \(queued)")
            let outbox = try #require(h.store as? any WebhookOutboxStore)

            func states() async throws -> [String: SQLRow] {
                var byState: [String: SQLRow] = [:]
                for row in try await Self.query(h, "SELECT * FROM webhook_deliveries") {
                    byState[Self.text(row, "state") ?? "-"] = row
                }
                return byState
            }
            var view = try await states()
            #expect(Set(view.keys) == ["queued"])
            #expect(view["queued"].flatMap { Self.int($0, "changes") } == queued)
            #expect(view["queued"].flatMap { Self.int($0, "max_attempts") } == 0)
            #expect((view["queued"].flatMap { Self.double($0, "oldest_age_seconds") } ?? -1) >= 0)

            // One per user is claimed; the first delivered 90 s after it was queued, the second retried, the
            // third given up; the fourth user's change stays queued.
            let now = Date()
            try await Self.deliverThreeWays(outbox, now: now)
            view = try await states()
            let status = try await outbox.deliveryStatus(now: now)
            #expect(Set(view.keys) == ["queued", "retrying", "delivered", "failed"], "\(view.keys)")
            #expect(view["delivered"].flatMap { Self.int($0, "changes") } == status.delivered)
            #expect(view["failed"].flatMap { Self.int($0, "changes") } == status.failed)
            #expect(
                (view["queued"].flatMap { Self.int($0, "changes") } ?? 0)
                    + (view["retrying"].flatMap { Self.int($0, "changes") } ?? 0) == status.pending)
            #expect(view["retrying"].flatMap { Self.int($0, "max_attempts") } == 1)
            #expect(view["delivered"].flatMap { Self.double($0, "avg_delivery_seconds") } == 90)
            #expect(view["delivered"].flatMap { Self.double($0, "max_delivery_seconds") } == 90)
            #expect(view["delivered"].flatMap { Self.double($0, "oldest_age_seconds") } == nil)
            let oldest = try #require(status.oldestPendingSince)
            let pendingOldest = [view["queued"], view["retrying"]].compactMap { $0 }.compactMap {
                Self.int($0, "oldest_queued_at_ms")
            }.min()
            #expect(pendingOldest == Int(AppleDateFormat.milliseconds(oldest)))
        }
    }
}
