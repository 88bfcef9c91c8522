import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// The summaries' promise for MRR movement: for any window aligned to UTC days, the movement folded from
/// the summed contribution rows (`SummaryQuery.movement`) equals `MRRMovementSeries` over every ledger,
/// bucket by bucket in every currency, MRR at both bounds, each day of the window, and ARPU's subscriptions
/// paying at `until`. Two populations: the summary test's (trials, grace periods, refunds, upgrades and
/// crossgrades between products, several currencies, prices that change every period) and the movement
/// test's (storefront changes between USD, EUR and JPY, downgrades, refunds, the spans test's facts).
@Suite("Analytics summaries answer MRR movement, window and days, as MRRMovementSeries does")
struct AnalyticsSummaryMovementTests {
    /// Where one answer differs from the reference, named; empty when they agree.
    static func differences(_ reference: MRRMovementSeries, _ answer: SummaryMovement?, window: String) -> [String] {
        guard let answer else { return ["\(window): the summary gave no movement"] }
        var found: [String] = []
        func check(_ what: String, _ expected: MRRMovement, _ actual: MRRMovement) {
            for bucket in MRRMovement.Bucket.allCases where expected[bucket] != actual[bucket] {
                found.append("\(window) \(what) \(bucket): recomputed \(expected[bucket]), summary \(actual[bucket])")
            }
            if expected.atStart != actual.atStart {
                found.append("\(window) \(what) mrr_since: recomputed \(expected.atStart), summary \(actual.atStart)")
            }
            if expected.atEnd != actual.atEnd {
                found.append("\(window) \(what) mrr_until: recomputed \(expected.atEnd), summary \(actual.atEnd)")
            }
        }
        check("window", reference.window, answer.window)
        if reference.payingAtUntil != answer.payingAtUntil {
            found.append("\(window) paying at until: \(reference.payingAtUntil) vs \(answer.payingAtUntil)")
        }
        let days = answer.days ?? []
        if reference.days.count != days.count || reference.dayNames != answer.dayNames {
            found.append("\(window) days: \(reference.dayNames) vs \(answer.dayNames)")
        }
        for (index, (expected, actual)) in zip(reference.days, days).enumerated() {
            check("day \(reference.dayNames[index])", expected, actual)
        }
        return found
    }

    /// Both answers for the window `[since, until)`.
    static func compare(
        _ ledgers: [SubscriptionLedger], _ summary: AnalyticsSummary, since: Date, until: Date,
        catalogue: ProductCatalogue, unit: TimeInterval = 86_400, environment: AppStoreEnvironment = .production,
        bundleID: String? = nil
    ) throws -> (found: [String], reference: MRRMovementSeries) {
        var reference = SubscriptionAnalytics(
            since: since, until: until, catalogue: catalogue, environment: environment)
        for ledger in ledgers where bundleID == nil || ledger.bundleID == bundleID { reference.add(ledger) }
        let query = try #require(
            SummaryQuery(since: since, until: until, catalogue: catalogue, environment: environment, unit: unit))
        let window = "\(environment) \(bundleID ?? "all apps") [\(Timestamp.string(since)), \(Timestamp.string(until)))"
        var answer = query.movement(of: summary, bundleID: bundleID)
        if unit != 86_400, answer?.days == nil {
            // An hourly summary answers the window only; the days are the reference's own to compare.
            answer?.days = reference.movement.days
            answer?.dayNames = reference.movement.dayNames
        }
        return (differences(reference.movement, answer, window: window), reference.movement)
    }

    /// The buckets a window moved in any currency.
    static func moved(_ movement: MRRMovementSeries) -> Set<MRRMovement.Bucket> {
        Set(MRRMovement.Bucket.allCases.filter { movement.window[$0].byCurrency.values.contains { $0 != 0 } })
    }

    @Test("the summary population: 40 random windows of 1 to 90 days", arguments: AnalyticsSummaryPropertyTests.seeds)
    func summaryPopulation(seed: UInt64) throws {
        let population = SummaryPopulation(count: 400, seed: seed)
        let summary = AnalyticsSummaryPropertyTests.summary(population.ledgers)
        var random = SeededGenerator(seed: seed &* 104_729)
        var found: [String] = []
        var buckets = Set<MRRMovement.Bucket>()
        for _ in 0..<40 {
            let (since, until) = AnalyticsSummaryPropertyTests.window(&random)
            let result = try Self.compare(
                population.ledgers, summary, since: since, until: until, catalogue: SummaryPopulation.catalogue)
            found += result.found
            buckets.formUnion(Self.moved(result.reference))
        }
        // One app's rows, and Sandbox's.
        for (environment, bundleID) in [(AppStoreEnvironment.production, "com.example.a"), (.sandbox, nil)] {
            let (since, until) = AnalyticsSummaryPropertyTests.window(&random)
            found += try Self.compare(
                population.ledgers, summary, since: since, until: until, catalogue: SummaryPopulation.catalogue,
                environment: environment, bundleID: bundleID
            ).found
        }
        #expect(found.count == 0, "seed \(seed): \(found.count) differences, first: \(found.prefix(6))")
        #expect(buckets == Set(MRRMovement.Bucket.allCases), "seed \(seed): buckets moved: \(buckets)")
    }

    @Test("storefront changes: 40 random windows of 1 to 90 days", arguments: [UInt64(11), 29, 41])
    func storefrontChanges(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let ledgers = (0..<300).map { MRRMovementPropertyTests.ledger($0, &random) }
        let summary = AnalyticsSummaryPropertyTests.summary(ledgers)
        var found: [String] = []
        var currencies = 0
        for _ in 0..<40 {
            let since = MRRMovementPropertyTests.t0.addingTimeInterval(
                Double(Int.random(in: -10...400, using: &random)) * 86_400)
            let until = since.addingTimeInterval(Double(Int.random(in: 1...90, using: &random)) * 86_400)
            let result = try Self.compare(
                ledgers, summary, since: since, until: until, catalogue: MRRMovementPropertyTests.catalogue)
            found += result.found
            // A storefront change moves the window in two currencies at once.
            currencies = max(currencies, result.reference.window[.contraction].byCurrency.count)
        }
        #expect(found.count == 0, "seed \(seed): \(found.count) differences, first: \(found.prefix(6))")
        #expect(currencies > 1)
    }

    @Test("an hourly summary answers the window's movement for windows aligned to hours")
    func hourlyWindows() throws {
        let population = SummaryPopulation(count: 300, seed: 7)
        let summary = AnalyticsSummaryPropertyTests.summary(population.ledgers, unit: 3_600)
        var random = SeededGenerator(seed: 78)
        var found: [String] = []
        for _ in 0..<20 {
            let start = Int.random(in: -100 * 24...260 * 24, using: &random)
            let since = SummaryPopulation.origin.addingTimeInterval(Double(start) * 3_600)
            let until = since.addingTimeInterval(Double(Int.random(in: 1...2_160, using: &random)) * 3_600)
            found += try Self.compare(
                population.ledgers, summary, since: since, until: until, catalogue: SummaryPopulation.catalogue,
                unit: 3_600
            ).found
        }
        #expect(found.count == 0, "\(found.count) differences, first: \(found.prefix(6))")
    }
}
