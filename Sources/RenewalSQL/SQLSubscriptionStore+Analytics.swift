import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore: AnalyticsStore {
    public func ledgerPage(bundleID: String?, after: String?, limit: Int) async throws -> [SubscriptionLedger] {
        guard limit > 0 else { return [] }
        var binds = SQLBinds()
        var conditions: [String] = []
        if let after { conditions.append("original_transaction_id > \(binds.add(.text(after)))") }
        if let bundleID { conditions.append("bundle_id = \(binds.add(.text(bundleID)))") }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        // The page's subscriptions first (on the ledger's (original_transaction_id, purchased_at) index),
        // then their transactions, so a page never cuts a subscription in two, then their facts.
        let ids = """
            SELECT DISTINCT original_transaction_id FROM transactions \(filter)
            ORDER BY original_transaction_id LIMIT \(binds.add(.int64(Int64(limit))))
            """
        let sql = """
            SELECT t.* FROM transactions t
            WHERE t.original_transaction_id IN (\(ids))
            \(bundleID == nil ? "" : "AND t.bundle_id = \(binds.add(.text(bundleID ?? "")))")
            ORDER BY t.original_transaction_id, t.purchased_at, t.transaction_id
            """
        let values = binds.values
        // The page's facts in one more query: what Apple stated with dates (grace periods, reversed refunds).
        let (rows, facts) = try await onConnection { connection in
            let rows = try connection.execute(sql, values)
            var ids: [String] = []
            for row in rows {
                let id = try row.text("original_transaction_id")
                if ids.last != id { ids.append(id) }
            }
            return (rows, try Self.facts(of: ids, on: connection))
        }
        guard let names = rows.first?.names else { return [] }
        let columns = LedgerColumns(names)
        var ledgers: [SubscriptionLedger] = []
        var current: [SQLRow] = []
        var id = ""
        for row in rows {
            let rowID = try row.text(columns.originalTransactionID)
            if rowID != id, !current.isEmpty {
                ledgers.append(try columns.ledger(id, facts: facts[id] ?? [], rows: current))
                current = []
            }
            id = rowID
            current.append(row)
        }
        if !current.isEmpty { ledgers.append(try columns.ledger(id, facts: facts[id] ?? [], rows: current)) }
        return ledgers
    }
}

extension SQLSubscriptionStore {
    public func replaceAnalyticsDays(
        first: String, last: String, bundleID: String?, rows: [AnalyticsDayRow], computedAt: Date
    ) async throws {
        try await inTransaction { connection in
            try Self.replaceDays(
                first: first, last: last, bundleID: bundleID, rows: rows, at: computedAt, on: connection)
        }
    }

    /// Deletes the days' rows (of one app, or every app's) and inserts `rows`, in the caller's transaction.
    static func replaceDays(
        first: String, last: String, bundleID: String?, rows: [AnalyticsDayRow], at computedAt: Date,
        on connection: any SQLConnection
    ) throws {
        var binds = SQLBinds()
        var delete =
            "DELETE FROM analytics_daily WHERE day >= \(binds.add(.text(first))) AND day <= \(binds.add(.text(last)))"
        if let bundleID { delete += " AND bundle_id = \(binds.add(.text(bundleID)))" }
        let columns =
            [
                "day", "bundle_id", "product_id", "environment", "currency", "converted", "active_subscriptions",
                "active_trials", "new_subscriptions", "new_trials", "trial_conversions", "churned", "reactivations",
                "mrr_cents", "revenue_cents", "refunds_cents", "computed_at",
            ] + Self.movementColumns
        let at = SQLValue.int64(Int64((computedAt.timeIntervalSince1970 * 1000).rounded()))
        _ = try connection.execute(delete, binds.values)
        let values = rows.map { row -> [SQLValue] in
            [
                .text(row.key.day), .text(row.key.bundleID), .text(row.key.productID),
                .text(row.key.environment), .text(row.currency), .int64(row.converted ? 1 : 0),
                .int64(Int64(row.activeSubscriptions)), .int64(Int64(row.activeTrials)),
                .int64(Int64(row.newSubscriptions)), .int64(Int64(row.newTrials)),
                .int64(Int64(row.trialConversions)), .int64(Int64(row.churned)),
                .int64(Int64(row.reactivations)), .int64(row.mrrCents), .int64(row.revenueCents),
                .int64(row.refundsCents), at,
            ] + MRRMovement.Bucket.allCases.map { SQLValue.int64(row.movementCents[$0] ?? 0) }
        }
        // 22 columns: 200 rows a statement stay under SQLite's bind limit.
        try connection.insert(values, into: "analytics_daily", columns: columns, perStatement: 200)
    }
}

extension SQLSubscriptionStore {
    /// The columns of `analytics_daily` holding each MRR movement bucket (schema 28), in
    /// `MRRMovement.Bucket.allCases` order.
    static var movementColumns: [String] { MRRMovement.Bucket.allCases.map { "\($0.rawValue)_mrr_cents" } }

    public func analyticsDays(first: String, last: String, bundleID: String?) async throws -> [AnalyticsDayRow] {
        var binds = SQLBinds()
        var sql = """
            SELECT * FROM analytics_daily WHERE day >= \(binds.add(.text(first))) AND day <= \(binds.add(.text(last)))
            """
        if let bundleID { sql += " AND bundle_id = \(binds.add(.text(bundleID)))" }
        sql += " ORDER BY day, bundle_id, product_id, environment, converted DESC, currency"
        let values = binds.values
        let rows = try await onConnection { connection in try connection.execute(sql, values) }
        return try rows.map { row in
            var day = AnalyticsDayRow(
                key: DailyAnalytics.Key(
                    day: try row.text("day"), bundleID: try row.text("bundle_id"),
                    productID: try row.text("product_id"),
                    environment: try row.text("environment")),
                currency: try row.text("currency"), converted: try row.bool("converted"))
            day.activeSubscriptions = try row.int("active_subscriptions")
            day.activeTrials = try row.int("active_trials")
            day.newSubscriptions = try row.int("new_subscriptions")
            day.newTrials = try row.int("new_trials")
            day.trialConversions = try row.int("trial_conversions")
            day.churned = try row.int("churned")
            day.reactivations = try row.int("reactivations")
            day.mrrCents = try row.int64("mrr_cents")
            day.revenueCents = try row.int64("revenue_cents")
            day.refundsCents = try row.int64("refunds_cents")
            for (bucket, column) in zip(MRRMovement.Bucket.allCases, Self.movementColumns) {
                let cents = try row.int64(column)
                if cents != 0 { day.movementCents[bucket] = cents }
            }
            return day
        }
    }

    public func analyticsDaysKept(bundleID: String?) async throws -> (first: String, last: String)? {
        let sql =
            "SELECT MIN(day) AS first, MAX(day) AS last FROM analytics_daily"
            + (bundleID == nil ? "" : " WHERE bundle_id = $1")
        let binds: [SQLValue] = bundleID.map { [.text($0)] } ?? []
        let rows = try await onConnection { connection in try connection.execute(sql, binds) }
        guard let row = rows.first, let first = try row.optionalText("first"), let last = try row.optionalText("last")
        else { return nil }
        return (first, last)
    }
}

extension SQLSubscriptionStore {
    public func replaceAnalyticsCohorts(
        bundleID: String?, cohorts: [String: [CohortRetention.Cohort]], computedAt: Date
    ) async throws {
        try await inTransaction { connection in
            try Self.replaceCohorts(bundleID: bundleID, cohorts: cohorts, at: computedAt, on: connection)
        }
    }

    /// Deletes the cohort table (of one app, or every app's) and inserts `cohorts`, in the caller's
    /// transaction.
    static func replaceCohorts(
        bundleID: String?, cohorts: [String: [CohortRetention.Cohort]], at computedAt: Date,
        on connection: any SQLConnection
    ) throws {
        let delete =
            bundleID == nil ? "DELETE FROM analytics_cohorts" : "DELETE FROM analytics_cohorts WHERE bundle_id = $1"
        let at = SQLValue.int64(Int64((computedAt.timeIntervalSince1970 * 1000).rounded()))
        _ = try connection.execute(delete, bundleID.map { [.text($0)] } ?? [])
        var rows: [[SQLValue]] = []
        for (bundle, table) in cohorts {
            for cohort in table {
                for period in 1...CohortRetention.periods {
                    rows.append([
                        .text(cohort.month), .text(bundle), .int64(Int64(period)),
                        .int64(Int64(cohort.subscriptions)), .int64(Int64(cohort.observed[period - 1])),
                        .int64(Int64(cohort.retained[period - 1])), at,
                    ])
                }
            }
        }
        try connection.insert(
            rows, into: "analytics_cohorts",
            columns: ["cohort_month", "bundle_id", "period", "subscriptions", "observed", "retained", "computed_at"],
            perStatement: 500)
    }
}

extension LedgerTransaction {
    /// A transaction of a ledger read (`SQLSubscriptionStore.ledgers`, a ledger page), by `columns` of
    /// the row's result.
    init(ledgerRow row: SQLRow, columns: LedgerColumns) throws {
        let c = columns
        self.init(
            transactionID: try row.text(c.transactionID),
            originalTransactionID: try row.text(c.originalTransactionID),
            productID: try row.optionalText(c.productID),
            purchasedAt: try row.optionalDate(c.purchasedAt),
            expiresAt: try row.optionalDate(c.expiresAt),
            priceMilliunits: try row.optionalInt64(c.priceMilliunits),
            currency: try row.optionalText(c.currency),
            storefront: try row.optionalText(c.storefront),
            offerType: try row.optionalInt(c.offerType),
            offerDiscountType: try row.optionalText(c.offerDiscountType),
            isTrial: try row.bool(c.isTrial),
            quantity: try row.int(c.quantity),
            ownershipType: try row.optionalText(c.ownershipType),
            revokedAt: try row.optionalDate(c.revokedAt),
            revocationReason: try row.optionalInt(c.revocationReason),
            revocationType: try row.optionalText(c.revocationType),
            revocationPercentage: try row.optionalInt(c.revocationPercentage),
            transactionReason: try row.optionalText(c.transactionReason),
            isUpgraded: try row.bool(c.upgraded),
            origin: Origin(rawValue: try row.text(c.origin)) ?? .verifyReceipt,
            signedAt: try row.optionalDate(c.signedAt),
            revokedSeatQuantity: try row.optionalInt(c.revokedSeatQuantity),
            seatsRevokedAt: try row.optionalDate(c.seatsRevokedAt))
    }
}

/// The columns of a ledger's transaction rows, found once per result so each row is read by position
/// (a page of ledgers is thousands of rows). A class: one reference passed per row, not 23 columns.
final class LedgerColumns {
    /// The result's names, held so its columns' positions stay its own.
    let names: SQLColumnNames
    let transactionID: SQLColumn
    let originalTransactionID: SQLColumn
    let productID: SQLColumn
    let purchasedAt: SQLColumn
    let expiresAt: SQLColumn
    let priceMilliunits: SQLColumn
    let currency: SQLColumn
    let storefront: SQLColumn
    let offerType: SQLColumn
    let offerDiscountType: SQLColumn
    let isTrial: SQLColumn
    let quantity: SQLColumn
    let ownershipType: SQLColumn
    let revokedAt: SQLColumn
    let revocationReason: SQLColumn
    let revocationType: SQLColumn
    let revocationPercentage: SQLColumn
    let transactionReason: SQLColumn
    let upgraded: SQLColumn
    let origin: SQLColumn
    let signedAt: SQLColumn
    let revokedSeatQuantity: SQLColumn
    let seatsRevokedAt: SQLColumn
    let bundleID: SQLColumn
    let environment: SQLColumn

    init(_ names: SQLColumnNames) {
        self.names = names
        transactionID = names.column("transaction_id")
        originalTransactionID = names.column("original_transaction_id")
        productID = names.column("product_id")
        purchasedAt = names.column("purchased_at")
        expiresAt = names.column("expires_at")
        priceMilliunits = names.column("price_milliunits")
        currency = names.column("currency")
        storefront = names.column("storefront")
        offerType = names.column("offer_type")
        offerDiscountType = names.column("offer_discount_type")
        isTrial = names.column("is_trial")
        quantity = names.column("quantity")
        ownershipType = names.column("ownership_type")
        revokedAt = names.column("revoked_at")
        revocationReason = names.column("revocation_reason")
        revocationType = names.column("revocation_type")
        revocationPercentage = names.column("revocation_percentage")
        transactionReason = names.column("transaction_reason")
        upgraded = names.column("upgraded")
        origin = names.column("origin")
        signedAt = names.column("signed_at")
        revokedSeatQuantity = names.column("revoked_seat_quantity")
        seatsRevokedAt = names.column("seats_revoked_at")
        bundleID = names.column("bundle_id")
        environment = names.column("environment")
    }

    /// The ledger of subscription `id` from its transaction rows (read by these columns) and its facts.
    func ledger(_ id: String, facts: [SubscriptionFact], rows: [SQLRow]) throws -> SubscriptionLedger {
        SubscriptionLedger(
            originalTransactionID: id,
            bundleID: try rows.lazy.compactMap { try $0.optionalText(bundleID) }.first,
            environment: try rows.lazy.compactMap { try $0.environment(environment) }.first,
            facts: facts, transactions: try rows.map { try LedgerTransaction(ledgerRow: $0, columns: self) })
    }
}
