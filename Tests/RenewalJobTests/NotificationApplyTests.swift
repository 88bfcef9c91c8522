import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalSQL
import RenewalStorage
import Testing

/// The change feed applying Apple's signed notification data on its own, on SQLite and PostgreSQL
/// against the simulator: no status request for what a notification already says.
@Suite("Change feed: notifications applied from their signed data")
struct NotificationApplyTests {
    static let day: TimeInterval = 86_400

    /// The changes recorded after `since`, oldest first, as `user:kind`.
    static func changes(_ h: JobHarness, after id: Int = 0) async throws -> [String] {
        try await DashboardViewsTests.query(
            h, "SELECT user_id, kind FROM entitlement_changes WHERE id > \(id) ORDER BY id"
        ).compactMap { row in
            guard let user = DashboardViewsTests.text(row, "user_id"), let kind = DashboardViewsTests.text(row, "kind")
            else { return nil }
            return "\(user):\(kind)"
        }
    }

    static func lastChangeID(_ h: JobHarness) async throws -> Int {
        try await DashboardViewsTests.query(h, "SELECT MAX(id) AS id FROM entitlement_changes").first.flatMap {
            DashboardViewsTests.int($0, "id")
        } ?? 0
    }

    @Test(
        """
        A renewal, a refund, a billing failure, a recovery and an auto-renew change are each applied from the \
        notification alone: the change recorded, the report lists it, not one status request after the first run
        """,
        arguments: Backend.available)
    func eachKindFromTheNotificationAlone(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([
                ("renewing", h.receipt("na-renew", .renewal, daysAgo: 25)),
                ("refunded", h.receipt("na-refund", .refund, daysAgo: 40)),
                ("failing", h.receipt("na-billing", .billingRetry, daysAgo: 25)),
                ("recovering", h.receipt("na-recover", .billingRecovery, daysAgo: 25)),
            ])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                let first = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(first.counts.checked == 4 && first.counts.failed == 0, "\(first.counts)")
                let requests = h.state.serverAPIStats.requests
                var seen = try await Self.lastChangeID(h)

                // Day 5: the renewal, the refund (with its auto-renew change) and the billing failures.
                // (The refund turns auto-renew off a second after it: the auto-renew change.)
                h.state.advance(by: 5 * Self.day + 3_600)
                let busy = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.reportPath = h.directory + "/applied.json"
                }
                #expect(busy.counts.checked == 0 && busy.counts.notificationsApplied == 5, "\(busy.counts)")
                let found = try await Self.changes(h, after: seen)
                #expect(
                    Set(found)
                        == [
                            "renewing:renewed", "refunded:refunded", "refunded:auto_renew_disabled",
                            "failing:billing_issue", "recovering:billing_issue",
                        ], "\(found)")
                let report = try h.report(busy)
                let kinds = (report["changes"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String }
                #expect(kinds.count == 5 && kinds.contains("refunded"), "\(kinds)")
                #expect((report["counts"] as? [String: Any])?["notifications_applied"] as? Int == 5)
                seen = try await Self.lastChangeID(h)

                // Day 8: the recovery.
                h.state.advance(by: 3 * Self.day)
                let recovered = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(recovered.counts.checked == 0 && recovered.counts.notificationsApplied == 1)
                #expect(try await Self.changes(h, after: seen) == ["recovering:billing_recovered"])

                #expect(h.state.serverAPIStats.requests == requests, "no status request after the first run")
                let states = try await ChangeFeedRunTests.states(h)
                #expect(
                    states == [
                        "renewing": "active", "refunded": "revoked", "failing": "billing_retry",
                        "recovering": "active",
                    ], "\(states)")
            }
        }
    }

    @Test(
        """
        A billing failure and its recovery three days later, read in one window and listed newest first, apply in \
        Apple's order: the failure, then the recovery; the state ends active
        """,
        arguments: Backend.available)
    func oneWindowInApplesOrder(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("recovering", h.receipt("nw-recover", .billingRecovery, daysAgo: 29))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let requests = h.state.serverAPIStats.requests
                let seen = try await Self.lastChangeID(h)
                h.state.feedFault = .reordered
                h.state.advance(by: 5 * Self.day)
                let run = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.feedMaximumLag = 10 * Self.day
                }
                #expect(run.counts.notificationsApplied == 2 && run.counts.checked == 0, "\(run.counts)")
                #expect(
                    try await Self.changes(h, after: seen) == [
                        "recovering:billing_issue", "recovering:billing_recovered",
                    ])
                #expect(try await ChangeFeedRunTests.states(h)["recovering"] == "active")
                #expect(h.state.serverAPIStats.requests == requests)
            }
        }
    }

    @Test(
        """
        A receipt row verifyReceipt answered, its original transaction id known, waits on the feed's schedule and \
        moves to the App Store Server API with its first notification: migrated, no status request of its own
        """,
        arguments: Backend.available)
    func migrationByTheFirstNotification(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("moving", h.receipt("nm-move", .renewal, daysAgo: 25))])
            try await h.withServerAPIClient { client in
                // As for a receipt whose transaction id the job cannot read: verifyReceipt answers first.
                let legacy = SourceRouter(mode: .verifyReceipt, verifyReceipt: h.client, serverAPI: client)
                let first = try await h.run(.run, verifier: legacy) { $0.feed = client }
                #expect(first.counts.checked == 1 && first.counts.migrated == 0, "\(first.counts)")
                var receipt = try #require(try await h.receipts().first)
                #expect(receipt.source == .verifyReceipt && receipt.originalTransactionID != nil)
                let expiry = try #require(receipt.subscriptions.first?.snapshot.expiresAt)
                #expect(receipt.nextCheckAt == expiry.addingTimeInterval(15 * 60), "the feed's schedule, not polling's")
                let verifyRequests = h.state.stats.requests

                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                h.state.advance(by: 5 * Self.day + 3_600)
                let renewed = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(renewed.counts.checked == 0 && renewed.counts.notificationsApplied == 1, "\(renewed.counts)")
                #expect(renewed.counts.migrated == 1)
                receipt = try #require(try await h.receipts().first)
                #expect(receipt.source == .serverAPI)
                #expect(receipt.subscriptions.first?.snapshot.expiresAt == expiry.addingTimeInterval(30 * Self.day))
                #expect(h.state.serverAPIRequests(account: "nm-move") == 0)
                #expect(h.state.stats.requests == verifyRequests)
            }
        }
    }
}
