import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

/// The simulator's `grace_period_recovery`: a grace period that ends early because billing recovered, as
/// the job reads it from verifyReceipt and from the Server API and its change feed.
@Suite("Grace period ended early by a billing recovery, through verifyReceipt and the Server API feed")
struct GraceRecoveryTests {
    static let day: TimeInterval = 86_400

    enum Source: String, CaseIterable, CustomStringConvertible, Sendable {
        case verifyReceipt, feed
        var description: String { rawValue }
    }

    @Test(
        """
        a renewal fails into a 16-day grace period and Apple collects the payment on day 5: in the grace period the \
        row is in grace until Apple's grace end; after the recovery it is active with the renewal date kept, the \
        grace period is one fact with Apple's grace end, and the window around it counts no churn and no \
        reactivation; the feed lists DID_FAIL_TO_RENEW (GRACE_PERIOD) then DID_RENEW (BILLING_RECOVERY)
        """,
        arguments: Backend.available, Source.allCases)
    func recoveryEndsTheGracePeriod(backend: Backend, source: Source) async throws {
        try await JobHarness.with(backend) { h in
            let receipt = h.receipt("recovering", .gracePeriodRecovery, daysAgo: 28)
            let failure = receipt.start.addingTimeInterval(30 * Self.day)
            try await h.importReceipts([("recovering", receipt)])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                func check() async throws {
                    if source == .feed {
                        _ = try await h.run(.run, verifier: router) { $0.feed = client }
                    } else {
                        _ = try await h.run(.backfill(BackfillSelector(all: true)))
                    }
                }
                try await check()
                #expect(try await h.status(user: "recovering").first?.state == .active)

                h.state.set(failure.addingTimeInterval(Self.day))
                try await check()
                let inGrace = try #require(try await h.status(user: "recovering").first)
                #expect(inGrace.state == .gracePeriod, "\(inGrace)")
                #expect(inGrace.gracePeriodExpiresAt == failure.addingTimeInterval(16 * Self.day))

                h.state.set(failure.addingTimeInterval(6 * Self.day))
                try await check()
                let recovered = try #require(try await h.status(user: "recovering").first)
                #expect(recovered.state == .active && recovered.gracePeriodExpiresAt == nil, "\(recovered)")
                #expect(recovered.expiresAt == failure.addingTimeInterval(30 * Self.day), "the renewal date is kept")
                // The feed variant asked the Server API (status and signed renewal info), not verifyReceipt alone.
                if source == .feed { #expect(h.state.serverAPIRequests(account: receipt.account) > 0) }
            }
            let ledger = try await ClosedWindowTests.ledger(h, "recovering")
            let grace = ledger.facts.filter { $0.kind == .gracePeriod }
            #expect(grace.count == 1 && grace.first?.endsAt == failure.addingTimeInterval(16 * Self.day), "\(grace)")
            #expect(ledger.transactions.contains { $0.purchasedAt == failure.addingTimeInterval(5 * Self.day) })
            let window = try await ClosedWindowTests.figures(
                h, since: failure.addingTimeInterval(-Self.day), until: failure.addingTimeInterval(3 * Self.day))
            #expect(window.activeSubscriptions == 1 && window.churned == 0 && window.reactivations == 0)
            let kinds = receipt.notifications(until: h.state.now).map {
                [$0.type, $0.subtype].compactMap { $0 }.joined(separator: "/")
            }
            #expect(
                kinds == ["SUBSCRIBED/INITIAL_BUY", "DID_FAIL_TO_RENEW/GRACE_PERIOD", "DID_RENEW/BILLING_RECOVERY"])
        }
    }
}
