import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// On a seeded random population (trials, grace periods, refunds kept and reversed, extensions, upgrades
/// and downgrades, price changes, storefront changes between USD, EUR and JPY), for random windows not
/// aligned to days: the movement adds up to MRR at `until` (the `mrr` figure) minus MRR at `since` in every
/// currency, the days chain and add up to the window, and each day equals that day's window computed alone.
@Suite("MRRMovement: the movement sums to MRR(until) − MRR(since) on random populations and windows")
struct MRRMovementPropertyTests {
    static let t0 = EntitlementSpansTests.t0
    static func hour(_ n: Int) -> Date { t0.addingTimeInterval(Double(n) * 3_600) }
    static let catalogue = ProductCatalogue(products: [
        "m": .init(period: .month), "y": .init(period: .year), "w": .init(period: .week),
    ])
    static let prices: [String: [String: [Int64]]] = [
        "m": ["USD": [9_990, 4_990], "EUR": [8_990], "JPY": [1_500_000]],
        "y": ["USD": [99_990], "EUR": [89_990, 44_990], "JPY": [15_000_000]],
        "w": ["USD": [2_990], "EUR": [2_490], "JPY": [450_000]],
    ]

    /// A random subscription: up to six periods of random products, prices and currencies (a storefront
    /// change now and then), some trials, refunds, and the facts of `EntitlementSpansTests`.
    static func ledger(_ index: Int, _ random: inout SeededGenerator) -> SubscriptionLedger {
        var transactions: [LedgerTransaction] = []
        var facts: [SubscriptionFact] = []
        var start = Int.random(in: 0...1_500, using: &random)
        var currency = ["USD", "EUR", "JPY"].randomElement(using: &random) ?? "USD"
        for period in 0..<Int.random(in: 1...6, using: &random) {
            let product = ["m", "y", "w"].randomElement(using: &random) ?? "m"
            let length = product == "w" ? 168 : product == "m" ? 720 : Int.random(in: 720...8_760, using: &random)
            if Int.random(in: 0..<8, using: &random) == 0 { currency = currency == "USD" ? "EUR" : "USD" }
            let trial = period == 0 && Int.random(in: 0..<3, using: &random) == 0
            let refunded =
                Int.random(in: 0..<6, using: &random) == 0 ? start + Int.random(in: 0...length, using: &random) : nil
            let id = "s\(index)t\(period)"
            transactions.append(
                LedgerTransaction(
                    transactionID: id, originalTransactionID: "s\(index)", productID: product,
                    purchasedAt: hour(start), expiresAt: hour(start + length),
                    priceMilliunits: trial ? 0 : prices[product]?[currency]?.randomElement(using: &random),
                    currency: currency, isTrial: trial, ownershipType: "PURCHASED", revokedAt: refunded.map(hour),
                    revocationType: refunded == nil ? nil : "REFUND_FULL",
                    transactionReason: Bool.random(using: &random) ? "PURCHASE" : "RENEWAL", origin: .statusAnswer))
            facts += EntitlementSpansTests.randomFacts(after: id, from: start, length: length, &random)
            start += length + Int.random(in: -48...1_200, using: &random)
        }
        return SubscriptionLedger(
            originalTransactionID: "s\(index)", environment: .production, facts: facts, transactions: transactions)
    }

    /// Amounts without their zero entries, to compare.
    static func nonZero(_ amounts: Amounts) -> [String: Decimal] { amounts.byCurrency.filter { $0.value != 0 } }

    static func analytics(_ ledgers: [SubscriptionLedger], since: Date, until: Date) -> SubscriptionAnalytics {
        var analytics = SubscriptionAnalytics(since: since, until: until, catalogue: catalogue)
        for ledger in ledgers { analytics.add(ledger) }
        return analytics
    }

    @Test("on 40 random windows of a 300-subscription population", arguments: [UInt64(11), 29])
    func movementAddsUp(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let ledgers = (0..<300).map { Self.ledger($0, &random) }
        var buckets = Set<MRRMovement.Bucket>()
        for _ in 0..<40 {
            let since = Self.hour(Int.random(in: 0...3_000, using: &random))
            let until = since.addingTimeInterval(Double(Int.random(in: 1...(24 * 45), using: &random)) * 3_600)
            let analytics = Self.analytics(ledgers, since: since, until: until)
            let window = analytics.movement.window
            let atSince = Self.analytics(ledgers, since: since.addingTimeInterval(-3_600), until: since).total.mrr
            #expect(Self.nonZero(window.atEnd) == Self.nonZero(analytics.total.mrr))
            #expect(Self.nonZero(window.atStart) == Self.nonZero(atSince))
            #expect(Self.nonZero(window.net) == Self.nonZero(window.atEnd - window.atStart))
            var days = MRRMovement()
            var previousEnd = window.atStart
            for (index, day) in analytics.movement.days.enumerated() {
                #expect(Self.nonZero(day.atStart) == Self.nonZero(previousEnd))
                previousEnd = day.atEnd
                days.add(day)
                // Each day alone, for every fifth day and the last (the whole check costs a pass a day).
                guard index % 5 == 0 || index == analytics.movement.days.count - 1 else { continue }
                let boundaries = analytics.movement.boundaries
                let alone = Self.analytics(ledgers, since: boundaries[index], until: boundaries[index + 1])
                let window = alone.movement.window
                #expect(window.buckets == day.buckets, "day \(index) of \(since)..<\(until)")
                #expect(Self.nonZero(window.atStart) == Self.nonZero(day.atStart))
                #expect(Self.nonZero(window.atEnd) == Self.nonZero(day.atEnd))
            }
            #expect(Self.nonZero(previousEnd) == Self.nonZero(window.atEnd))
            #expect(Self.nonZero(days.net) == Self.nonZero(window.net))
            buckets.formUnion(MRRMovement.Bucket.allCases.filter { !Self.nonZero(window[$0]).isEmpty })
        }
        // The population exercises every bucket.
        #expect(buckets == Set(MRRMovement.Bucket.allCases))
    }
}
