import Foundation
import RenewalCore

extension AnalyticsReport {
    /// The adopted purchases no user has claimed yet (docs/design.md §7): Apple's revenue like any other,
    /// counted in the totals, and named apart so the revenue nobody can attach to a customer is visible.
    /// Which purchases are unclaimed is as of the report's making, not of `--until`.
    public struct Unclaimed: Encodable, Sendable, Hashable {
        /// Unclaimed purchases of the app(s) now, whether or not the ledger holds a transaction of theirs.
        public var purchases: Int
        public var activeSubscriptions: Int
        public var mrr: Decimal
        public var revenue: Decimal
        public var refunds: Decimal
        public var netRevenue: Decimal

        enum CodingKeys: String, CodingKey {
            case purchases, activeSubscriptions = "active_subscriptions", mrr, revenue, refunds
            case netRevenue = "net_revenue"
        }

        /// `analytics`: the window's figures over the unclaimed purchases' ledgers only.
        public init(purchases: Int, _ analytics: SubscriptionAnalytics, rates: ExchangeRates) {
            let figures = Figures(analytics.total, productID: nil, rates: rates)
            self.purchases = purchases
            activeSubscriptions = figures.activeSubscriptions
            mrr = figures.mrr
            revenue = figures.revenue
            refunds = figures.refunds
            netRevenue = figures.netRevenue
        }

        /// The table's line.
        var line: String {
            "Unclaimed (adopted from Apple's feed, no user yet; counted above): \(purchases) purchases, "
                + "\(activeSubscriptions) active, MRR \(AnalyticsReport.money(mrr)), revenue "
                + "\(AnalyticsReport.money(revenue)); renewal status --unclaimed lists them"
        }
    }
}
