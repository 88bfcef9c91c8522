import Foundation
import RenewalCore

/// `--catalogue FILE` / `RENEWAL_CATALOGUE_FILE`: what Apple's answers do not say about each product.
///
///     {"products": [
///       {"product_id": "com.example.pro.monthly", "period": "P1M", "prices": {"USD": "9.99", "EUR": "9.99"}},
///       {"product_id": "com.example.pro.yearly", "period": "P1Y"}
///     ]}
///
/// `period` is one of P1W, P1M, P2M, P3M, P6M, P1Y (inferred from Apple's dates when left out);
/// `prices` are list prices of one period, in units of each currency (a string or a number), used only
/// for transactions Apple gives without a price (verifyReceipt).
///
/// `--rates FILE` / `RENEWAL_RATES_FILE`: the reporting currency and what one unit of each other
/// currency is worth in it.
///
///     {"currency": "USD", "rates": {"EUR": "1.08", "GBP": "1.27"}}
enum AnalyticsFiles {
    static func catalogue(path: String) throws -> ProductCatalogue {
        let root = try object(path: path, what: "catalogue file", setting: "RENEWAL_CATALOGUE_FILE / --catalogue")
        try knownKeys(of: root, ["products"], place: "The catalogue file \(path)")
        guard let entries = root["products"] as? [Any] else {
            throw ConfigurationError(
                """
                The catalogue file \(path) has no "products" array; write \
                {"products": [{"product_id": "…", "period": "P1M", "prices": {"USD": "9.99"}}]}.
                """)
        }
        var products: [String: ProductCatalogue.Product] = [:]
        for (index, entry) in entries.enumerated() {
            let place = "The catalogue file \(path), entry \(index + 1)"
            guard let entry = entry as? [String: Any], let productID = entry["product_id"] as? String,
                !productID.isEmpty
            else {
                throw ConfigurationError("\(place) has no \"product_id\"; give each entry the product's identifier.")
            }
            try knownKeys(of: entry, ["product_id", "period", "prices"], place: "\(place) (\(productID))")
            var product = ProductCatalogue.Product()
            if let period = entry["period"] {
                guard let text = period as? String, let parsed = BillingPeriod(rawValue: text) else {
                    throw ConfigurationError(
                        """
                        \(place) (\(productID)) has period \(period), which is not one of \
                        \(BillingPeriod.allCases.map(\.rawValue).joined(separator: ", ")); give one, or leave it out \
                        to infer it from Apple's dates.
                        """)
                }
                product.period = parsed
            }
            if let prices = entry["prices"] {
                product.listPrices = try amounts(prices, place: "\(place) (\(productID)) \"prices\"")
            }
            guard products[productID] == nil else {
                throw ConfigurationError("\(place) lists \(productID) a second time; keep one entry per product.")
            }
            products[productID] = product
        }
        return ProductCatalogue(products: products)
    }

    static func rates(path: String) throws -> ExchangeRates {
        let root = try object(path: path, what: "rates file", setting: "RENEWAL_RATES_FILE / --rates")
        try knownKeys(of: root, ["currency", "rates"], place: "The rates file \(path)")
        guard let named = root["currency"] else {
            throw ConfigurationError(
                """
                The rates file \(path) names no reporting currency; write {"currency": "USD", "rates": {"EUR": "1.08"}} \
                (three capital letters, ISO 4217).
                """)
        }
        guard let currency = named as? String, isCurrency(currency) else {
            throw ConfigurationError(
                """
                The rates file \(path) has "currency": \(named), which is not an ISO 4217 code; give three capital \
                letters such as "USD" or "EUR".
                """)
        }
        let rates = try amounts(root["rates"] ?? [String: Any](), place: "The rates file \(path) \"rates\"")
        if rates[currency] != nil {
            throw ConfigurationError(
                """
                The rates file \(path) gives a rate for \(currency), the reporting currency itself, which is 1 by \
                definition; remove \(currency) from "rates".
                """)
        }
        return ExchangeRates(reportingCurrency: currency, rates: rates)
    }

    static func isCurrency(_ text: String) -> Bool {
        text.count == 3 && text.allSatisfy { $0.isASCII && $0.isUppercase }
    }

    /// Refuses a key the file's format does not have (a misspelt one would otherwise be ignored).
    private static func knownKeys(of object: [String: Any], _ known: [String], place: String) throws {
        guard let unknown = object.keys.filter({ !known.contains($0) }).sorted().first else { return }
        throw ConfigurationError(
            """
            \(place) has the unknown key "\(unknown)"; the keys are \
            \(known.map { "\"\($0)\"" }.joined(separator: ", ")) \
            (docs/analytics.md); rename or remove it.
            """)
    }

    private static func object(path: String, what: String, setting: String) throws -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(
                "The \(what) \(path) cannot be read (\(setting)); check the path and its permissions.")
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ConfigurationError("The \(what) \(path) is not a JSON object; see `renewal analytics --help`.")
        }
        return root
    }

    /// `{"USD": "9.99", "EUR": 9.99}`: positive amounts by ISO 4217 code. Numbers go through their text, so
    /// 9.99 stays 9.99.
    private static func amounts(_ value: Any, place: String) throws -> [String: Decimal] {
        guard let entries = value as? [String: Any] else {
            throw ConfigurationError(
                "\(place) is not an object of currency codes to amounts, such as {\"USD\": \"9.99\"}.")
        }
        var amounts: [String: Decimal] = [:]
        for (currency, amount) in entries {
            let text = (amount as? String) ?? (amount as? NSNumber).map { "\($0)" }
            guard isCurrency(currency), let text,
                let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")),
                decimal > 0
            else {
                throw ConfigurationError(
                    "\(place) has \(currency): \(amount); give a three-letter ISO 4217 code and a positive amount such as \"9.99\"."
                )
            }
            amounts[currency] = decimal
        }
        return amounts
    }
}
