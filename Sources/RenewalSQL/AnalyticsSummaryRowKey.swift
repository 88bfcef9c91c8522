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
    /// MRR movement rows' ends (`MovementEnds`).
    var mv: StoredMovement?
    /// Cohort and paying rows' detail (`CohortDetail`, its own short field names).
    var co: CohortDetail?

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
        mv = key.movement.map(StoredMovement.init)
        co = key.cohort
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
        let unreadable = SubscriptionStoreError.corruptRow(
            "analytics_summary_rows holds a row this build cannot read (\(text)); run renewal analytics --rebuild")
        guard let figure = ContributionFigure(rawValue: stored.f), let factor = Decimal(string: stored.x),
            stored.per == nil || BillingPeriod(rawValue: stored.per ?? "") != nil
        else { throw unreadable }
        var movement: MovementEnds?
        if let mv = stored.mv {
            guard let ends = mv.ends() else { throw unreadable }
            movement = ends
        }
        return ContributionKey(
            shape: shape, figure: figure, bundleID: stored.b, environment: AppStoreEnvironment(rawValue: stored.e),
            productID: stored.p, price: stored.hp == true ? PriceSource(milliunits: stored.m, currency: stored.c) : nil,
            period: stored.per.flatMap(BillingPeriod.init(rawValue:)), factor: factor, movement: movement,
            cohort: stored.co)
    }
}

/// `MovementEnds` as a row key stores it: each end's product, price, inferred period and factor (an
/// absent end is not paid), `pb` only when a paid period came before, `pa` only for a day change whose
/// `paidBefore` a read decides (`paidAt`), `j` only for a joined row.
struct StoredMovement: Codable, Hashable {
    struct End: Codable, Hashable {
        var p: String?
        var m: Int64?
        var c: String?
        var per: String?
        var x: String

        init(_ standing: MRRStanding) {
            p = standing.productID
            m = standing.price.milliunits
            c = standing.price.currency
            per = standing.period?.rawValue
            x = "\(standing.factor)"
        }

        /// Nil when a field is not one this build writes.
        func standing() -> MRRStanding? {
            guard let factor = Decimal(string: x) else { return nil }
            var period: BillingPeriod?
            if let per {
                guard let known = BillingPeriod(rawValue: per) else { return nil }
                period = known
            }
            return MRRStanding(
                productID: p, price: PriceSource(milliunits: m, currency: c), period: period, factor: factor)
        }
    }

    var s: End?
    var u: End?
    var pb: Bool?
    var pa: Int?
    var j: Bool?

    init(_ ends: MovementEnds) {
        s = ends.start.map(End.init)
        u = ends.end.map(End.init)
        pb = ends.paidBefore ? true : nil
        pa = ends.paidAt
        j = ends.joined ? true : nil
    }

    func ends() -> MovementEnds? {
        var start: MRRStanding?
        var end: MRRStanding?
        if let s {
            guard let standing = s.standing() else { return nil }
            start = standing
        }
        if let u {
            guard let standing = u.standing() else { return nil }
            end = standing
        }
        return MovementEnds(start: start, end: end, paidBefore: pb == true, paidAt: pa, joined: j == true)
    }
}

extension ContributionKey {
    /// The key with every shape's place taken by one (`event(0)`): what a row's `row_key` text encodes,
    /// the shape being the row's own columns.
    var withoutShape: ContributionKey {
        var bare = self
        bare.shape = .event(0)
        return bare
    }
}
