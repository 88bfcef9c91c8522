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
        A check whose answer shows a transaction exactly as the ledger holds it does not write it again (its \
        updated_at stays); a transaction Apple changed since (refunded) is written again
        """,
        arguments: Backend.available)
    func unchangedTransactionsNotRewritten(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Bought 35 days ago on a 30-day period and renewed at day 30; the renewal is refunded at day 45
            // (the simulator lists only the current period of this scenario).
            try await h.importReceipts([("kept", h.receipt("tl-kept", .refund, daysAgo: 35))])
            func rows() async throws -> [String: (updated: Int?, revoked: Bool)] {
                let rows = try await DashboardViewsTests.query(
                    h, "SELECT transaction_id, updated_at, revoked_at FROM transactions WHERE user_id = 'kept'")
                return Dictionary(
                    rows.map {
                        (
                            DashboardViewsTests.text($0, "transaction_id") ?? "",
                            (
                                DashboardViewsTests.int($0, "updated_at"),
                                DashboardViewsTests.int($0, "revoked_at") != nil
                            )
                        )
                    }, uniquingKeysWith: { first, _ in first })
            }
            let all = BackfillSelector(all: true)
            _ = try await h.run(.backfill(all))
            let first = try await rows()
            #expect(first.count == 1, "the renewal: \(first)")
            #expect(first.values.allSatisfy { !$0.revoked })

            h.state.advance(by: 3_600)
            _ = try await h.run(.backfill(all))
            let again = try await rows()
            #expect(again.count == 1)
            for (id, row) in again {
                #expect(row.updated == first[id]?.updated, "\(id) is unchanged and not written again")
            }

            // Day 46: the renewal is refunded.
            h.state.advance(by: 11 * Self.day)
            _ = try await h.run(.backfill(all))
            let refunded = try await rows()
            #expect(refunded.count == 1)
            let changed = refunded.filter { $0.value.revoked }
            #expect(changed.count == 1, "the refunded renewal: \(refunded)")
            for (id, row) in changed {
                #expect(row.updated != nil && row.updated != again[id]?.updated, "\(id) is written again")
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

    @Test(
        """
        The simulator charges by storefront and period (EUR in France, JPY a year in Japan, GBP a week in the \
        United Kingdom), half price for a paid introductory offer's first period, nothing for a free trial, and \
        marks family sharing; the ledger records it all through status answers and Get Transaction History
        """,
        arguments: Backend.available)
    func pricesByStorefrontAndOffer(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            var euro = h.receipt("tl-fra", .renewal, daysAgo: 40)
            euro.storefront = "FRA"
            euro.paidIntroductoryOffer = true
            var yen = h.receipt("tl-jpn", .renewal, daysAgo: 10, periodDays: 365)
            yen.storefront = "JPN"
            var pound = h.receipt("tl-gbr", .trial, daysAgo: 10, periodDays: 7)
            pound.storefront = "GBR"
            let family = h.receipt("tl-family", .familyShared, daysAgo: 10)
            try await h.importReceipts([("euro", euro), ("yen", yen), ("pound", pound), ("family", family)])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.history = client }
            }
            let rows = try await DashboardViewsTests.query(
                h,
                """
                SELECT user_id, price_milliunits, currency, storefront, offer_type, offer_discount_type, is_trial,
                    ownership_type FROM transactions ORDER BY user_id, purchased_at
                """)
            func column(_ user: String, _ name: String) -> [String] {
                rows.filter { DashboardViewsTests.text($0, "user_id") == user }.map {
                    DashboardViewsTests.text($0, name) ?? DashboardViewsTests.int($0, name).map(String.init) ?? "-"
                }
            }
            #expect(column("euro", "price_milliunits") == ["4990", "9990"], "intro period at half price, then full")
            #expect(column("euro", "currency") == ["EUR", "EUR"] && column("euro", "storefront") == ["FRA", "FRA"])
            #expect(column("euro", "offer_discount_type") == ["PAY_AS_YOU_GO", "-"])
            #expect(column("yen", "price_milliunits") == ["15000000"] && column("yen", "currency") == ["JPY"])
            #expect(column("pound", "price_milliunits") == ["0", "2490"], "a free week, then a paid one")
            #expect(column("pound", "currency") == ["GBP", "GBP"] && column("pound", "is_trial") == ["1", "0"])
            #expect(column("family", "ownership_type").allSatisfy { $0 == "FAMILY_SHARED" })
            #expect(!column("family", "ownership_type").isEmpty)
        }
    }
}
