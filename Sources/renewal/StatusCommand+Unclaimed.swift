import Foundation
import RenewalCore
import RenewalReports
import RenewalStorage

/// `renewal status --unclaimed`: the purchases the change feed adopted that no user has claimed yet,
/// streamed in pages of 500 by original transaction id (a JSON array, or a table sized in a first pass),
/// so support can attach each with `renewal claim` before its customer asks.
enum UnclaimedOutput {
    static let headings = [
        "ORIGINAL_TRANSACTION_ID", "PRODUCT", "ENV", "ADOPTED_AT", "TOKEN", "STATE", "EXPIRES_AT", "REVENUE", "APP",
    ]

    static func write(store: any RenewalStore, json: Bool) async throws {
        guard let source = store as? any UnclaimedPurchaseStore else {
            throw ConfigurationError("This database backend cannot list unclaimed purchases; use SQLite or PostgreSQL.")
        }
        var widths = headings.map(\.count)
        if !json {
            try await forEachPage(of: source) { page in
                for purchase in page {
                    for (index, cell) in cells(purchase).enumerated() { widths[index] = max(widths[index], cell.count) }
                }
            }
        }
        let sink = ReportOutput()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var count = 0
        let columns = widths.dropLast().map { $0 + 2 } + [0]
        try await forEachPage(of: source) { page in
            var text = ""
            for purchase in page {
                if json {
                    text += count == 0 ? "[\n" : ",\n"
                    text += String(decoding: try encoder.encode(UnclaimedJSON(purchase)), as: UTF8.self)
                } else {
                    if count == 0 { text += TextColumns.line(headings, widths: columns) + "\n" }
                    text += TextColumns.line(cells(purchase), widths: columns) + "\n"
                }
                count += 1
            }
            try await sink.write(text)
        }
        if json {
            try await sink.write(count == 0 ? "[]\n" : "\n]\n")
        } else if count == 0 {
            try await sink.write("No unclaimed purchases: every purchase the change feed adopted has its user.\n")
        } else {
            try await sink.write(
                "\(count) unclaimed. Attach one with `renewal claim --original-transaction-id ID --user USER`.\n")
        }
        try await sink.finish()
    }

    private static func forEachPage(
        of source: any UnclaimedPurchaseStore, _ body: ([UnclaimedPurchase]) async throws -> Void
    ) async throws {
        var after: String?
        while true {
            let page = try await source.unclaimedPage(after: after, limit: 500)
            if !page.isEmpty { try await body(page) }
            guard page.count == 500, let last = page.last else { return }
            after = last.originalTransactionID
        }
    }

    /// A purchase's table cells, in the order of `headings`; revenue as `9.99 USD`, currencies joined by `+`.
    static func cells(_ purchase: UnclaimedPurchase) -> [String] {
        let revenue = purchase.revenue.sorted { $0.key < $1.key }.map { "\(amount($0.value)) \($0.key)" }
        return [
            purchase.originalTransactionID, purchase.productID ?? "-", purchase.environment,
            Timestamp.string(purchase.adoptedAt), purchase.appAccountToken ?? "-", purchase.state?.rawValue ?? "-",
            purchase.expiresAt.map(Timestamp.string) ?? "-", revenue.isEmpty ? "-" : revenue.joined(separator: " + "),
            purchase.bundleID ?? "-",
        ]
    }

    /// Milliunits as a decimal amount in the currency's units, without binary rounding.
    static func amount(_ milliunits: Int64) -> Decimal {
        Decimal(milliunits) / 1000
    }
}

/// One element of `status --unclaimed --json`: every key always present, null when unknown.
struct UnclaimedJSON: Encodable {
    var purchase: UnclaimedPurchase

    init(_ purchase: UnclaimedPurchase) { self.purchase = purchase }

    enum CodingKeys: String, CodingKey {
        case originalTransactionID = "original_transaction_id", bundleID = "bundle_id", productID = "product_id"
        case environment, adoptedAt = "adopted_at", appAccountToken = "app_account_token", state
        case expiresAt = "expires_at", revenue
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(purchase.originalTransactionID, forKey: .originalTransactionID)
        try c.encode(purchase.bundleID, forKey: .bundleID)
        try c.encode(purchase.productID, forKey: .productID)
        try c.encode(purchase.environment, forKey: .environment)
        try c.encode(Timestamp.string(purchase.adoptedAt), forKey: .adoptedAt)
        try c.encode(purchase.appAccountToken, forKey: .appAccountToken)
        try c.encode(purchase.state?.rawValue, forKey: .state)
        try c.encode(purchase.expiresAt.map(Timestamp.string), forKey: .expiresAt)
        try c.encode(purchase.revenue.mapValues(UnclaimedOutput.amount), forKey: .revenue)
    }
}
