import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// The daily series' MRR movement (`DailyAnalytics.movements`, schema 28's columns): on seeded random
/// populations, each day's buckets summed over apps and products equal `MRRMovementSeries`' day of the
/// same window (what `mrr_movement_daily` prints), exactly, per currency, in Production and in Sandbox.
@Suite("DailyAnalytics: each day's MRR movement equals MRRMovement of [day, next day)")
struct DailyMovementTests {
    typealias Buckets = [MRRMovement.Bucket: [String: Decimal]]

    static func nonZero(_ movement: MRRMovement) -> Buckets {
        var buckets: Buckets = [:]
        for bucket in MRRMovement.Bucket.allCases {
            let amounts = movement[bucket].byCurrency.filter { $0.value != 0 }
            if !amounts.isEmpty { buckets[bucket] = amounts }
        }
        return buckets
    }

    /// The daily series' movement of each day (summed over apps and products) and the series' days, for
    /// the days from `first` through `first + count − 1`.
    static func compare(
        _ ledgers: [SubscriptionLedger], first: Date, count: Int, catalogue: ProductCatalogue,
        environment: AppStoreEnvironment
    ) -> (daily: [Buckets], series: [Buckets]) {
        let last = first.addingTimeInterval(Double(count - 1) * 86_400)
        var daily = DailyAnalytics(from: first, through: last, catalogue: catalogue, reportingCurrency: "USD")
        var analytics = SubscriptionAnalytics(
            since: first, until: last.addingTimeInterval(86_400), catalogue: catalogue, environment: environment)
        for ledger in ledgers {
            daily.add(ledger)
            analytics.add(ledger)
        }
        let names = DailyAnalytics.dayNames(from: first, until: last.addingTimeInterval(86_400))
        let summed = names.map { name in
            var day = MRRMovement()
            for (key, movement) in daily.movements where key.day == name && key.environment == environment.rawValue {
                day.add(movement)
            }
            return nonZero(day)
        }
        return (summed, analytics.movement.days.map(nonZero))
    }

    @Test(
        "MRRMovementPropertyTests' population (storefront changes, upgrades, trials, refunds, grace): 12 random ranges",
        arguments: [UInt64(7), 31])
    func equalsTheSeries(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let ledgers = (0..<300).map { MRRMovementPropertyTests.ledger($0, &random) }
        var seen = Set<MRRMovement.Bucket>()
        for _ in 0..<12 {
            let hour = Int.random(in: 0...3_000, using: &random)
            let first = DailyAnalytics.dayStart(of: MRRMovementPropertyTests.hour(hour))
            let count = Int.random(in: 1...40, using: &random)
            let (daily, series) = Self.compare(
                ledgers, first: first, count: count, catalogue: MRRMovementPropertyTests.catalogue,
                environment: .production)
            #expect(daily == series, "\(count) days from \(first)")
            for day in daily { seen.formUnion(day.keys) }
        }
        #expect(seen == Set(MRRMovement.Bucket.allCases), "every bucket exercised: \(seen)")
    }

    @Test(
        "SummaryPopulation (apps, multiseat, family copies, sandbox, unpriced rows): Production and Sandbox",
        arguments: [UInt64(3), 19])
    func equalsTheSeriesInBothEnvironments(seed: UInt64) {
        let population = SummaryPopulation(count: 400, seed: seed)
        var random = SeededGenerator(seed: seed)
        for environment in [AppStoreEnvironment.production, .sandbox] {
            let first = SummaryPopulation.origin.addingTimeInterval(
                Double(Int.random(in: 0...300, using: &random)) * 86_400)
            let (daily, series) = Self.compare(
                population.ledgers, first: first, count: 35, catalogue: SummaryPopulation.catalogue,
                environment: environment)
            #expect(daily == series, "\(environment) from \(first)")
            #expect(daily.contains { !$0.isEmpty }, "something moved in \(environment)")
        }
    }

    @Test("the rows: the reporting currency converted, a currency without a rate apart, net the buckets' sum")
    func rowsConvertAndKeepApart() {
        let day = Date(timeIntervalSince1970: 1_767_225_600)
        func paid(_ id: String, _ currency: String, _ milliunits: Int64, at hours: Double) -> SubscriptionLedger {
            SubscriptionLedger(
                originalTransactionID: id, bundleID: "app", environment: .production,
                transactions: [
                    LedgerTransaction(
                        transactionID: id + "-1", originalTransactionID: id, productID: "m",
                        purchasedAt: day.addingTimeInterval(hours * 3_600),
                        expiresAt: day.addingTimeInterval(hours * 3_600 + 30 * 86_400), priceMilliunits: milliunits,
                        currency: currency, isTrial: false, ownershipType: "PURCHASED", transactionReason: "PURCHASE",
                        origin: .statusAnswer)
                ])
        }
        let catalogue = ProductCatalogue(products: ["m": .init(period: .month)])
        var daily = DailyAnalytics(from: day, through: day, catalogue: catalogue, reportingCurrency: "USD")
        daily.add(paid("a", "USD", 9_990, at: 2))
        daily.add(paid("b", "EUR", 8_990, at: 3))
        daily.add(paid("c", "JPY", 1_500_000, at: 4))
        let rows = daily.rows(rates: ExchangeRates(reportingCurrency: "USD", rates: ["EUR": 1.1]))
        #expect(rows.count == 2, "\(rows)")
        let converted = rows.first { $0.converted }
        #expect(converted?.movementCents == [.new: 999 + 989], "9.99 USD and 8.99 EUR × 1.1: \(rows)")
        #expect(converted?.netNewMRRCents == 1_988)
        #expect(converted?.mrrCents == 1_988, "the day's net equals its MRR, from none the day before")
        let yen = rows.first { !$0.converted }
        #expect(yen?.currency == "JPY" && yen?.movementCents == [.new: 150_000], "\(rows)")
    }
}
