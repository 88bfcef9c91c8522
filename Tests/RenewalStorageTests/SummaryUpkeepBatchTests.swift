import Foundation
import RenewalCore
import RenewalTesting
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// The summaries' upkeep per database transaction, not per write: a batch of checks (or a page of the
/// change feed) written in one transaction appends its summed change once, one row per key, and what the
/// writes keep equals a `--rebuild` from scratch.
@Suite("Analytics summary changes of one transaction's writes are appended once, summed per key")
struct SummaryUpkeepBatchTests {
    typealias Backend = StoreBackend

    static let day: TimeInterval = 86_400
    /// 2026-03-01T00:00:00Z.
    static let origin = Date(timeIntervalSince1970: 1_772_323_200)
    static let users = ["u0", "u1", "u2", "u3"]

    @Test(
        """
        four first purchases, then their renewals, then a refund of the first period and an extension of the \
        second, each saved as one batch: the deltas hold each key once (the four subscriptions' equal rows \
        summed), the refund and the extension are recorded as facts from the ledger rows the upkeep read, and \
        the kept rows equal a rebuild's
        """,
        arguments: Backend.available)
    func batchAppendsOnce(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            _ = try await store.rebuildAnalyticsSummaries()
            _ = try await store.importReceipts(
                Self.users.map { ReceiptImport(userID: $0, latestReceipt: "receipt-of-\($0)", productID: nil) },
                now: Self.origin)
            for step in 1...3 {
                let period = min(step, 2)
                let now = Self.origin.addingTimeInterval(Double(step - 1) * 30 * Self.day + 60)
                try await Self.saveBatch(store, period: period, revised: step == 3, now: now)
                let rows = try #require(try await store.int64("SELECT COUNT(*) AS v FROM analytics_summary_deltas"))
                let keys = try #require(
                    try await store.int64(
                        """
                        SELECT COUNT(*) AS v FROM (SELECT DISTINCT shape, day, since_day, row_key
                        FROM analytics_summary_deltas) AS k
                        """))
                #expect(rows > 0, "\(backend), period \(period): the batch changed the summaries")
                #expect(rows == keys, "\(backend), period \(period): \(rows) rows for \(keys) keys")
                let four = try await store.int64(
                    "SELECT COUNT(*) AS v FROM analytics_summary_deltas WHERE ABS(count) = 4")
                #expect(four == rows, "\(backend), period \(period): every change is the four subscriptions'")
                try await store.compactSummaries()
            }
            for kind in ["revocation", "extension"] {
                let facts = try await store.int64("SELECT COUNT(*) AS v FROM subscription_facts WHERE kind = '\(kind)'")
                #expect(facts == 4, "\(backend): \(kind) facts")
            }
            let kept = try await Self.summaryRows(store)
            #expect(!kept.isEmpty)
            _ = try await store.rebuildAnalyticsSummaries()
            #expect(kept == (try await Self.summaryRows(store)), "\(backend): kept rows equal a rebuild's")
        }
    }

    /// Leases every receipt and saves, in one batch, a check of each answering its `period`-th monthly
    /// period: the same product, price and dates for every user; `revised`, the first period refunded five
    /// days in and the second's expiry three days later.
    static func saveBatch(
        _ store: any SQLStoreChecks & RunHistoryStore & AnalyticsSummaryStore, period: Int, revised: Bool,
        now: Date
    ) async throws {
        let lease = Lease(owner: "A", until: now.addingTimeInterval(600), now: now)
        let leased = try await store.nextBatch(
            .backfill(BackfillSelector(all: true)), after: nil, limit: 10, lease: lease)
        #expect(leased.count == users.count)
        let items = leased.map { receipt in
            let otid = "o-\(receipt.userID)"
            let transactions = (1...period).map { index in
                let start = origin.addingTimeInterval(Double(index - 1) * 30 * day)
                let extended = revised && index == 2 ? 3 * day : 0
                return LedgerTransaction(
                    transactionID: "\(otid)-\(index)", originalTransactionID: otid, productID: "p.monthly",
                    purchasedAt: start, expiresAt: start.addingTimeInterval(30 * day + extended),
                    priceMilliunits: 9_990, currency: "USD", ownershipType: "PURCHASED",
                    revokedAt: revised && index == 1 ? start.addingTimeInterval(5 * day) : nil,
                    revocationReason: revised && index == 1 ? 0 : nil, origin: .statusAnswer)
            }
            var subscription = SubscriptionEvidence(
                originalTransactionID: otid, productID: "p.monthly", expiresAt: transactions.last?.expiresAt,
                autoRenew: true, ownershipType: "PURCHASED", environment: .production)
            subscription.transactions = transactions
            let evidence = AppleEvidence(
                environment: .production, bundleID: "com.example.app", latestReceipt: nil,
                subscriptions: [subscription])
            let context = EntitlementDecision.Context(
                now: now, random: 0, runID: "run-\(period)", leaseOwner: "A", rules: EntitlementDecision.Rules())
            return PendingSave.deciding(
                EntitlementDecision.Request(receipt: receipt, answer: .verified(evidence), context: context))
        }
        let written = try await store.saveBatch(items)
        #expect(written.allSatisfy { $0 != nil })
    }

    /// The folded summary rows, each as text, sorted.
    static func summaryRows(_ store: any SQLStoreChecks) async throws -> [String] {
        let rows = try #require(store as? any SummaryRowsDump)
        return try await rows.summaryRows()
    }
}

/// The rows of `analytics_summary_rows`, from either store.
protocol SummaryRowsDump {
    func summaryRows() async throws -> [String]
}

extension SQLSubscriptionStore: SummaryRowsDump {
    func summaryRows() async throws -> [String] {
        try await DashboardAggregates.rows(
            database, "SELECT shape, day, since_day, row_key, count FROM analytics_summary_rows")
    }
}
