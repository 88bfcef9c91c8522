import Foundation

/// The reporting currency and what one unit of each other currency is worth in it.
public struct ExchangeRates: Sendable, Hashable {
    /// ISO 4217, `USD` unless the operator says otherwise.
    public var reportingCurrency: String
    /// Units of the reporting currency per unit of the key's currency.
    public var rates: [String: Decimal]

    public init(reportingCurrency: String = "USD", rates: [String: Decimal] = [:]) {
        self.reportingCurrency = reportingCurrency
        self.rates = rates
    }

    /// `amounts` in the reporting currency (rounded to cents), and the part in currencies without a
    /// rate, left in their own currency (rounded to cents).
    public func convert(_ amounts: Amounts) -> (converted: Decimal, unconverted: [String: Decimal]) {
        var total: Decimal = 0
        var unconverted: [String: Decimal] = [:]
        for (currency, amount) in amounts.byCurrency {
            if currency == reportingCurrency {
                total += amount
            } else if let rate = rates[currency] {
                total += amount * rate
            } else {
                unconverted[currency] = Self.cents(amount)
            }
        }
        return (Self.cents(total), unconverted)
    }

    /// `amount` rounded half away from zero to two decimals.
    public static func cents(_ amount: Decimal) -> Decimal {
        amount.rounded(toPlaces: 2)
    }
}

extension Decimal {
    /// Rounded half away from zero to `places` decimals.
    func rounded(toPlaces places: Int) -> Decimal {
        var value = self
        var rounded = Decimal()
        NSDecimalRound(&rounded, &value, places, .plain)
        return rounded
    }
}
