import Foundation

/// How long one billing period of a product lasts, as App Store Connect sets it. MRR normalises each
/// subscription's period price to a month by `monthsPerPeriod`.
public enum BillingPeriod: String, Sendable, Hashable, CaseIterable {
    case week = "P1W"
    case month = "P1M"
    case twoMonths = "P2M"
    case threeMonths = "P3M"
    case sixMonths = "P6M"
    case year = "P1Y"

    /// A period's length in months: a week is 12/52 of a month (52 weeks make 12 months).
    public var monthsPerPeriod: Decimal {
        switch self {
        case .week: Decimal(12) / Decimal(52)
        case .month: 1
        case .twoMonths: 2
        case .threeMonths: 3
        case .sixMonths: 6
        case .year: 12
        }
    }

    /// `amount` a period, as an amount a month, rounded to six decimals so that a sum of many (a week's
    /// 52/12 repeats forever) is the same in any order.
    public func perMonth(_ amount: Decimal) -> Decimal {
        (self == .week ? amount * 52 / 12 : amount / monthsPerPeriod).rounded(toPlaces: 6)
    }

    /// The period whose length is nearest to what Apple's dates give (a paid transaction's purchase to its
    /// expiry), for a product the catalogue does not describe. Nil for dates that give no length.
    ///
    /// A renewal charged up to a day early, or a month of 28 to 31 days, still reads as its period:
    /// the bounds sit halfway between the lengths.
    public static func inferred(from purchasedAt: Date?, to expiresAt: Date?) -> BillingPeriod? {
        guard let purchasedAt, let expiresAt, expiresAt > purchasedAt else { return nil }
        let days = expiresAt.timeIntervalSince(purchasedAt) / 86_400
        switch days {
        case ..<18: return .week
        case ..<45: return .month
        case ..<75: return .twoMonths
        case ..<135: return .threeMonths
        case ..<270: return .sixMonths
        default: return .year
        }
    }
}
