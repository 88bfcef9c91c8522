import Foundation

/// The simulated App Store's price list: what a subscription costs in a storefront, by its period (a
/// week, a month or a year), in the storefront's currency. Signed transactions carry it in milliunits,
/// as Apple's do (9990 is 9.99); a storefront the list does not know is charged in US dollars.
public struct SimulatedPrices: Sendable, Hashable {
    public let storefront: String

    public init(storefront: String) {
        self.storefront = storefront
    }

    /// Per storefront: the currency, then the price of a week, a month and a year, in milliunits.
    static let list: [String: (currency: String, week: Int, month: Int, year: Int)] = [
        "USA": ("USD", 2_990, 9_990, 99_990),
        "FRA": ("EUR", 2_990, 9_990, 99_990),
        "DEU": ("EUR", 2_990, 9_990, 99_990),
        "GBR": ("GBP", 2_490, 8_990, 89_990),
        "JPN": ("JPY", 450_000, 1_500_000, 15_000_000),
    ]

    public var currency: String { (Self.list[storefront] ?? Self.list["USA"])?.currency ?? "USD" }

    /// The price of a paid period of `period` seconds: up to 8 days is a week, from 300 days a year,
    /// a month otherwise.
    public func milliunits(period: TimeInterval) -> Int {
        guard let prices = Self.list[storefront] ?? Self.list["USA"] else { return 9_990 }
        if period <= 8 * 86_400 { return prices.week }
        return period >= 300 * 86_400 ? prices.year : prices.month
    }

    /// A paid introductory offer's period: half the price, down to whole cents (4.99 for 9.99).
    public func introductoryMilliunits(period: TimeInterval) -> Int {
        milliunits(period: period) / 20 * 10
    }
}
