import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import RenewalTesting
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// The MRR movement read from the database's summaries (`analyticsMovementSummary`, then
/// `SummaryQuery.movement`) equals `MRRMovementSeries` over the ledger read back from the same database:
/// the window's buckets, MRR at both bounds, every day and ARPU's subscriptions paying at `until`, on a
/// generated ledger with trials, price changes, storefront changes, product changes, refunds, lapses and
/// grace periods, on SQLite and PostgreSQL.
@Suite("MRR movement from the summaries in the database equals the recomputation, on SQLite and PostgreSQL")
struct MovementSummaryStoreTests {
    typealias Backend = StoreBackend

    static let day: TimeInterval = 86_400
    /// 2026-03-01T00:00:00Z.
    static let origin = Date(timeIntervalSince1970: 1_772_323_200)
    static let catalogue = ProductCatalogue(products: [
        "p.monthly": .init(period: .month, listPrices: ["USD": 9.99]), "p.yearly": .init(period: .year),
    ])

    /// One subscription's rows as SQL: up to seven periods, a trial first now and then, the price, the
    /// product or the storefront (currency) changing between periods, lapses, a refund, a grace period.
    static func subscription(_ index: Int, _ random: inout SeededGenerator) -> [String] {
        let id = "m-\(index)"
        var statements: [String] = []
        var at = origin.addingTimeInterval(Double(Int.random(in: -40 * 24...60 * 24, using: &random)) * 3_600)
        var currency = ["USD", "EUR", "JPY"].randomElement(using: &random) ?? "USD"
        var product = ["p.monthly", "p.weekly", "p.yearly"].randomElement(using: &random) ?? "p.monthly"
        var last: (id: String, expires: Date)?
        for period in 0..<Int.random(in: 1...7, using: &random) {
            let trial = period == 0 && Int.random(in: 0..<4, using: &random) == 0
            if Int.random(in: 0..<8, using: &random) == 0 { currency = currency == "USD" ? "EUR" : "USD" }
            if Int.random(in: 0..<8, using: &random) == 0 {
                product = product == "p.monthly" ? "p.yearly" : "p.monthly"
            }
            let days = trial ? 7 : product == "p.weekly" ? 7 : product == "p.monthly" ? 30 : 365
            let expires = at.addingTimeInterval(Double(days) * day)
            let price: String =
                trial || Int.random(in: 0..<10, using: &random) == 0
                ? "NULL" : "\([4_990, 9_990, 14_990].randomElement(using: &random) ?? 9_990)"
            let refunded = !trial && Int.random(in: 0..<12, using: &random) == 0
            let revoked = refunded ? "\(Self.ms(at.addingTimeInterval(Double(days) * day / 3)))" : "NULL"
            let transaction = "\(id)-\(period)"
            statements.append(
                """
                INSERT INTO transactions (transaction_id, original_transaction_id, user_id, bundle_id, product_id,
                  environment, ownership_type, purchased_at, expires_at, price_milliunits, currency, is_trial, quantity,
                  revoked_at, revocation_type, transaction_reason, upgraded, origin, recorded_at, updated_at)
                VALUES ('\(transaction)', '\(id)', 'u-\(index)', 'com.example.app', '\(product)', 'Production',
                  'PURCHASED', \(Self.ms(at)), \(Self.ms(expires)), \(price), '\(currency)', \(trial ? 1 : 0), 1,
                  \(revoked), \(refunded ? "'REFUND_FULL'" : "NULL"), '\(period == 0 ? "PURCHASE" : "RENEWAL")', 0,
                  'status_answer', 0, 0)
                """)
            last = (transaction, expires)
            if refunded { break }
            // Mostly back to back; now and then a lapse of days or months.
            let lapse = Int.random(in: 0..<6, using: &random) == 0 ? Int.random(in: 1...90, using: &random) : 0
            at = expires.addingTimeInterval(
                Double(lapse) * day + Double(Int.random(in: -2...2, using: &random)) * 3_600)
        }
        if let last, Int.random(in: 0..<5, using: &random) == 0 {
            let end = last.expires.addingTimeInterval(Double(Int.random(in: 1...16, using: &random)) * day)
            statements.append(
                """
                INSERT INTO subscription_facts (original_transaction_id, kind, transaction_id, starts_at, ends_at,
                  stated_at, recorded_at, source)
                VALUES ('\(id)', 'grace_period', '\(last.id)', \(Self.ms(last.expires)), \(Self.ms(end)),
                  \(Self.ms(last.expires)), 0, 'test')
                """)
        }
        return statements
    }

    static func ms(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    @Test(
        "after --rebuild, 12 random UTC-day windows of 1 to 90 days: window, days and ARPU",
        arguments: Backend.available)
    func movementFromDatabase(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            var random = SeededGenerator(seed: 45_019)
            for index in 0..<150 {
                for statement in Self.subscription(index, &random) {
                    try await store.run(statement)
                }
            }
            _ = try await store.rebuildAnalyticsSummaries()
            var ledgers: [SubscriptionLedger] = []
            try await store.forEachSubscriptionLedger(bundleID: nil) { ledgers.append($0) }
            #expect(ledgers.count == 150)
            var moved = Set<MRRMovement.Bucket>()
            for _ in 0..<12 {
                let start = Int.random(in: -30...120, using: &random)
                let since = Self.origin.addingTimeInterval(Double(start) * Self.day)
                let until = since.addingTimeInterval(Double(Int.random(in: 1...90, using: &random)) * Self.day)
                var reference = SubscriptionAnalytics(since: since, until: until, catalogue: Self.catalogue)
                for ledger in ledgers { reference.add(ledger) }
                let query = try #require(SummaryQuery(since: since, until: until, catalogue: Self.catalogue))
                let summary = try await store.analyticsMovementSummary(
                    s: query.sinceUnit, u: query.untilUnit, bundleID: nil, environment: .production)
                let answer = try #require(query.movement(of: summary))
                let expected = reference.movement
                let window = "\(backend) [\(Timestamp.string(since)), \(Timestamp.string(until)))"
                #expect(answer.window == expected.window, "\(window): window")
                #expect(answer.payingAtUntil == expected.payingAtUntil, "\(window): paying at until")
                #expect(answer.dayNames == expected.dayNames, "\(window): days")
                let days = answer.days ?? []
                let wrong = zip(expected.dayNames, zip(expected.days, days)).filter { $0.1.0 != $0.1.1 }.map(\.0)
                #expect(
                    days.count == expected.days.count && wrong.isEmpty, "\(window): days differ: \(wrong.prefix(5))")
                // The same summary still answers every other figure as the window read does.
                #expect(query.figures(of: summary).total == reference.total, "\(window): figures")
                moved.formUnion(
                    MRRMovement.Bucket.allCases.filter { expected.window[$0].byCurrency.values.contains { $0 != 0 } })
            }
            #expect(moved.count >= 4, "\(backend): buckets moved in the windows: \(moved)")
        }
    }
}
