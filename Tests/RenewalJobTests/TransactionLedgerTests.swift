import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalSQL
import RenewalStorage
import Testing

/// The transaction ledger (`transactions`): every Apple transaction the job sees, once, with its money
/// fields, on SQLite and PostgreSQL against the simulator.
@Suite("Transaction ledger: one row per Apple transaction, with its price, written with the answer")
struct TransactionLedgerTests {
    static let day: TimeInterval = 86_400

    struct Row: Equatable, CustomStringConvertible {
        var transactionID: String
        var price: Int?
        var currency: String?
        var origin: String
        var revoked: Bool
        var revocationType: String?

        var description: String {
            "\(transactionID) \(price.map(String.init) ?? "-") \(currency ?? "-") \(origin) "
                + (revoked ? "revoked \(revocationType ?? "-")" : "")
        }
    }

    static func ledger(_ h: JobHarness, user: String) async throws -> [Row] {
        try await DashboardViewsTests.query(
            h,
            """
            SELECT transaction_id, price_milliunits, currency, origin, revoked_at, revocation_type FROM transactions
            WHERE user_id = '\(user)' ORDER BY purchased_at, transaction_id
            """
        ).map { row in
            Row(
                transactionID: DashboardViewsTests.text(row, "transaction_id") ?? "",
                price: DashboardViewsTests.int(row, "price_milliunits"),
                currency: DashboardViewsTests.text(row, "currency"),
                origin: DashboardViewsTests.text(row, "origin") ?? "",
                revoked: DashboardViewsTests.int(row, "revoked_at") != nil,
                revocationType: DashboardViewsTests.text(row, "revocation_type"))
        }
    }

    @Test(
        """
        Status answers and notifications record each transaction once with Apple's price and currency; a renewal \
        adds its period, a refund marks the refunded one; notifications listed twice count once and a forged \
        refund never enters; verifyReceipt is asked for the whole history once, its rows recorded without a price
        """,
        arguments: Backend.available)
    func ledgerFromAnswersAndNotifications(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let renewing = h.receipt("tl-renew", .renewal, daysAgo: 25)
            try await h.importReceipts([
                ("renewing", renewing), ("refunded", h.receipt("tl-refund", .refund, daysAgo: 40)),
                ("legacy", h.receipt("tl-legacy", .renewal, daysAgo: 70)),
            ])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                // The ledger lacks the receipt's history: verifyReceipt is asked for every transaction once.
                let legacyOnly = BackfillSelector(userIDs: ["legacy"])
                _ = try await h.run(.backfill(legacyOnly), verifier: h.client)
                #expect(h.state.askedForHistory(account: "tl-legacy") == true)
                var legacy = try await Self.ledger(h, user: "legacy")
                #expect(legacy.count == 3, "three monthly periods: \(legacy)")
                #expect(legacy.allSatisfy { $0.origin == "verify_receipt" && $0.price == nil })
                _ = try await h.run(.backfill(legacyOnly), verifier: h.client)
                #expect(h.state.askedForHistory(account: "tl-legacy") == false, "the latest transactions only now")
                legacy = try await Self.ledger(h, user: "legacy")
                #expect(legacy.count == 3)

                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                var renewed = try await Self.ledger(h, user: "renewing")
                #expect(renewed.count == 1, "\(renewed)")
                #expect(renewed.first?.price == 9_990 && renewed.first?.currency == "USD")
                #expect(renewed.first?.origin == "status_answer")

                // Five days on: the renewal and the refund, every notification listed twice, and a forged
                // refund of the renewing subscriber.
                h.state.feedDuplicatePercent = 100
                h.state.forgedNotifications = [
                    SimulatedNotification.forgedRefund(of: renewing, at: h.state.now.addingTimeInterval(3 * Self.day))
                ]
                h.state.advance(by: 5 * Self.day + 3_600)
                let run = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(run.counts.notificationsApplied >= 3, "\(run.counts)")
                renewed = try await Self.ledger(h, user: "renewing")
                #expect(renewed.count == 2, "the purchase and its renewal, each once: \(renewed)")
                #expect(renewed.last?.origin == "notification" && renewed.last?.price == 9_990)
                #expect(!renewed.contains { $0.revoked }, "the forged refund never enters")
                let refunded = try await Self.ledger(h, user: "refunded")
                #expect(refunded.count == 1 && refunded.first?.revoked == true, "\(refunded)")
                #expect(refunded.first?.revocationType == "REFUND_FULL")
                #expect(refunded.first?.price == 9_990, "the price stays known")

                // The same window again (the overlap): nothing new.
                let again = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(again.counts.notificationsApplied == 0)
                let total = try await DashboardViewsTests.query(h, "SELECT COUNT(*) AS n FROM transactions")
                #expect(total.first.flatMap { DashboardViewsTests.int($0, "n") } == 6)
            }
        }
    }

    @Test(
        """
        With the Server API, each subscription's earlier transactions are completed with Get Transaction History \
        (ascending, resuming from the stored revision) after the due work, within the run's request allowance; \
        once complete a subscription is never asked again
        """,
        arguments: Backend.available)
    func transactionHistoryBackfill(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Five monthly periods (140 days), one transaction per history page.
            h.state.historyPageSize = 1
            try await h.importReceipts([("history", h.receipt("tl-history", .renewal, daysAgo: 140))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client)
                func run(allowance: Int) async throws -> RenewalOutcome {
                    try await h.run(.run, verifier: router) {
                        $0.history = client
                        $0.historyRequestsPerRun = allowance
                    }
                }
                // Without an allowance, only the status answer's latest period.
                _ = try await run(allowance: 0)
                #expect(try await Self.ledger(h, user: "history").count == 1)
                #expect(h.state.historyRevisions.isEmpty)

                // Two requests: the first two periods, and the revision to resume from.
                var outcome = try await run(allowance: 2)
                var ledger = try await Self.ledger(h, user: "history")
                #expect(ledger.map(\.origin) == ["transaction_history", "transaction_history", "status_answer"])
                #expect(ledger.allSatisfy { $0.price == 9_990 && $0.currency == "USD" }, "\(ledger)")
                #expect(h.state.historyRevisions == [nil, "rev-1"])
                #expect(outcome.counts.historyTransactions == 2 && outcome.counts.historyCompleted == 0)

                // The next runs go on from the stored revision until Apple says there is no more.
                outcome = try await run(allowance: 2)
                #expect(h.state.historyRevisions.suffix(2) == ["rev-2", "rev-3"])
                outcome = try await run(allowance: 2)
                #expect(h.state.historyRevisions.suffix(1) == ["rev-4"])
                #expect(outcome.counts.historyCompleted == 1, "\(outcome.counts)")
                ledger = try await Self.ledger(h, user: "history")
                #expect(ledger.count == 5, "each period once: \(ledger)")
                #expect(Set(ledger.map(\.transactionID)).count == 5)

                // Complete: later runs ask nothing more.
                let asked = h.state.historyRevisions.count
                _ = try await run(allowance: 2)
                #expect(h.state.historyRevisions.count == asked)
            }
        }
    }
}
