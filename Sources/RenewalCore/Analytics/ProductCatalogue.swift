import Foundation

/// What the analytics need to know of each product that Apple's answers do not say: its billing
/// period (to normalise MRR) and its list prices (for transactions Apple gives without a price, as
/// verifyReceipt does). Products it does not list have their period inferred from Apple's dates and
/// no list price.
public struct ProductCatalogue: Sendable, Hashable {
    public struct Product: Sendable, Hashable {
        public var period: BillingPeriod?
        /// Price of one period per ISO 4217 currency, in units (9.99, not milliunits).
        public var listPrices: [String: Decimal]

        public init(period: BillingPeriod? = nil, listPrices: [String: Decimal] = [:]) {
            self.period = period
            self.listPrices = listPrices
        }
    }

    public var products: [String: Product]

    public init(products: [String: Product] = [:]) {
        self.products = products
    }

    /// The period of `productID`: the catalogue's, else inferred from the transaction's dates.
    public func period(of transaction: LedgerTransaction) -> BillingPeriod? {
        transaction.productID.flatMap { products[$0]?.period }
            ?? BillingPeriod.inferred(from: transaction.purchasedAt, to: transaction.expiresAt)
    }

    /// The amount charged for one seat of `transaction`, in units of its currency: Apple's price when it
    /// gave one; a free trial costs nothing; else the list price in the transaction's currency, or in
    /// `preferred` (the reporting currency), or in the only currency listed. Nil when none applies.
    public func price(of transaction: LedgerTransaction, preferring preferred: String) -> Money? {
        if transaction.isTrial { return Money(currency: transaction.currency ?? preferred, amount: 0) }
        if let milliunits = transaction.priceMilliunits, let currency = transaction.currency {
            // Built from its digits: dividing a Decimal by 1000 costs more than the rest of the figure.
            return Money(
                currency: currency,
                amount: Decimal(
                    sign: milliunits < 0 ? .minus : .plus, exponent: -3,
                    significand: Decimal(milliunits.magnitude)))
        }
        guard let product = transaction.productID.flatMap({ products[$0] }) else { return nil }
        for currency in [transaction.currency, preferred].compactMap({ $0 }) {
            if let amount = product.listPrices[currency] { return Money(currency: currency, amount: amount) }
        }
        if product.listPrices.count == 1, let (currency, amount) = product.listPrices.first {
            return Money(currency: currency, amount: amount)
        }
        return nil
    }
}

/// An amount in one currency.
public struct Money: Sendable, Hashable {
    public var currency: String
    public var amount: Decimal

    public init(currency: String, amount: Decimal) {
        self.currency = currency
        self.amount = amount
    }
}

/// Amounts kept per currency until they are converted, so a currency without a rate is reported apart
/// and never converted at 1.
public struct Amounts: Sendable, Hashable {
    public private(set) var byCurrency: [String: Decimal] = [:]

    public init() {}

    public mutating func add(_ money: Money, times factor: Decimal = 1) {
        byCurrency[money.currency, default: 0] += factor == 1 ? money.amount : money.amount * factor
    }

    public mutating func add(_ other: Amounts) {
        for (currency, amount) in other.byCurrency { byCurrency[currency, default: 0] += amount }
    }

    public static func - (lhs: Amounts, rhs: Amounts) -> Amounts {
        var result = lhs
        for (currency, amount) in rhs.byCurrency { result.byCurrency[currency, default: 0] -= amount }
        return result
    }
}
