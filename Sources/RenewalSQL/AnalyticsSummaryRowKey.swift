import Foundation
import RenewalCore
import RenewalStorage

/// A contribution key without its shape, as `analytics_summary_rows.row_key` stores it: canonical JSON
/// (sorted keys, absent fields left out), so equal keys give equal text and the upsert of `--rebuild`
/// adds their counts. Decoding gives back the key exactly: the factor is a `Decimal`'s exact text.
struct AnalyticsSummaryRowKey: Codable, Hashable {
    var f: String
    var b: String?
    var e: String
    var p: String?
    /// Whether the key has a price source (`m`, `c` may both be absent even so).
    var hp: Bool?
    var m: Int64?
    var c: String?
    var per: String?
    var x: String

    init(_ key: ContributionKey) {
        f = key.figure.rawValue
        b = key.bundleID
        e = key.environment.rawValue
        p = key.productID
        hp = key.price == nil ? nil : true
        m = key.price?.milliunits
        c = key.price?.currency
        per = key.period?.rawValue
        x = "\(key.factor)"
    }

    static func text(of key: ContributionKey) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(AnalyticsSummaryRowKey(key)), as: UTF8.self)
    }

    /// The key of `text` with `shape`; an error naming the row when the table holds something this build
    /// cannot read (a row of newer definitions: `--rebuild` replaces it).
    static func key(of text: String, shape: ContributionShape) throws -> ContributionKey {
        let stored = try JSONDecoder().decode(AnalyticsSummaryRowKey.self, from: Data(text.utf8))
        guard let figure = ContributionFigure(rawValue: stored.f), let factor = Decimal(string: stored.x),
            stored.per == nil || BillingPeriod(rawValue: stored.per ?? "") != nil
        else {
            throw SubscriptionStoreError.corruptRow(
                "analytics_summary_rows holds a row this build cannot read (\(text)); run renewal analytics --rebuild")
        }
        return ContributionKey(
            shape: shape, figure: figure, bundleID: stored.b, environment: AppStoreEnvironment(rawValue: stored.e),
            productID: stored.p, price: stored.hp == true ? PriceSource(milliunits: stored.m, currency: stored.c) : nil,
            period: stored.per.flatMap(BillingPeriod.init(rawValue:)), factor: factor)
    }
}
