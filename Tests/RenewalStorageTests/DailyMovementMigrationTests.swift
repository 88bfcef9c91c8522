import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// Schema 28 on a database at version 27 that already holds a refreshed daily series: the rows keep every
/// figure and read 0 movement, the view keeps its columns in their order and adds the movement in units,
/// and the next refresh of a day fills them (`replaceAnalyticsDays`, read back by `analyticsDays`).
@Suite("Daily MRR movement: the migration to schema 28 and the view analytics_daily_series, on SQLite and PostgreSQL")
struct DailyMovementMigrationTests: FreshStoreCheck {
    typealias Backend = SubscriptionFactsMigrationTests.Backend

    /// The view's columns before schema 28, in order, then the ones it adds.
    static let columnsBefore = [
        "day", "bundle_id", "product_id", "environment", "currency", "active_subscriptions", "active_trials",
        "new_subscriptions", "new_trials", "trial_conversions", "churned", "reactivations", "mrr", "revenue",
        "refunds", "net_revenue",
    ]
    static let columnsAdded = [
        "new_mrr", "expansion_mrr", "contraction_mrr", "churned_mrr", "reactivation_mrr", "net_new_mrr",
    ]

    static let seed = [
        """
        INSERT INTO analytics_daily (day, bundle_id, product_id, environment, currency, converted,
            active_subscriptions, active_trials, new_subscriptions, new_trials, trial_conversions, churned,
            reactivations, mrr_cents, revenue_cents, refunds_cents, computed_at)
        VALUES ('2026-11-01', 'com.example.app', 'pro.monthly', 'Production', 'USD', 1, 3, 1, 1, 1, 0, 1, 0,
            2997, 999, 0, 0),
            ('2026-11-01', 'com.example.app', 'pro.monthly', 'Production', 'JPY', 0, 0, 0, 0, 0, 0, 0, 0,
            150000, 0, 0, 0)
        """
    ]

    @Test(
        """
        a series refreshed at schema 27 keeps its figures and reads 0 movement; the view keeps its columns first \
        and adds the movement; a refresh fills it
        """,
        arguments: Backend.available)
    func migrationAndView(backend: Backend) async throws {
        try await backend.check(Self.self)
    }

    /// An amount of the view (a double on SQLite, a numeric read as text on PostgreSQL) in cents.
    static func cents(_ value: SQLValue?) -> Int? {
        switch value {
        case .int64(let value): return Int(value) * 100
        case .double(let value): return Int((value * 100).rounded())
        case .text(let text): return Double(text).map { Int(($0 * 100).rounded()) }
        default: return nil
        }
    }

    static func view<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws -> [SQLRow] {
        try await store.database.withConnection { connection in
            try connection.execute("SELECT * FROM analytics_daily_series ORDER BY day, product_id", [])
        }
    }

    static func check<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws {
        #expect(try await store.migrate(through: 27) == Array(1...27))
        for statement in Self.seed { _ = try await store.database.withConnection { try $0.execute(statement, []) } }
        #expect(try await store.migrate().first == 28)

        let before = try await Self.view(store)
        #expect(before.count == 1, "the reporting currency's row only")
        let row = try #require(before.first)
        #expect(row.columns == Self.columnsBefore + Self.columnsAdded)
        #expect(Self.cents(row["mrr"]) == 2_997 && Self.cents(row["revenue"]) == 999)
        for column in Self.columnsAdded { #expect(Self.cents(row[column]) == 0, "\(column)") }
        let stored = try await store.analyticsDays(first: "2026-11-01", last: "2026-11-01", bundleID: nil)
        #expect(stored.count == 2 && stored.allSatisfy { $0.movementCents.isEmpty }, "\(stored)")

        // The next refresh of the day writes the movement; the view gives it in units, and the net.
        let key = DailyAnalytics.Key(
            day: "2026-11-01", bundleID: "com.example.app", productID: "pro.monthly", environment: "Production")
        var usd = AnalyticsDayRow(key: key, currency: "USD", converted: true)
        usd.activeSubscriptions = 3
        usd.mrrCents = 2_997
        usd.movementCents = [.new: 999, .expansion: 1_000, .contraction: -250, .churned: -999, .reactivation: 499]
        var yen = AnalyticsDayRow(key: key, currency: "JPY", converted: false)
        yen.movementCents = [.churned: -150_000]
        try await store.replaceAnalyticsDays(
            first: "2026-11-01", last: "2026-11-01", bundleID: nil, rows: [usd, yen], computedAt: Date())
        let read = try await store.analyticsDays(first: "2026-11-01", last: "2026-11-01", bundleID: nil)
        #expect(read == [usd, yen])
        let after = try #require(try await Self.view(store).first)
        #expect(
            Self.columnsAdded.map { Self.cents(after[$0]) } == [999, 1_000, -250, -999, 499, 1_249],
            "\(after.values)")
    }
}
