import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// Storage answers "was the feed alive since T" and falls back to polling exactly as Core's
/// `FeedActivityWindow` and `PollingFallback` say, row by row, on both databases.
@Suite("Feed silence in storage: activity and the polling fallback as Core decides, on SQLite and PostgreSQL")
struct FeedSilenceStoreTests {
    typealias Backend = StoreBackend

    static let since = Date(timeIntervalSince1970: 1_800_000_000)
    static func ms(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    @Test("a change shows activity exactly when Core's window says so", arguments: Backend.available)
    func activity(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            let offsets: [TimeInterval?] = [-1, 0, 1, nil]
            let kinds: [SubscriptionEvent.Kind] = [.renewed, .billingRecovered, .expired]
            let window = FeedActivityWindow(since: Self.since)
            var cases = 0
            for kind in kinds {
                for occurred in offsets.compactMap({ $0 }) {
                    for old in offsets {
                        try await store.run("DELETE FROM entitlement_changes")
                        let occurredAt = Self.since.addingTimeInterval(occurred)
                        let oldExpiresAt = old.map(Self.since.addingTimeInterval)
                        try await store.run(
                            """
                            INSERT INTO entitlement_changes (user_id, kind, from_state, to_state, old_expires_at,
                                environment, occurred_at)
                            VALUES ('u', '\(kind.rawValue)', 'active', 'active',
                                \(oldExpiresAt.map { String(Self.ms($0)) } ?? "NULL"), 'Production',
                                \(Self.ms(occurredAt)))
                            """)
                        let activity = try await store.feedActivity(environment: .production, since: Self.since)
                        let expected = window.renewed(kind: kind, occurredAt: occurredAt, oldExpiresAt: oldExpiresAt)
                        #expect(activity.renewed == expected, "\(kind) \(occurred) \(String(describing: old))")
                        cases += expected ? 1 : 0
                    }
                }
            }
            #expect(cases > 0)
            for signed in [-1, 0, 1] as [TimeInterval] {
                try await store.run("DELETE FROM feed_notifications")
                let signedAt = Self.since.addingTimeInterval(signed)
                try await store.run(
                    """
                    INSERT INTO feed_notifications (notification_uuid, environment, notification_type, signed_at,
                        received_at)
                    VALUES ('n\(Int(signed))', 'Production', 'DID_RENEW', \(Self.ms(signedAt)), 0)
                    """)
                let activity = try await store.feedActivity(environment: .production, since: Self.since)
                #expect(activity.notified == window.notified(signedAt: signedAt), "signed \(signed)")
            }
        }
    }

    @Test("falling back moves each check to Core's PollingFallback.nextCheck", arguments: Backend.available)
    func fallback(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            let scheduled = Self.since
            let pollings: [TimeInterval?] = [-60, 0, 60, nil]
            for (index, polling) in pollings.enumerated() {
                let pollingMs = polling.map { String(Self.ms(scheduled.addingTimeInterval($0))) } ?? "NULL"
                try await store.run(
                    """
                    INSERT INTO receipts (id, user_id, latest_receipt, status, environment, next_check_at,
                        polling_check_at, created_at, updated_at)
                    VALUES (\(index + 1), 'u\(index)', 'r', 'verified', 'Production', \(Self.ms(scheduled)),
                        \(pollingMs), 0, 0)
                    """)
                try await store.run(
                    """
                    INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, state, entitled,
                        next_check_at, updated_at)
                    VALUES ('s\(index)', \(index + 1), 'u\(index)', 'active', 1, \(Self.ms(scheduled)), 0)
                    """)
            }
            let moved = try await store.fallBackToPolling(environment: .production)
            #expect(moved == pollings.filter { $0 != nil }.count)
            for (index, polling) in pollings.enumerated() {
                let expected = PollingFallback.nextCheck(
                    scheduled: scheduled, polling: polling.map(scheduled.addingTimeInterval))
                let receipt = try await store.int64(
                    "SELECT next_check_at AS v FROM receipts WHERE id = \(index + 1)")
                let subscription = try await store.int64(
                    "SELECT next_check_at AS v FROM subscriptions WHERE original_transaction_id = 's\(index)'")
                #expect(receipt == Self.ms(expected), "receipt, polling \(String(describing: polling))")
                #expect(subscription == Self.ms(expected), "subscription, polling \(String(describing: polling))")
            }
            #expect(try await store.int64("SELECT COUNT(*) AS v FROM receipts WHERE polling_check_at IS NOT NULL") == 0)
        }
    }
}

extension SQLSubscriptionStore {
    func int64(_ sql: String) async throws -> Int64? {
        try await database.withConnection { try $0.execute(sql, []).first?.optionalInt64("v") }
    }
}
