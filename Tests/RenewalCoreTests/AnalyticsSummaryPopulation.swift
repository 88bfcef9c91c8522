import Foundation
import RenewalCore
import RenewalTesting

/// A seeded population of subscription ledgers for the summary property test, built directly in Core:
/// trials, renewal chains with early and late renewals, lapses (short ones recovered, long ones and
/// `PURCHASE`s reactivating), upgrades, refunds full, prorated and family, multiseat seat refunds, grace
/// periods (some recovered), renewal-date extensions, reversed refunds, several products, currencies and
/// apps, verifyReceipt rows without a price, family-shared copies and sandbox ones. About a tenth of the
/// dates fall exactly on a UTC midnight, where a window's bound is.
struct SummaryPopulation {
    static let day: TimeInterval = 86_400
    /// 2026-01-01T00:00:00Z.
    static let origin = Date(timeIntervalSince1970: 1_767_225_600)
    static let products: [(id: String?, days: Double)] = [
        ("com.example.weekly", 7), ("com.example.monthly", 30), ("com.example.yearly", 365),
        ("com.example.quarterly", 91), (nil, 30),
    ]
    static let catalogue = ProductCatalogue(products: [
        "com.example.weekly": .init(listPrices: ["USD": 2.99, "EUR": 2.99]),
        "com.example.monthly": .init(period: .month, listPrices: ["USD": 9.99]),
        "com.example.quarterly": .init(period: .threeMonths),
    ])

    var ledgers: [SubscriptionLedger] = []
    var random: SeededGenerator

    init(count: Int, seed: UInt64) {
        random = SeededGenerator(seed: seed)
        for index in 0..<count { ledgers.append(ledger(id: "s\(seed)-\(index)")) }
    }

    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &random) < p }

    /// A moment near `date`: on a midnight a tenth of the time, else at a random millisecond of its day.
    mutating func moment(_ date: Date) -> Date {
        let dayStart = (date.timeIntervalSince1970 / Self.day).rounded(.down) * Self.day
        if chance(0.1) { return Date(timeIntervalSince1970: dayStart) }
        return Date(timeIntervalSince1970: dayStart + Double(Int.random(in: 0..<86_400_000, using: &random)) / 1000)
    }

    mutating func ledger(id: String) -> SubscriptionLedger {
        let environment: AppStoreEnvironment? = chance(0.9) ? .production : (chance(0.5) ? .sandbox : nil)
        var chain = Chain(id: id, product: Self.products.randomElement(using: &random)!)
        chain.priced = chance(0.7)
        chain.currency =
            chain.priced ? ["USD", "EUR", "JPY"].randomElement(using: &random)! : (chance(0.5) ? "EUR" : nil)
        chain.ownership = chance(0.05) ? "FAMILY_SHARED" : (chance(0.5) ? "PURCHASED" : nil)
        chain.quantity = chance(0.06) ? 3 : 1
        var at = moment(Self.origin.addingTimeInterval(Double.random(in: -90...160, using: &random) * Self.day))
        if chance(0.35) {
            at = chain.append(at: at, days: chance(0.5) ? 3 : 7, trial: true, &self)
        }
        let periods = Int.random(in: 0...8, using: &random)
        for _ in 0..<periods {
            if chance(0.12) {
                // A lapse: recovered within days, or a return after weeks or months.
                at = moment(at.addingTimeInterval(Double.random(in: 1...120, using: &random) * Self.day))
                chain.reason = chance(0.4) ? "PURCHASE" : "RENEWAL"
            } else {
                at = at.addingTimeInterval(Double.random(in: -1.5...0.5, using: &random) * 3_600)
                chain.reason = "RENEWAL"
            }
            if chance(0.08) { chain.upgrade(&self) }
            let days = chain.product.days + Double.random(in: -1...1, using: &random)
            at = chain.append(at: at, days: days, &self)
            if chance(0.06) {
                chain.refund(&self)
                if chance(0.5) { break }
            }
        }
        chain.decorate(&self)
        return SubscriptionLedger(
            originalTransactionID: id, bundleID: chance(0.5) ? "com.example.a" : "com.example.b",
            environment: environment, facts: chain.facts, transactions: chain.transactions)
    }
}

/// One subscription's transactions as they are generated, newest last.
struct Chain {
    var id: String
    var product: (id: String?, days: Double)
    var priced = true
    var currency: String?
    var ownership: String?
    var quantity = 1
    var reason = "PURCHASE"
    var transactions: [LedgerTransaction] = []
    var facts: [SubscriptionFact] = []

    /// A period purchased at `at` lasting `days`; returns its expiry.
    mutating func append(at: Date, days: Double, trial: Bool = false, _ p: inout SummaryPopulation) -> Date {
        let expires = p.moment(at.addingTimeInterval(days * SummaryPopulation.day))
        let price: Int64? = trial || !priced ? nil : Int64.random(in: 990...12_990, using: &p.random)
        transactions.append(
            LedgerTransaction(
                transactionID: "\(id)-\(transactions.count)", originalTransactionID: id, productID: product.id,
                purchasedAt: at, expiresAt: expires, priceMilliunits: price, currency: currency, isTrial: trial,
                quantity: trial ? 1 : quantity, ownershipType: ownership, transactionReason: reason,
                origin: priced ? .statusAnswer : .verifyReceipt))
        return expires
    }

    /// Ends the newest period at the next purchase, as Apple does for an upgrade, and moves to another product.
    mutating func upgrade(_ p: inout SummaryPopulation) {
        guard let last = transactions.indices.last, let purchased = transactions[last].purchasedAt,
            let expires = transactions[last].expiresAt, expires > purchased
        else { return }
        let at = Date(
            timeIntervalSince1970: Double.random(
                in: purchased.timeIntervalSince1970..<expires.timeIntervalSince1970, using: &p.random))
        transactions[last].expiresAt = at
        transactions[last].revokedAt = at
        transactions[last].isUpgraded = true
        product = SummaryPopulation.products.randomElement(using: &p.random)!
    }

    /// Refunds the newest period: in full, prorated, or a family member losing access.
    mutating func refund(_ p: inout SummaryPopulation) {
        guard let last = transactions.indices.last, let purchased = transactions[last].purchasedAt else { return }
        transactions[last].revokedAt = p.moment(
            purchased.addingTimeInterval(Double.random(in: 0...20, using: &p.random) * SummaryPopulation.day))
        switch Int.random(in: 0..<5, using: &p.random) {
        case 0: transactions[last].revocationType = "FAMILY_REVOKE"
        case 1, 2:
            transactions[last].revocationType = "REFUND_PRORATED"
            transactions[last].revocationPercentage = Int.random(in: 1...99_999, using: &p.random)
        default: transactions[last].revocationType = "REFUND_FULL"
        }
    }

    /// Facts after the chain: a grace period (sometimes ended by a recovered renewal), an extension
    /// stated late, a refund Apple reversed, seats refunded.
    mutating func decorate(_ p: inout SummaryPopulation) {
        guard let last = transactions.last, let expires = last.expiresAt else { return }
        if p.chance(0.2) {
            let end = p.moment(
                expires.addingTimeInterval(Double.random(in: 1...16, using: &p.random) * SummaryPopulation.day))
            facts.append(
                SubscriptionFact(
                    originalTransactionID: id, kind: .gracePeriod,
                    transactionID: p.chance(0.9) ? last.transactionID : nil, startsAt: expires, endsAt: end,
                    statedAt: expires))
            if p.chance(0.4) {
                reason = "RENEWAL"
                let at = p.moment(
                    expires.addingTimeInterval(Double.random(in: 0...end.timeIntervalSince(expires), using: &p.random)))
                _ = append(at: at, days: product.days, &p)
            }
        } else if p.chance(0.1), let index = transactions.indices.last {
            let later = p.moment(
                expires.addingTimeInterval(Double.random(in: 1...10, using: &p.random) * SummaryPopulation.day))
            transactions[index].expiresAt = later
            let stated = expires.addingTimeInterval(Double.random(in: -3...3, using: &p.random) * SummaryPopulation.day)
            facts.append(
                SubscriptionFact(
                    originalTransactionID: id, kind: .renewalExtension, transactionID: last.transactionID,
                    startsAt: expires, endsAt: later, statedAt: stated))
        }
        if p.chance(0.05), let target = transactions.randomElement(using: &p.random),
            let purchased = target.purchasedAt, target.revokedAt == nil
        {
            let revoked = p.moment(
                purchased.addingTimeInterval(Double.random(in: 0...5, using: &p.random) * SummaryPopulation.day))
            facts.append(
                SubscriptionFact(
                    originalTransactionID: id, kind: .revocation, transactionID: target.transactionID,
                    startsAt: revoked, endsAt: revoked.addingTimeInterval(2 * SummaryPopulation.day), value: "reversed",
                    statedAt: revoked))
        }
        if quantity > 1, let index = transactions.lastIndex(where: { !$0.isTrial }), p.chance(0.5) {
            transactions[index].revokedSeatQuantity = Int.random(in: 1...3, using: &p.random)
            transactions[index].seatsRevokedAt = transactions[index].purchasedAt.map {
                p.moment($0.addingTimeInterval(2 * SummaryPopulation.day))
            }
        }
    }
}
