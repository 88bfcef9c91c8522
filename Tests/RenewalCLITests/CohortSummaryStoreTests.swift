import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import RenewalStorage
import Testing

/// The monthly figures from the summaries in the database (issue 45): after a rebuild of the project's own
/// ledger generator (with prorated and seat refunds, verifyReceipt rows without a price and a family copy
/// added), the cohort rows the store reads and a window's paying rows give exactly what the recomputation
/// gives: refund rate, trial conversion and LTV by month, ARPU's paying subscriptions and retention.
@Suite("Cohort figures read from the summaries in SQLite and PostgreSQL equal the recomputation")
struct CohortSummaryStoreTests {
    /// What the generator lacks, added by SQL both databases run alike.
    static let variety = [
        """
        UPDATE transactions SET revoked_at = purchased_at + 5 * 86400000, revocation_type = 'REFUND_PRORATED',
            revocation_percentage = 37500 WHERE transaction_id LIKE 'tx-%3-1'
        """,
        """
        UPDATE transactions SET quantity = 3, revoked_seat_quantity = 1, seats_revoked_at = purchased_at + 2 * 86400000
        WHERE transaction_id LIKE 'tx-%7-0' AND is_trial = 0
        """,
        "UPDATE transactions SET price_milliunits = NULL, origin = 'verify_receipt' WHERE transaction_id LIKE 'tx-%9-%'",
        "UPDATE transactions SET ownership_type = 'FAMILY_SHARED' WHERE original_transaction_id LIKE '%11'",
    ]

    /// List prices for the rows without one (the weekly product has none, so some stay unpriced), and a
    /// period for the weekly product, applied at query time.
    static let catalogue = ProductCatalogue(products: [
        "p.monthly": .init(period: .month, listPrices: ["USD": 9.99]),
        "p.monthly.eu": .init(listPrices: ["EUR": 9.49]),
        "p.weekly": .init(period: .week),
    ])

    static func open(_ database: String) throws -> any AnalyticsSummaryStore {
        database.hasPrefix("postgres")
            ? try PostgresSubscriptionStore.open(url: database)
            : try SQLiteSubscriptionStore.open(path: database, create: false)
    }

    @Test(
        "after a rebuild, the cohort read and a window's paying rows give the recomputation's monthly figures",
        arguments: AnalyticsSummaryCommandTests.backends)
    func cohortsEqualRecomputation(backend: String) async throws {
        try await AnalyticsSummaryCommandTests.withDatabase(backend) { database, sql in
            for statement in Self.variety { try sql(statement) }
            let store = try Self.open(database)
            _ = try await store.rebuildAnalyticsSummaries()
            var ledgers: [SubscriptionLedger] = []
            try await store.forEachSubscriptionLedger(bundleID: nil) { ledgers.append($0) }
            // The generator's purchases run from 2024-10-27 into 2026-12: untils before, in and after them.
            var random = SystemRandomNumberGenerator()
            let first = 1_730_419_200.0  // 2024-11-01
            var found: [String] = []
            var paying = 0
            var retained = 0
            for round in 0..<8 {
                let end = first + Double(Int.random(in: 0..<960, using: &random)) * 86_400
                let until = Date(timeIntervalSince1970: end)
                let since = until.addingTimeInterval(-Double(Int.random(in: 1...90, using: &random)) * 86_400)
                let environment: AppStoreEnvironment = round == 7 ? .sandbox : .production
                var reference = SubscriptionAnalytics(
                    since: since, until: until, catalogue: Self.catalogue, environment: environment)
                var retention = CohortRetention(asOf: until, catalogue: Self.catalogue)
                for ledger in ledgers {
                    reference.add(ledger)
                    retention.add(ledger)
                }
                let query = try #require(
                    SummaryQuery(since: since, until: until, catalogue: Self.catalogue, environment: environment))
                let window = try await store.analyticsSummary(
                    s: query.sinceUnit, u: query.untilUnit, bundleID: nil, environment: environment)
                let answer = try await store.analyticsCohortFigures(query, window: window, bundleID: nil)
                found += answer.differences(
                    from: reference.cohortFigures, retention: environment == .production ? retention.cohorts : nil
                ).map { "\(Timestamp.string(since)) to \(Timestamp.string(until)): \($0)" }
                paying += reference.cohortFigures.payingInWindow.values.reduce(0, +)
                retained += retention.cohorts.values.map { $0.retained.reduce(0, +) }.reduce(0, +)
            }
            #expect(paying > 0 && retained > 0, "the windows counted nothing: \(paying) paying, \(retained) retained")
            #expect(found.isEmpty, "\(backend): \(found.count) differences, first: \(found.prefix(4))")
        }
    }
}
