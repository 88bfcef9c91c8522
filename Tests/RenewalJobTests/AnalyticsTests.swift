import Foundation
import RenewalCore
import RenewalPostgres
import RenewalReports
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import RenewalTesting
import Testing

/// The analytics against a generated population whose answers the test knows from its own timeline:
/// who held which period when, at what price, in which currency. The ledger rows are written as the job
/// writes them (one per transaction); the figures are computed here from the timeline, not from rows.
@Suite("Analytics: every figure equals the one the population's own timeline gives, on SQLite and PostgreSQL")
struct AnalyticsTests {
    static let day: TimeInterval = 86_400
    static let origin = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    static let since = origin.addingTimeInterval(60 * day)
    static let until = origin.addingTimeInterval(120 * day)
    static let rates = ExchangeRates(reportingCurrency: "USD", rates: ["EUR": Decimal(string: "1.1")!])

    /// A product of the population, with its price of one period per currency (JPY has no rate).
    struct Product {
        var id: String
        var period: BillingPeriod
        var prices: [String: Decimal]

        func end(from start: Date) -> Date {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC")!
            return switch period {
            case .week: start.addingTimeInterval(7 * AnalyticsTests.day)
            case .year: calendar.date(byAdding: .year, value: 1, to: start)!
            default: calendar.date(byAdding: .month, value: 1, to: start)!
            }
        }
    }

    static let products = [
        Product(id: "an.monthly", period: .month, prices: ["USD": dec("9.99"), "EUR": dec("8.99"), "JPY": 1500]),
        Product(id: "an.yearly", period: .year, prices: ["USD": dec("99.99"), "EUR": dec("89.99"), "JPY": 15_000]),
        Product(id: "an.weekly", period: .week, prices: ["USD": dec("2.99"), "EUR": dec("2.49"), "JPY": 450]),
    ]

    static func dec(_ text: String) -> Decimal { Decimal(string: text)! }

    /// One period of one subscriber's timeline.
    struct Period {
        var purchased: Date
        var expires: Date
        var trial: Bool
        var reason: String
        var refund: (at: Date, share: Decimal?)? = nil
    }

    /// One subscriber: what happened, as the population decided it.
    struct Subscriber {
        var id: String
        var product: Product
        var currency: String
        var counted: Bool
        var environment: String
        var ownership: String
        var quantity: Int
        /// verifyReceipt rows: no price or currency; the catalogue's USD list price applies.
        var fromVerifyReceipt: Bool
        var periods: [Period] = []
        var graceEnd: Date?
        var reactivatedAt: Date?

        var price: Money {
            fromVerifyReceipt
                ? Money(currency: "USD", amount: product.prices["USD"]!)
                : Money(currency: currency, amount: product.prices[currency]!)
        }

        /// Entitled at `moment`: by the newest period holding it (a refund ends it), or by the grace after the
        /// last one. Returns whether the entitlement is paid.
        func entitlement(at moment: Date) -> Bool? {
            if let holding = periods.last(where: { period in
                period.purchased <= moment && moment < min(period.expires, period.refund?.at ?? .distantFuture)
            }) {
                return !holding.trial
            }
            if let last = periods.last, last.refund == nil, let graceEnd, last.expires <= moment, moment < graceEnd,
                last.purchased <= moment
            {
                return !last.trial
            }
            return nil
        }
    }

    static func population(count: Int) -> [Subscriber] {
        var random = SeededGenerator(seed: 34)
        return (0..<count).map { index in
            let roll = Double.random(in: 0..<1, using: &random)
            var subscriber = Subscriber(
                id: String(format: "an-%04d", index), product: products.randomElement(using: &random)!,
                currency: roll < 0.6 ? "USD" : roll < 0.9 ? "EUR" : "JPY", counted: true, environment: "Production",
                ownership: "PURCHASED", quantity: Double.random(in: 0..<1, using: &random) < 0.05 ? 3 : 1,
                fromVerifyReceipt: Double.random(in: 0..<1, using: &random) < 0.1)
            let apart = Double.random(in: 0..<1, using: &random)
            if apart < 0.05 {
                subscriber.ownership = "FAMILY_SHARED"
                subscriber.counted = false
            } else if apart < 0.1 {
                subscriber.environment = "Sandbox"
                subscriber.counted = false
            }
            var start = origin.addingTimeInterval(Double.random(in: 0..<150, using: &random) * day)
            if Double.random(in: 0..<1, using: &random) < 0.3 {
                let end = start.addingTimeInterval(7 * day)
                subscriber.periods.append(Period(purchased: start, expires: end, trial: true, reason: "PURCHASE"))
                guard Double.random(in: 0..<1, using: &random) < 0.6 else { return subscriber }
                start = end
            }
            appendPaid(to: &subscriber, from: start, reason: "PURCHASE", count: Int.random(in: 1...9, using: &random))
            let ending = Double.random(in: 0..<1, using: &random)
            let lastEnd = subscriber.periods.last!.expires
            if ending < 0.06, let refunded = subscriber.periods.indices.last(where: { !subscriber.periods[$0].trial }) {
                // A refund ends the subscription: the refunded period is its last.
                subscriber.periods.removeSubrange((refunded + 1)...)
                let period = subscriber.periods[refunded]
                let at = period.purchased.addingTimeInterval(Double.random(in: 1..<5, using: &random) * day)
                let share: Decimal? = Bool.random(using: &random) ? nil : 50_000
                if at < period.expires { subscriber.periods[refunded].refund = (at, share) }
            } else if ending < 0.16 {
                // Billing retry, recovered after days: a renewal, not a reactivation.
                let recovered = lastEnd.addingTimeInterval(Double.random(in: 3..<20, using: &random) * day)
                appendPaid(
                    to: &subscriber, from: recovered, reason: "RENEWAL", count: Int.random(in: 1...3, using: &random))
            } else if ending < 0.24 {
                // Lapsed after the first paid period, then bought again two months later.
                if let firstPaid = subscriber.periods.firstIndex(where: { !$0.trial }) {
                    subscriber.periods.removeSubrange((firstPaid + 1)...)
                }
                let again = subscriber.periods.last!.expires.addingTimeInterval(
                    Double.random(in: 61..<75, using: &random) * day)
                subscriber.reactivatedAt = again
                appendPaid(
                    to: &subscriber, from: again, reason: "PURCHASE", count: Int.random(in: 1...3, using: &random))
            } else if ending < 0.30 {
                subscriber.graceEnd = lastEnd.addingTimeInterval(16 * day)
            }
            return subscriber
        }
    }

    /// `count` paid periods back to back from `start`, each renewal charged up to a day before the period
    /// it pays for begins.
    static func appendPaid(to subscriber: inout Subscriber, from start: Date, reason: String, count: Int) {
        var begin = start
        for index in 0..<count {
            let end = subscriber.product.end(from: begin)
            let early = index == 0 ? 0 : Double((index * 7 + subscriber.periods.count) % 20) * 3_600
            subscriber.periods.append(
                Period(
                    purchased: begin.addingTimeInterval(-early), expires: end, trial: false,
                    reason: index == 0 ? reason : "RENEWAL"))
            begin = end
        }
    }

    /// The figures the timeline gives, by the definitions in docs/analytics.md.
    static func expected(
        _ people: [Subscriber], since: Date = since, until: Date = until, environment: String = "Production"
    ) -> [String: AnalyticsFigures] {
        var figures: [String: AnalyticsFigures] = [:]
        let window = since..<until
        for person in people where person.ownership == "PURCHASED" && person.environment == environment {
            var f = AnalyticsFigures()
            let price = person.price
            let seats = Decimal(person.quantity)
            let atSince = person.entitlement(at: since)
            let atUntil = person.entitlement(at: until)
            if atUntil == true {
                f.activeSubscriptions = 1
                f.mrr.add(Money(currency: price.currency, amount: person.product.period.perMonth(price.amount * seats)))
            }
            if atUntil == false { f.activeTrials = 1 }
            let refundedInWindow = person.periods.contains { $0.refund.map { window.contains($0.at) } ?? false }
            if atSince == true {
                f.activeAtSince = 1
                if atUntil == nil && !refundedInWindow { f.churned = 1 }
            }
            if let first = person.periods.first, first.trial, window.contains(first.purchased) {
                // The trial funnel follows the trials begun in the window to `until`.
                f.newTrials = 1
                if person.periods.contains(where: { !$0.trial && $0.purchased < until }) {
                    f.newTrialsConverted = 1
                } else if atUntil == false {
                    f.newTrialsInTrial = 1
                }
            }
            if let firstPaid = person.periods.first(where: { !$0.trial }), window.contains(firstPaid.purchased) {
                f.newSubscriptions = 1
                if person.periods.first?.trial == true { f.trialConversions = 1 }
            }
            if let again = person.reactivatedAt, window.contains(again) { f.reactivations = 1 }
            for period in person.periods where !period.trial {
                if window.contains(period.purchased) { f.revenue.add(price, times: seats) }
                if let refund = period.refund, window.contains(refund.at) {
                    f.refunds.add(price, times: seats * (refund.share.map { $0 / 100_000 } ?? 1))
                }
            }
            figures[person.product.id, default: AnalyticsFigures()].add(f)
        }
        return figures
    }

    static func insert(_ people: [Subscriber], into h: JobHarness) async throws {
        var statements: [(String, [SQLValue])] = []
        for person in people {
            let otid = "otid-" + person.id
            for (index, period) in person.periods.enumerated() {
                let priced = !person.fromVerifyReceipt && !period.trial
                let milliunits = (person.product.prices[person.currency]! * 1000 as NSDecimalNumber).int64Value
                statements.append(
                    (
                        """
                        INSERT INTO transactions (transaction_id, original_transaction_id, user_id, bundle_id, product_id,
                            environment, ownership_type, purchased_at, expires_at, price_milliunits, currency, storefront,
                            offer_type, offer_discount_type, is_trial, quantity, revoked_at, revocation_reason,
                            revocation_type, revocation_percentage, transaction_reason, upgraded, origin, signed_at,
                            recorded_at, updated_at)
                        VALUES ($1, $2, $3, 'com.example.analytics', $4, $5, $6, $7, $8, $9, $10, NULL, $11, $12, $13, $14,
                            $15, $16, $17, $18, $19, 0, $20, NULL, 0, 0)
                        """,
                        [
                            .text("\(otid)-\(index)"), .text(otid), .text(person.id), .text(person.product.id),
                            .text(person.environment), .text(person.ownership),
                            .int64(Int64(period.purchased.timeIntervalSince1970 * 1000)),
                            .int64(Int64(period.expires.timeIntervalSince1970 * 1000)),
                            priced
                                ? .int64(milliunits) : (period.trial && !person.fromVerifyReceipt ? .int64(0) : .null),
                            person.fromVerifyReceipt ? .null : .text(person.currency),
                            period.trial ? .int64(1) : .null, period.trial ? .text("FREE_TRIAL") : .null,
                            .int64(period.trial ? 1 : 0), .int64(Int64(person.quantity)),
                            period.refund.map { .int64(Int64($0.at.timeIntervalSince1970 * 1000)) } ?? .null,
                            period.refund == nil ? .null : .int64(0),
                            period.refund.map { .text($0.share == nil ? "REFUND_FULL" : "REFUND_PRORATED") } ?? .null,
                            period.refund?.share.map { .int64(($0 as NSDecimalNumber).int64Value) } ?? .null,
                            person.fromVerifyReceipt ? .null : .text(period.reason),
                            .text(person.fromVerifyReceipt ? "verify_receipt" : "status_answer"),
                        ]
                    ))
            }
            if let graceEnd = person.graceEnd {
                statements.append(
                    (
                        """
                        INSERT INTO receipts (user_id, latest_receipt, status, next_check_at, created_at, updated_at)
                        VALUES ($1, 'stored', 'verified', 0, 0, 0)
                        """, [.text(person.id)]
                    ))
                statements.append(
                    (
                        """
                        INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, state, entitled,
                            grace_period_expires_at, next_check_at, updated_at)
                        SELECT $1, id, user_id, 'grace_period', 1, $2, 0, 0 FROM receipts WHERE user_id = $3
                        """, [.text(otid), .int64(Int64(graceEnd.timeIntervalSince1970 * 1000)), .text(person.id)]
                    ))
                // The analytics read the grace period from the fact the job records when Apple states it.
                let last = try #require(person.periods.last)
                statements.append(
                    (
                        """
                        INSERT INTO subscription_facts (original_transaction_id, kind, transaction_id, starts_at, ends_at,
                            stated_at, recorded_at, source)
                        VALUES ($1, 'grace_period', $2, $3, $4, $3, 0, 'answer')
                        """,
                        [
                            .text(otid), .text("\(otid)-\(person.periods.count - 1)"),
                            .int64(Int64(last.expires.timeIntervalSince1970 * 1000)),
                            .int64(Int64(graceEnd.timeIntervalSince1970 * 1000)),
                        ]
                    ))
            }
        }
        try await execute(h, statements)
    }

    static func execute(_ h: JobHarness, _ statements: [(String, [SQLValue])]) async throws {
        if let store = h.store as? SQLiteSubscriptionStore {
            try await store.database.withConnection { connection in
                for (sql, binds) in statements { _ = try connection.execute(sql, binds) }
            }
            return
        }
        let store = try #require(h.store as? PostgresSubscriptionStore)
        try await store.database.withConnection { connection in
            for (sql, binds) in statements { _ = try connection.execute(sql, binds) }
        }
    }

    @Test(
        """
        A population in two priced currencies and one without a rate; monthly, yearly and weekly products; trials \
        that convert or lapse; family-shared and sandbox rows; full and prorated refunds; billing retries \
        recovered; reactivations; grace periods; verifyReceipt rows priced from the catalogue: each figure, per \
        product and in total, equals the timeline's, read in pages smaller than the ledger
        """,
        arguments: Backend.available)
    func knownAnswers(backend: Backend) async throws {
        let people = Self.population(count: 400)
        try await JobHarness.with(backend) { h in
            try await Self.insert(people, into: h)
            let store = try #require(h.store as? any AnalyticsStore)
            let catalogue = ProductCatalogue(
                products: Dictionary(
                    uniqueKeysWithValues: Self.products.map {
                        ($0.id, ProductCatalogue.Product(period: $0.period, listPrices: ["USD": $0.prices["USD"]!]))
                    }))
            var analytics = SubscriptionAnalytics(since: Self.since, until: Self.until, catalogue: catalogue)
            try await store.forEachSubscriptionLedger(bundleID: "com.example.analytics", pageSize: 37) {
                analytics.add($0)
            }
            let expected = Self.expected(people)
            var expectedTotal = AnalyticsFigures()
            for figures in expected.values { expectedTotal.add(figures) }
            for product in Self.products {
                Self.compare(
                    analytics.byProduct[product.id] ?? AnalyticsFigures(), expected[product.id] ?? .init(), product.id)
            }
            Self.compare(analytics.total, expectedTotal, "total")
            // The population exercises every figure.
            let total = expectedTotal
            #expect(total.activeSubscriptions > 0 && total.activeTrials > 0 && total.churned > 0)
            #expect(total.newTrials > 0 && total.trialConversions > 0 && total.reactivations > 0)
            #expect(
                total.newTrialsConverted > 0 && total.newTrials - total.newTrialsConverted - total.newTrialsInTrial > 0)
            #expect(total.refunds.byCurrency.values.contains { $0 > 0 } && total.mrr.byCurrency["JPY"] ?? 0 > 0)
            let report = AnalyticsReport(analytics, rates: Self.rates, bundleID: "com.example.analytics")
            let converted = Self.rates.convert(expectedTotal.mrr)
            #expect(report.total.mrr == converted.converted)
            #expect(report.total.unconverted["JPY"]?.mrr == converted.unconverted["JPY"])
            #expect(report.total.unpricedTransactions == 0)
            print(
                "figures[analytics known answers, \(backend)]: \(people.count) subscribers; active \(total.activeSubscriptions), "
                    + "trials \(total.activeTrials), new \(total.newSubscriptions), converted \(total.trialConversions), "
                    + "churned \(total.churned), reactivated \(total.reactivations), MRR \(report.total.mrr) USD + "
                    + "\(report.total.unconverted["JPY"]?.mrr ?? 0) JPY, revenue \(report.total.revenue), refunds \(report.total.refunds)"
            )
            try await Self.checkDailySeries(people, store: store, harness: h)
            try await Self.checkCohorts(people, store: store, harness: h)
            // Another app's filter sees none of it.
            var other = SubscriptionAnalytics(since: Self.since, until: Self.until)
            try await store.forEachSubscriptionLedger(bundleID: "com.example.other") { other.add($0) }
            #expect(other.total == AnalyticsFigures())
        }
    }

    /// The daily series, stored and read back through `analytics_daily_series`, equals the timeline's
    /// figures of each day's window, for every day, product and environment.
    static func checkDailySeries(_ people: [Subscriber], store: any AnalyticsStore, harness h: JobHarness) async throws
    {
        let catalogue = ProductCatalogue(
            products: Dictionary(
                uniqueKeysWithValues: products.map {
                    ($0.id, ProductCatalogue.Product(period: $0.period, listPrices: ["USD": $0.prices["USD"]!]))
                }))
        var daily = DailyAnalytics(
            from: since, through: until.addingTimeInterval(-1), catalogue: catalogue, reportingCurrency: "USD")
        try await store.forEachSubscriptionLedger(bundleID: nil, pageSize: 53) { daily.add($0) }
        #expect(daily.range?.first == "2026-03-02" && daily.range?.last == "2026-04-30")
        try await store.replaceAnalyticsDays(
            first: "2026-03-02", last: "2026-04-30", bundleID: nil, rows: daily.rows(rates: rates), computedAt: Date())
        let stored = try await DashboardViewsTests.query(
            h,
            """
            SELECT day, product_id, environment, active_subscriptions, active_trials, new_subscriptions, new_trials,
                trial_conversions, churned, reactivations, mrr, revenue, refunds, net_revenue
            FROM analytics_daily_series ORDER BY day, product_id, environment
            """)
        var found: [String: [String: Int]] = [:]
        for row in stored {
            let key = ["day", "product_id", "environment"].map { DashboardViewsTests.text(row, $0) ?? "" }
            var values: [String: Int] = [:]
            for column in [
                "active_subscriptions", "active_trials", "new_subscriptions", "new_trials", "trial_conversions",
                "churned", "reactivations",
            ] {
                values[column] = DashboardViewsTests.int(row, column)
            }
            for column in ["mrr", "revenue", "refunds", "net_revenue"] {
                values[column] = DashboardViewsTests.double(row, column).map { Int(($0 * 100).rounded()) }
            }
            found[key.joined(separator: " ")] = values
        }
        var compared = 0
        for offset in 0..<60 {
            let start = since.addingTimeInterval(Double(offset) * day)
            let name = String(Timestamp.string(start).prefix(10))
            for environment in ["Production", "Sandbox"] {
                for (product, figures) in expected(
                    people, since: start, until: start.addingTimeInterval(day), environment: environment)
                {
                    let values = found["\(name) \(product) \(environment)"] ?? [:]
                    func cents(_ amounts: Amounts) -> Int {
                        Int((rates.convert(amounts).converted * 100 as NSDecimalNumber).int64Value)
                    }
                    let wanted: [String: Int] = [
                        "active_subscriptions": figures.activeSubscriptions, "active_trials": figures.activeTrials,
                        "new_subscriptions": figures.newSubscriptions, "new_trials": figures.newTrials,
                        "trial_conversions": figures.trialConversions, "churned": figures.churned,
                        "reactivations": figures.reactivations, "mrr": cents(figures.mrr),
                        "revenue": cents(figures.revenue), "refunds": cents(figures.refunds),
                        "net_revenue": cents(figures.revenue) - cents(figures.refunds),
                    ]
                    if wanted.values.allSatisfy({ $0 == 0 }) && values.isEmpty { continue }
                    #expect(values == wanted, "\(name) \(product) \(environment)")
                    compared += 1
                }
            }
        }
        #expect(compared > 100, "day rows compared: \(compared)")
        #expect(stored.contains { DashboardViewsTests.text($0, "environment") == "Sandbox" })
    }

    /// Each cohort's retention, as of `until`, equals the timeline's: entitled and paid one day after the
    /// end of each period since the first paid one; the stored view says the same.
    static func checkCohorts(_ people: [Subscriber], store: any AnalyticsStore, harness h: JobHarness) async throws {
        var expected: [String: CohortRetention.Cohort] = [:]
        for person in people where person.counted {
            guard let first = person.periods.first(where: { !$0.trial }), first.purchased < until else { continue }
            let month = String(Timestamp.string(first.purchased).prefix(7))
            var cohort = expected[month] ?? CohortRetention.Cohort(month: month)
            cohort.subscriptions += 1
            for k in 1...CohortRetention.periods {
                let moment = person.product.period.advance(first.purchased, by: k).addingTimeInterval(day)
                guard moment <= until else { break }
                cohort.observed[k - 1] += 1
                if person.entitlement(at: moment) == true { cohort.retained[k - 1] += 1 }
            }
            expected[month] = cohort
        }
        var cohorts = CohortRetention(asOf: until)
        try await store.forEachSubscriptionLedger(bundleID: nil, pageSize: 41) { cohorts.add($0) }
        #expect(cohorts.table == expected.values.sorted { $0.month < $1.month })
        #expect(cohorts.table.map(\.month) == ["2026-01", "2026-02", "2026-03", "2026-04"])
        #expect(cohorts.table.contains { $0.retained[0] > 0 && $0.retained[0] < $0.observed[0] })
        try await store.replaceAnalyticsCohorts(
            bundleID: nil, cohorts: ["com.example.analytics": cohorts.table], computedAt: Date())
        let january = try await DashboardViewsTests.query(
            h,
            """
            SELECT period, subscriptions, observed, retained, retention FROM analytics_cohort_retention
            WHERE cohort_month = '2026-01' ORDER BY period
            """)
        let wanted = try #require(expected["2026-01"])
        #expect(january.count == CohortRetention.periods)
        for row in january {
            let period = try #require(DashboardViewsTests.int(row, "period"))
            #expect(DashboardViewsTests.int(row, "retained") == wanted.retained[period - 1])
            #expect(DashboardViewsTests.int(row, "observed") == wanted.observed[period - 1])
            let share = DashboardViewsTests.double(row, "retention")
            #expect(
                share.map { abs($0 - (wanted.shares[period - 1] ?? -1)) < 1e-9 } ?? (wanted.observed[period - 1] == 0))
        }
    }

    static func compare(_ actual: AnalyticsFigures, _ expected: AnalyticsFigures, _ name: String) {
        #expect(actual.activeSubscriptions == expected.activeSubscriptions, "\(name) active")
        #expect(actual.activeTrials == expected.activeTrials, "\(name) trials")
        #expect(actual.activeAtSince == expected.activeAtSince, "\(name) active at since")
        #expect(actual.newSubscriptions == expected.newSubscriptions, "\(name) new")
        #expect(actual.newTrials == expected.newTrials, "\(name) new trials")
        #expect(actual.trialConversions == expected.trialConversions, "\(name) conversions")
        #expect(actual.newTrialsConverted == expected.newTrialsConverted, "\(name) funnel converted")
        #expect(actual.newTrialsInTrial == expected.newTrialsInTrial, "\(name) funnel in trial")
        #expect(actual.churned == expected.churned, "\(name) churned")
        #expect(actual.reactivations == expected.reactivations, "\(name) reactivations")
        for currency in ["USD", "EUR", "JPY"] {
            #expect(
                ExchangeRates.cents(actual.mrr.byCurrency[currency] ?? 0)
                    == ExchangeRates.cents(expected.mrr.byCurrency[currency] ?? 0), "\(name) mrr \(currency)")
            #expect(
                actual.revenue.byCurrency[currency] ?? 0 == expected.revenue.byCurrency[currency] ?? 0,
                "\(name) revenue \(currency)")
            #expect(
                actual.refunds.byCurrency[currency] ?? 0 == expected.refunds.byCurrency[currency] ?? 0,
                "\(name) refunds \(currency)")
        }
    }
}
