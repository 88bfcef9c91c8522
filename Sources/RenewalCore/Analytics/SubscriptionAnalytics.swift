import Foundation

/// The figures of one product, or of all of them, over a window `[since, until)`. Counts are
/// subscriptions; amounts stay per currency until `ExchangeRates` converts them.
public struct AnalyticsFigures: Sendable, Hashable {
    /// Paid and entitled at `until` (a grace period counts).
    public var activeSubscriptions = 0
    /// In a free trial at `until`.
    public var activeTrials = 0
    /// Paid and entitled at `since`: the base of the churn rate.
    public var activeAtSince = 0
    public var newSubscriptions = 0
    public var newTrials = 0
    public var trialConversions = 0
    /// The trial funnel: of the `newTrials`, those whose first paid period began before `until`, and those
    /// still in their trial at `until` (the rest lapsed).
    public var newTrialsConverted = 0
    public var newTrialsInTrial = 0
    public var churned = 0
    public var reactivations = 0
    /// Paid transactions without a price from Apple or the catalogue: left out of revenue and MRR.
    public var unpricedTransactions = 0
    public var mrr = Amounts()
    public var revenue = Amounts()
    public var refunds = Amounts()

    public init() {}

    public var netRevenue: Amounts { revenue - refunds }

    /// Churned over paid subscriptions at `since`; nil without any.
    public var churnRate: Double? {
        activeAtSince == 0 ? nil : Double(churned) / Double(activeAtSince)
    }

    public mutating func add(_ other: AnalyticsFigures) {
        activeSubscriptions += other.activeSubscriptions
        activeTrials += other.activeTrials
        activeAtSince += other.activeAtSince
        newSubscriptions += other.newSubscriptions
        newTrials += other.newTrials
        trialConversions += other.trialConversions
        newTrialsConverted += other.newTrialsConverted
        newTrialsInTrial += other.newTrialsInTrial
        churned += other.churned
        reactivations += other.reactivations
        unpricedTransactions += other.unpricedTransactions
        mrr.add(other.mrr)
        revenue.add(other.revenue)
        refunds.add(other.refunds)
    }
}

/// Subscription analytics over a window, one subscription at a time, so a caller streams the ledger and
/// memory stays flat. Every definition lives here (docs/analytics.md states them as formulas); the
/// databases only hand over each subscription's transactions.
public struct SubscriptionAnalytics: Sendable {
    public let since: Date
    public let until: Date
    public let catalogue: ProductCatalogue
    /// Preferred when a list price stands in for Apple's.
    public let reportingCurrency: String
    /// Production for every figure a person reads; the daily series also keep Sandbox, apart.
    public let environment: AppStoreEnvironment
    public private(set) var total = AnalyticsFigures()
    public private(set) var byProduct: [String: AnalyticsFigures] = [:]
    /// MRR movement over the window and each of its days (MRRMovement.swift).
    public private(set) var movement: MRRMovementSeries
    /// Refund rate, trial conversion and LTV by month, and the subscriptions paying in the window, for
    /// ARPU (CohortFigures.swift).
    public private(set) var cohortFigures: CohortFigures

    /// A billing failure can be recovered for up to 60 days; a purchase after a longer lapse, or one
    /// Apple calls `PURCHASE`, is a reactivation rather than a recovered renewal.
    static let recoveryWindow: TimeInterval = 60 * 86_400

    public init(
        since: Date, until: Date, catalogue: ProductCatalogue = .init(), reportingCurrency: String = "USD",
        environment: AppStoreEnvironment = .production
    ) {
        self.since = since
        self.until = until
        self.catalogue = catalogue
        self.reportingCurrency = reportingCurrency
        self.environment = environment
        movement = MRRMovementSeries(since: since, until: until)
        cohortFigures = CohortFigures(since: since, asOf: until)
    }

    public mutating func add(_ ledger: SubscriptionLedger) {
        let timeline = ledger.timeline(in: environment)
        for (product, productFigures) in figures(of: timeline) {
            byProduct[product, default: AnalyticsFigures()].add(productFigures)
            total.add(productFigures)
        }
        movement.add(timeline, monthly: monthlyPrice(of:))
        cohortFigures.add(timeline) { catalogue.price(of: $0, preferring: reportingCurrency) }
    }

    /// One subscription's part of every figure, by product.
    public func figures(of ledger: SubscriptionLedger) -> [String: AnalyticsFigures] {
        figures(of: ledger.timeline(in: environment))
    }

    func figures(of timeline: EntitlementTimeline) -> [String: AnalyticsFigures] {
        let counted = timeline.transactions
        guard !counted.isEmpty else { return [:] }
        var figures: [String: AnalyticsFigures] = [:]
        func update(_ transaction: LedgerTransaction, _ change: (inout AnalyticsFigures) -> Void) {
            change(&figures[transaction.productID ?? "unknown", default: AnalyticsFigures()])
        }
        let atSince = timeline.standing(at: since)
        let atUntil = timeline.standing(at: until)
        switch atUntil {
        case .trial(let transaction, _): update(transaction) { $0.activeTrials += 1 }
        case .paid(let transaction, _):
            let monthly = monthlyPrice(of: transaction)
            update(transaction) { figures in
                figures.activeSubscriptions += 1
                if let monthly { figures.mrr.add(monthly) } else { figures.unpricedTransactions += 1 }
            }
        case .notEntitled: break
        }
        if case .paid(let transaction, _) = atSince {
            update(transaction) { $0.activeAtSince += 1 }
            let refunded = counted.contains { Self.isRefund($0) && ($0.revokedAt.map(inWindow) ?? false) }
            if case .notEntitled = atUntil, !refunded { update(transaction) { $0.churned += 1 } }
        }
        movement(of: counted, atUntil: atUntil, update)
        money(of: counted, update)
        return figures
    }

    /// New trials and where they stand at `until`, new paid subscriptions, conversions and reactivations:
    /// each counted once per subscription, under the product of the transaction that made it.
    private func movement(
        of counted: [LedgerTransaction], atUntil: EntitlementTimeline.Standing,
        _ update: (LedgerTransaction, (inout AnalyticsFigures) -> Void) -> Void
    ) {
        guard let first = counted.first else { return }
        let paid = counted.filter { !$0.isTrial }
        if first.isTrial, first.purchasedAt.map(inWindow) ?? false {
            let converted = paid.first?.purchasedAt.map { $0 < until } ?? false
            update(first) { figures in
                figures.newTrials += 1
                if converted {
                    figures.newTrialsConverted += 1
                } else if case .trial = atUntil {
                    figures.newTrialsInTrial += 1
                }
            }
        }
        guard let firstPaid = paid.first else { return }
        if firstPaid.purchasedAt.map(inWindow) ?? false {
            update(firstPaid) { figures in
                figures.newSubscriptions += 1
                if first.isTrial { figures.trialConversions += 1 }
            }
        }
        for (previous, next) in zip(paid, paid.dropFirst()) where next.purchasedAt.map(inWindow) ?? false {
            guard let purchased = next.purchasedAt, let previousEnd = EntitlementTimeline.end(of: previous) else {
                continue
            }
            guard purchased > previousEnd else { continue }
            let resubscribed =
                next.transactionReason == "PURCHASE" || previous.revokedAt != nil
                || purchased.timeIntervalSince(previousEnd) > Self.recoveryWindow
            if resubscribed {
                update(next) { $0.reactivations += 1 }
                return
            }
        }
    }

    /// Revenue by purchase time, refunds by refund time, each price times quantity; a seat refund by
    /// the time it was seen, the price times the seats refunded.
    private func money(
        of counted: [LedgerTransaction], _ update: (LedgerTransaction, (inout AnalyticsFigures) -> Void) -> Void
    ) {
        for transaction in counted where !transaction.isTrial {
            let price = catalogue.price(of: transaction, preferring: reportingCurrency)
            let quantity = Decimal(max(transaction.quantity, 1))
            if transaction.purchasedAt.map(inWindow) ?? false {
                update(transaction) { figures in
                    if let price {
                        figures.revenue.add(price, times: quantity)
                    } else {
                        figures.unpricedTransactions += 1
                    }
                }
            }
            if Self.isRefund(transaction), let revoked = transaction.revokedAt, inWindow(revoked), let price {
                let share = transaction.revocationPercentage.map { Decimal($0) / 100_000 } ?? 1
                // Seats refunded earlier were counted then.
                let seats = Decimal(transaction.quantity > 1 ? transaction.paidSeats : 1)
                update(transaction) { $0.refunds.add(price, times: seats * share) }
            }
            // A seat refund returns the price of the seats it took back; the purchase stays valid.
            if let seats = transaction.revokedSeatQuantity, seats > 0, let at = transaction.seatsRevokedAt,
                inWindow(at), let price
            {
                update(transaction) { $0.refunds.add(price, times: Decimal(seats)) }
            }
        }
    }

    /// A revocation that is a refund: not the end of a period left for an upgrade (Apple revokes the old
    /// transaction and credits what was left), nor a family member losing access.
    static func isRefund(_ transaction: LedgerTransaction) -> Bool {
        transaction.revokedAt != nil && !transaction.isUpgraded && transaction.revocationType != "FAMILY_REVOKE"
    }

    /// A paid period's price times its seats still paid for, normalised to a month.
    func monthlyPrice(of transaction: LedgerTransaction) -> Money? {
        guard let price = catalogue.price(of: transaction, preferring: reportingCurrency),
            let period = catalogue.period(of: transaction)
        else { return nil }
        let quantity = Decimal(transaction.quantity > 1 ? transaction.paidSeats : 1)
        return Money(currency: price.currency, amount: period.perMonth(price.amount * quantity))
    }

    private func inWindow(_ moment: Date) -> Bool { since <= moment && moment < until }
}
