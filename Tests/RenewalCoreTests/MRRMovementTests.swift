import Foundation
import Testing

@testable import RenewalCore

/// MRR movement on hand-built ledgers, one bucket at a time: each subscription's MRR at `since` and at
/// `until` compared, and each day's the same way.
@Suite("MRRMovement: new, expansion, contraction, churned and reactivation MRR on hand-built ledgers")
struct MRRMovementTests {
    static let t0 = Date(timeIntervalSince1970: 1_793_491_200)  // 2026-11-01T00:00:00Z
    static func day(_ n: Double) -> Date { t0.addingTimeInterval(n * 86_400) }
    static let catalogue = ProductCatalogue(products: [
        "m": .init(period: .month), "y": .init(period: .year), "w": .init(period: .week),
    ])

    /// A paid (or trial) period of `product` at `price` units of `currency`.
    static func period(
        _ id: String, _ product: String = "m", from start: Double, to end: Double, price: String = "10",
        currency: String = "USD", trial: Bool = false, reason: String = "RENEWAL", refundedOn: Double? = nil
    ) -> LedgerTransaction {
        let milliunits = Int64((Double(price) ?? 0) * 1000)
        return LedgerTransaction(
            transactionID: id, originalTransactionID: "otid", productID: product, purchasedAt: day(start),
            expiresAt: day(end), priceMilliunits: trial ? 0 : milliunits, currency: currency, isTrial: trial,
            ownershipType: "PURCHASED", revokedAt: refundedOn.map(day),
            revocationType: refundedOn == nil ? nil : "REFUND_FULL", transactionReason: reason, origin: .statusAnswer)
    }

    /// The analytics of `[day since, day until)` over one subscription per ledger.
    static func analytics(since: Double = 10, until: Double = 40, _ ledgers: [[LedgerTransaction]])
        -> SubscriptionAnalytics
    {
        var analytics = SubscriptionAnalytics(since: day(since), until: day(until), catalogue: catalogue)
        for (index, transactions) in ledgers.enumerated() {
            analytics.add(
                SubscriptionLedger(
                    originalTransactionID: "otid\(index)", environment: .production,
                    transactions: transactions.map { transaction in
                        var copy = transaction
                        copy.originalTransactionID = "otid\(index)"
                        return copy
                    }))
        }
        return analytics
    }

    static func amount(_ amounts: Amounts, _ currency: String = "USD") -> Decimal {
        amounts.byCurrency[currency] ?? 0
    }

    @Test("a first paid purchase in the window is new MRR, a trial converted in it too; a renewal moves nothing")
    func newMRR() {
        let movement = Self.analytics([
            [Self.period("a1", from: 12, to: 42, reason: "PURCHASE")],
            [Self.period("b0", from: 5, to: 12, trial: true), Self.period("b1", from: 12, to: 42, price: "20")],
            [Self.period("c1", from: 0, to: 30), Self.period("c2", from: 30, to: 60)],
        ]).movement.window
        #expect(Self.amount(movement[.new]) == 30)
        #expect(movement.net == movement[.new])
        #expect(Self.amount(movement.atStart) == 10 && Self.amount(movement.atEnd) == 40)
    }

    @Test("an upgrade is expansion, a downgrade contraction, by the monthly difference")
    func expansionAndContraction() {
        let movement = Self.analytics([
            // 10 a month, then a year at 240 (20 a month).
            [Self.period("u1", from: 0, to: 30), Self.period("u2", "y", from: 20, to: 385, price: "240")],
            // 240 a year (20 a month), then 10 a month from day 30.
            [Self.period("d1", "y", from: -300, to: 30, price: "240"), Self.period("d2", from: 30, to: 60)],
        ]).movement.window
        #expect(Self.amount(movement[.expansion]) == 10)
        #expect(Self.amount(movement[.contraction]) == -10)
        #expect(Self.amount(movement.net) == 0)
    }

    @Test("paid at since and not at until is churned MRR, a refund too; a trial lapsing moves nothing")
    func churned() {
        let movement = Self.analytics([
            [Self.period("e1", from: 0, to: 30)],
            [Self.period("r1", from: 5, to: 35, price: "12", refundedOn: 20)],
            [Self.period("t1", from: 5, to: 20, trial: true)],
        ]).movement.window
        #expect(Self.amount(movement[.churned]) == -22)
        #expect(Self.amount(movement.net) == -22)
        #expect(movement[.new].byCurrency.isEmpty && movement[.reactivation].byCurrency.isEmpty)
    }

    @Test("MRR back from nothing after an earlier paid period is reactivation, the daily series churns and returns")
    func reactivationAndDays() {
        let lapsed = Self.analytics([[Self.period("l1", from: -40, to: -10), Self.period("l2", from: 15, to: 45)]])
        #expect(Self.amount(lapsed.movement.window[.reactivation]) == 10)
        #expect(lapsed.movement.window[.new].byCurrency.isEmpty)
        // Paid at both ends with a lapse from day 20 to day 25: nothing in the window, churn and return by day.
        let gap = Self.analytics([[Self.period("g1", from: 0, to: 20), Self.period("g2", from: 25, to: 55)]]).movement
        #expect(gap.window.net.byCurrency.values.allSatisfy { $0 == 0 })
        #expect(gap.dayNames.first == "2026-11-11" && gap.days.count == 30)
        // An expiry at midnight is the end of the day before: MRR at a day's end is MRR at the next midnight.
        #expect(Self.amount(gap.days[9][.churned]) == -10)
        #expect(Self.amount(gap.days[14][.reactivation]) == 10)
        var sum = MRRMovement()
        for day in gap.days { sum.add(day) }
        #expect(Self.amount(sum.net) == 0 && Self.amount(gap.window.net) == 0)
    }

    @Test("a storefront change is contraction in the old currency and expansion in the new; each adds up apart")
    func currencyMix() {
        let analytics = Self.analytics([
            [Self.period("x1", from: 0, to: 30, price: "9", currency: "EUR"), Self.period("x2", from: 30, to: 60)],
            [Self.period("j1", from: 15, to: 45, price: "1500", currency: "JPY", reason: "PURCHASE")],
        ])
        let movement = analytics.movement.window
        #expect(Self.amount(movement[.contraction], "EUR") == -9)
        #expect(Self.amount(movement[.expansion], "USD") == 10)
        #expect(Self.amount(movement[.new], "JPY") == 1500)
        for currency in ["EUR", "USD", "JPY"] {
            #expect(
                Self.amount(movement.net, currency)
                    == Self.amount(movement.atEnd, currency) - Self.amount(movement.atStart, currency))
        }
        #expect(movement.atEnd == analytics.total.mrr)
        #expect(analytics.movement.payingAtUntil == ["USD": 1, "JPY": 1])
    }

    @Test("refund rate by month of purchase, trial conversion by trial month, LTV by first-payment month")
    func cohortFigures() {
        let analytics = Self.analytics(
            since: 0, until: 100,
            [
                [Self.period("p1", from: 0, to: 30), Self.period("p2", from: 30, to: 60, refundedOn: 40)],
                [Self.period("q0", from: 2, to: 9, trial: true), Self.period("q1", from: 9, to: 39, price: "20")],
                [Self.period("s0", from: 3, to: 10, trial: true)],
            ])
        let figures = analytics.cohortFigures
        #expect(figures.refundMonths["2026-11"]?.transactions == 2)
        #expect(figures.refundMonths["2026-12"]?.refunded == 1)
        #expect(figures.refundMonths["2026-12"].map { Self.amount($0.refunds) } == 10)
        let trials = figures.trialCohorts["2026-11"]
        #expect(trials?.started == 2 && trials?.converted == 1 && trials?.inTrial == 0)
        let ltv = figures.ltvCohorts["2026-11"]
        #expect(ltv?.customers == 2)
        // Within 7 days: 10 + 20; within 90: 10 + 10 − 10 (refunded on day 40) + 20.
        #expect(ltv.map { Self.amount($0.netRevenue[0]) } == 30)
        #expect(ltv.map { Self.amount($0.netRevenue[2]) } == 30)
        #expect(ltv?.complete(30, asOf: Self.day(100)) == true && ltv?.complete(90, asOf: Self.day(100)) == false)
        #expect(figures.payingInWindow == ["USD": 2])
    }
}
