import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// The fast paths of the contribution rows against their slow counterparts: the day arithmetic of
/// retention rows against the calendar, and `ContributionKey`'s own `==` and `hash(into:)` (which hash a
/// subset of the fields and keep movement and cohort parts out of line) against every field compared
/// and hashed as plain values, on the seeded population's ledgers.
@Suite("Contribution rows' fast paths equal the slow ones")
struct ContributionFastPathTests {
    /// Every field of a key as plain values, with the synthesized `Hashable`: the slow path.
    struct FullKey: Hashable {
        var shape: ContributionShape
        var figure: ContributionFigure
        var bundleID: String?
        var environment: AppStoreEnvironment
        var productID: String?
        var price: PriceSource?
        var period: BillingPeriod?
        var factor: Decimal
        var movement: MovementEnds?
        var cohort: CohortDetail?

        init(_ key: ContributionKey) {
            (shape, figure, bundleID, environment) = (key.shape, key.figure, key.bundleID, key.environment)
            (productID, price, period, factor) = (key.productID, key.price, key.period, key.factor)
            (movement, cohort) = (key.movement, key.cohort)
        }

        /// A key built anew from the fields (its parts are new boxes, not the original's).
        var key: ContributionKey {
            ContributionKey(
                shape: shape, figure: figure, bundleID: bundleID, environment: environment, productID: productID,
                price: price, period: period, factor: factor, movement: movement, cohort: cohort)
        }
    }

    /// A count per full key, summed the slow way: two lookups per row, zero sums dropped.
    static func slowSum(_ rows: [[ContributionKey: Int]]) -> [FullKey: Int] {
        var sums: [FullKey: Int] = [:]
        for subscription in rows {
            for (key, count) in subscription {
                let sum = sums[FullKey(key), default: 0] + count
                sums[FullKey(key)] = sum == 0 ? nil : sum
            }
        }
        return sums
    }

    @Test(
        "A subscription's rows and their sum keep every key the full comparison tells apart",
        arguments: [1, 2, 3] as [UInt64])
    func rowsMatchFullKeys(seed: UInt64) {
        let population = SummaryPopulation(count: 400, seed: seed)
        let contributions = AnalyticsContributions()
        let rows = population.ledgers.map(contributions.rows(of:))
        var summary = AnalyticsSummary()
        for subscription in rows {
            summary.add(subscription)
            // The rows of one subscription: no two keys merged that differ, none split that are equal.
            #expect(
                Self.slowSum([subscription]) == Dictionary(uniqueKeysWithValues: subscription.map { (FullKey($0), $1) })
            )
        }
        let slow = Self.slowSum(rows)
        #expect(summary.counts.count == slow.count)
        for (key, count) in slow {
            // A key rebuilt with new boxes is found: equal keys hash equally.
            #expect(summary.counts[key.key] == count, "\(key)")
        }
        #expect(rows.contains { $0.keys.contains { $0.movement != nil } })
        #expect(rows.contains { $0.keys.contains { $0.cohort != nil } })
        // Subtracting every subscription's rows again leaves nothing.
        for subscription in rows { summary.add(subscription, sign: -1) }
        #expect(summary.counts.isEmpty)
    }

    @Test("A subscription's difference before and after a change equals replacing its rows in a summary")
    func differenceMatchesReplace() {
        let population = SummaryPopulation(count: 300, seed: 11)
        let contributions = AnalyticsContributions()
        var changed = 0
        for (index, ledger) in population.ledgers.enumerated() {
            // The same subscription with its last transaction gone (most rows shared), and another one.
            var shorter = ledger
            if !shorter.transactions.isEmpty { shorter.transactions.removeLast() }
            let other = population.ledgers[(index + 1) % population.ledgers.count]
            let old = contributions.rows(of: ledger)
            for new in [contributions.rows(of: shorter), contributions.rows(of: other), old] {
                var replaced = AnalyticsSummary()
                replaced.replace(old, with: new)
                let difference = AnalyticsSummary.difference(from: old, to: new)
                #expect(difference == replaced.counts)
                #expect(!difference.values.contains(0))
                if !difference.isEmpty, difference.count < new.count { changed += 1 }
            }
        }
        #expect(changed > 50)
    }

    @Test("Keys that differ in any one field are not equal; equal factors written differently are")
    func equalityReadsEveryField() throws {
        let standing = MRRStanding(
            productID: "p", price: PriceSource(milliunits: 9_990, currency: "USD"), period: .month, factor: 1)
        let base = ContributionKey(
            shape: .corner(since: 3, until: 5), figure: .mrrMovement, bundleID: "app", environment: .production,
            productID: "p", price: PriceSource(milliunits: 1, currency: "USD"), period: .month, factor: 1,
            movement: MovementEnds(start: nil, end: standing, paidBefore: true), cohort: CohortDetail(horizon: 1))
        var variants: [ContributionKey] = []
        func vary(_ change: (inout ContributionKey) -> Void) {
            var key = base
            change(&key)
            variants.append(key)
        }
        vary { $0.shape = .corner(since: 3, until: 6) }
        vary { $0.shape = .step(5) }
        vary { $0.figure = .churned }
        vary { $0.bundleID = nil }
        vary { $0.environment = .sandbox }
        vary { $0.productID = "q" }
        vary { $0.price = nil }
        vary { $0.price?.currency = "EUR" }
        vary { $0.period = .year }
        vary { $0.factor = 2 }
        vary { $0.movement = MovementEnds(start: nil, end: standing, paidBefore: false) }
        vary { $0.movement?.end?.factor = 3 }
        vary { $0.movement = nil }
        vary { $0.cohort = CohortDetail(horizon: 1, later: [CataloguePrice(productID: "p", currency: nil)]) }
        vary { $0.cohort = nil }
        for variant in variants { #expect(variant != base, "\(FullKey(variant))") }
        var same = FullKey(base).key
        same.factor = try #require(Decimal(string: "1.000"))
        #expect(same == base)
        #expect(same.hashValue == base.hashValue)
    }

    /// Dates of 1900 to 2999: random milliseconds and random doubles, midnights, the millisecond before
    /// one, and the ends of months (January 31, February 29, …).
    static func dates(_ random: inout SeededGenerator, count: Int) -> [Date] {
        (0..<count).map { index in
            var t = Double(Int64.random(in: -2_208_988_800_000..<32_503_680_000_000, using: &random)) / 1000
            switch index % 6 {
            case 1: t = Double.random(in: -2_208_988_800..<32_503_680_000, using: &random)
            case 2: t = (t / 86_400).rounded(.down) * 86_400
            case 3: t = (t / 86_400).rounded(.down) * 86_400 - 0.001
            case 4:
                let (year, month, _) = AnalyticsContributions.civil(fromDays: Int((t / 86_400).rounded(.down)))
                let next = month == 12 ? (year + 1, 1) : (year, month + 1)
                let last = AnalyticsContributions.days(fromYear: next.0, month: next.1, day: 1) - 1
                t = Double(last) * 86_400 + Double.random(in: 0..<86_400, using: &random)
            default: break
            }
            return Date(timeIntervalSince1970: t)
        }
    }

    @Test("Retention's day arithmetic moves a date on as the calendar does", arguments: [7, 8] as [UInt64])
    func advanceMatchesCalendar(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var mismatches: [String] = []
        let outside = [Date(timeIntervalSince1970: -3e9), Date(timeIntervalSince1970: 4e10), .distantPast]
        for date in Self.dates(&random, count: 20_000) + outside {
            for period in BillingPeriod.allCases {
                let count = Int.random(in: 1...CohortRetention.periods, using: &random)
                let fast = AnalyticsContributions.advance(date, by: count, period)
                let slow = period.advance(date, by: count)
                if fast != slow, mismatches.count < 5 {
                    mismatches.append("\(date.timeIntervalSince1970) + \(count) \(period): \(fast) != \(slow)")
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }
}
