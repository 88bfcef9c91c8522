import Foundation
import RenewalCore
import RenewalReports
import RenewalTesting
import Testing

/// The report rounds the movement to cents so the identity still holds in what a reader sees: weekly
/// prices (52/12 of a price a month, six decimals), rates with four decimals and a currency without a rate,
/// on random ledgers and random windows.
@Suite("MRR movement in the report: the buckets add up to net, and net to mrr_until − mrr_since, in cents")
struct MRRMovementRoundingTests {
    static let t0 = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    static let catalogue = ProductCatalogue(products: [
        "w": .init(period: .week), "m": .init(period: .month), "y": .init(period: .year),
    ])
    static let rates = ExchangeRates(
        reportingCurrency: "USD", rates: ["EUR": Decimal(string: "1.0837")!, "GBP": Decimal(string: "1.2719")!])

    static func ledger(_ index: Int, _ random: inout SeededGenerator) -> SubscriptionLedger {
        var transactions: [LedgerTransaction] = []
        var start = Double(Int.random(in: 0...2_000, using: &random))
        for period in 0..<Int.random(in: 1...8, using: &random) {
            let product = ["w", "m", "y"].randomElement(using: &random) ?? "w"
            let hours: Double = product == "w" ? 168 : product == "m" ? 720 : 8_760
            let currency = ["USD", "EUR", "GBP", "JPY"].randomElement(using: &random) ?? "USD"
            transactions.append(
                LedgerTransaction(
                    transactionID: "r\(index)t\(period)", originalTransactionID: "r\(index)", productID: product,
                    purchasedAt: t0.addingTimeInterval(start * 3_600),
                    expiresAt: t0.addingTimeInterval((start + hours) * 3_600),
                    priceMilliunits: Int64.random(in: 990...99_990, using: &random), currency: currency,
                    ownershipType: "PURCHASED", transactionReason: "RENEWAL", origin: .statusAnswer))
            start += hours + Double(Int.random(in: -24...600, using: &random))
        }
        return SubscriptionLedger(
            originalTransactionID: "r\(index)", environment: .production, transactions: transactions)
    }

    static func identity(_ movement: AnalyticsReport.Movement) -> Bool {
        movement.new + movement.expansion + movement.contraction + movement.churned + movement.reactivation
            == movement.net && movement.net == movement.mrrUntil - movement.mrrSince
    }

    @Test("30 random windows of 400 random subscriptions")
    func addsUpInCents() throws {
        var random = SeededGenerator(seed: 45)
        let ledgers = (0..<400).map { Self.ledger($0, &random) }
        for _ in 0..<30 {
            let since = Self.t0.addingTimeInterval(Double(Int.random(in: 0...3_000, using: &random)) * 3_600)
            let until = since.addingTimeInterval(Double(Int.random(in: 1...(24 * 40), using: &random)) * 3_600)
            var analytics = SubscriptionAnalytics(since: since, until: until, catalogue: Self.catalogue)
            for ledger in ledgers { analytics.add(ledger) }
            let report = AnalyticsReport(analytics, rates: Self.rates, bundleID: nil)
            let window = try #require(report.mrrMovement)
            #expect(Self.identity(window.movement), "\(window.movement)")
            #expect(window.movement.mrrUntil == report.total.mrr)
            for (currency, movement) in window.byCurrency { #expect(Self.identity(movement), "\(currency)") }
            #expect((window.byCurrency["JPY"]?.mrrUntil ?? 0) == (report.total.unconverted["JPY"]?.mrr ?? 0))
            var previous = window.movement.mrrSince
            for day in report.mrrMovementDaily {
                #expect(Self.identity(day.movement), "\(day.day)")
                #expect(day.movement.mrrSince == previous)
                previous = day.movement.mrrUntil
                #expect(day.unconverted.keys.allSatisfy { $0 == "JPY" })
            }
            #expect(previous == window.movement.mrrUntil)
            #expect(report.mrrMovementDaily.map(\.movement.net).reduce(0, +) == window.movement.net)
        }
    }
}
