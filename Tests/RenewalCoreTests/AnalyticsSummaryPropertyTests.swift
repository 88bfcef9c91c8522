import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// The summaries' promise: for any window aligned to UTC days, the figures folded from the summed
/// contribution rows of every subscription equal, figure by figure and product by product, what
/// `SubscriptionAnalytics` computes over every ledger; and a summary kept by replacing a changed
/// subscription's rows equals one summed from scratch.
@Suite("Analytics summaries answer any day-aligned window as the recomputation does")
struct AnalyticsSummaryPropertyTests {
    /// Seed 130 found a product listed by the summary with nothing counted under it (a trial at `since`).
    static let seeds: [UInt64] = [1, 2, 3, 4, 5, 6, 130]

    /// The summed rows of `ledgers`.
    static func summary(_ ledgers: [SubscriptionLedger], unit: TimeInterval = 86_400) -> AnalyticsSummary {
        var summary = AnalyticsSummary()
        let contributions = AnalyticsContributions(unit: unit)
        for ledger in ledgers { summary.add(contributions.rows(of: ledger)) }
        return summary
    }

    /// A random window `[s, u)` of 1 to 90 days around the population's dates.
    static func window(_ random: inout SeededGenerator) -> (since: Date, until: Date) {
        let start = Int.random(in: -100...260, using: &random)
        let length = Int.random(in: 1...90, using: &random)
        let since = SummaryPopulation.origin.addingTimeInterval(Double(start) * SummaryPopulation.day)
        return (since, since.addingTimeInterval(Double(length) * SummaryPopulation.day))
    }

    /// The figures on which the two answers differ, named, with both values; empty when they agree.
    static func differences(_ expected: AnalyticsFigures, _ actual: AnalyticsFigures) -> [String] {
        var found: [String] = []
        func check<T: Equatable>(_ name: String, _ path: KeyPath<AnalyticsFigures, T>) {
            if expected[keyPath: path] != actual[keyPath: path] {
                found.append("\(name): recomputed \(expected[keyPath: path]), summary \(actual[keyPath: path])")
            }
        }
        check("active_subscriptions", \.activeSubscriptions)
        check("active_trials", \.activeTrials)
        check("active_at_since", \.activeAtSince)
        check("new_subscriptions", \.newSubscriptions)
        check("new_trials", \.newTrials)
        check("trial_conversions", \.trialConversions)
        check("trial_funnel.converted", \.newTrialsConverted)
        check("trial_funnel.in_trial", \.newTrialsInTrial)
        check("churned", \.churned)
        check("reactivations", \.reactivations)
        check("unpriced_transactions", \.unpricedTransactions)
        check("mrr", \.mrr)
        check("revenue", \.revenue)
        check("refunds", \.refunds)
        return found
    }

    /// Both answers for one window, every product and the total; the differences, named.
    static func compare(
        _ ledgers: [SubscriptionLedger], _ summary: AnalyticsSummary, since: Date, until: Date,
        environment: AppStoreEnvironment = .production, unit: TimeInterval = 86_400
    ) throws -> [String] {
        var reference = SubscriptionAnalytics(
            since: since, until: until, catalogue: SummaryPopulation.catalogue, reportingCurrency: "USD",
            environment: environment)
        for ledger in ledgers { reference.add(ledger) }
        let query = try #require(
            SummaryQuery(
                since: since, until: until, catalogue: SummaryPopulation.catalogue, reportingCurrency: "USD",
                environment: environment, unit: unit))
        let answer = query.figures(of: summary)
        let window = "[\(Timestamp.string(since)), \(Timestamp.string(until)))"
        var found = differences(reference.total, answer.total).map { "\(window) total \($0)" }
        for product in Set(reference.byProduct.keys).union(answer.byProduct.keys).sorted() {
            let expected = reference.byProduct[product] ?? AnalyticsFigures()
            let actual = answer.byProduct[product] ?? AnalyticsFigures()
            found += differences(expected, actual).map { "\(window) \(product) \($0)" }
            if (reference.byProduct[product] == nil) != (answer.byProduct[product] == nil) {
                found.append("\(window) \(product) listed by one answer only")
            }
        }
        return found
    }

    @Test("summed contributions give every figure of random windows of 1 to 90 days", arguments: seeds)
    func windowsAgree(seed: UInt64) throws {
        let population = SummaryPopulation(count: 400, seed: seed)
        let summary = Self.summary(population.ledgers)
        var random = SeededGenerator(seed: seed &* 7919)
        var found: [String] = []
        var seen = AnalyticsFigures()
        for _ in 0..<60 {
            let (since, until) = Self.window(&random)
            found += try Self.compare(population.ledgers, summary, since: since, until: until)
            var reference = SubscriptionAnalytics(since: since, until: until, catalogue: SummaryPopulation.catalogue)
            for ledger in population.ledgers { reference.add(ledger) }
            seen.add(reference.total)
        }
        // The population exercises every figure, so agreeing is not agreeing on zeros.
        let exercised = [
            seen.activeSubscriptions, seen.activeTrials, seen.activeAtSince, seen.newSubscriptions, seen.newTrials,
            seen.trialConversions, seen.newTrialsConverted, seen.newTrialsInTrial, seen.churned, seen.reactivations,
            seen.unpricedTransactions, seen.mrr.byCurrency.count, seen.revenue.byCurrency.count,
            seen.refunds.byCurrency.count,
        ]
        #expect(!exercised.contains(0), "seed \(seed): a figure is zero in every window: \(exercised)")
        let (since, until) = Self.window(&random)
        found += try Self.compare(population.ledgers, summary, since: since, until: until, environment: .sandbox)
        #expect(found.count == 0, "seed \(seed): \(found.count) differences, first: \(found.prefix(8))")
    }

    @Test(
        "replacing a changed subscription's rows keeps the summary equal to one summed from scratch", arguments: seeds)
    func deltaMaintenance(seed: UInt64) throws {
        var population = SummaryPopulation(count: 300, seed: seed)
        var summary = Self.summary(population.ledgers)
        let contributions = AnalyticsContributions()
        var random = SeededGenerator(seed: seed &+ 1_000)
        for index in population.ledgers.indices where Double.random(in: 0..<1, using: &random) < 0.3 {
            let before = population.ledgers[index]
            var after = population.ledger(id: before.originalTransactionID)
            // Often the same subscription grown (a renewal, a refund, a fact); sometimes another history.
            if Bool.random(using: &random), after.environment == before.environment {
                var added = after.transactions.suffix(1)
                for i in added.indices { added[i].transactionID += "-added" }
                after.transactions = before.transactions + added
                after.facts = before.facts + after.facts
            }
            summary.replace(contributions.rows(of: before), with: contributions.rows(of: after))
            population.ledgers[index] = after
        }
        #expect(summary == Self.summary(population.ledgers))
        var found: [String] = []
        for _ in 0..<20 {
            let (since, until) = Self.window(&random)
            found += try Self.compare(population.ledgers, summary, since: since, until: until)
        }
        #expect(found.count == 0, "seed \(seed): \(found.count) differences, first: \(found.prefix(8))")
    }

    @Test("an hourly summary answers windows aligned to hours, from one hour to 90 days")
    func hourlyWindows() throws {
        let population = SummaryPopulation(count: 300, seed: 7)
        let summary = Self.summary(population.ledgers, unit: 3_600)
        var random = SeededGenerator(seed: 77)
        var found: [String] = []
        for _ in 0..<40 {
            let start = Int.random(in: -100 * 24...260 * 24, using: &random)
            let hours =
                Bool.random(using: &random)
                ? Int.random(in: 1...48, using: &random) : Int.random(in: 1...2_160, using: &random)
            let since = SummaryPopulation.origin.addingTimeInterval(Double(start) * 3_600)
            let until = since.addingTimeInterval(Double(hours) * 3_600)
            found += try Self.compare(population.ledgers, summary, since: since, until: until, unit: 3_600)
        }
        #expect(found.count == 0, "\(found.count) differences, first: \(found.prefix(8))")
    }

    @Test("SummaryQuery(since:until:) takes windows aligned to its unit only; SummaryQuery(window:) takes any")
    func unalignedWindow() {
        let midnight = SummaryPopulation.origin
        let offUnit = SummaryQuery(
            window: midnight.addingTimeInterval(3_600), until: midnight.addingTimeInterval(86_400))
        // Read from the inside of the day to the next midnight: its units 3n + 1 and 3n + 2.
        #expect(offUnit?.offUnit != nil && offUnit?.sinceUnit == offUnit?.untilUnit.advanced(by: -2))
        #expect(SummaryQuery(window: midnight, until: midnight.addingTimeInterval(86_400))?.offUnit == nil)
        #expect(SummaryQuery(window: midnight, until: midnight) == nil)
        #expect(
            SummaryQuery(since: midnight.addingTimeInterval(3_600), until: midnight.addingTimeInterval(86_400)) == nil)
        #expect(SummaryQuery(since: midnight, until: midnight) == nil)
        #expect(SummaryQuery(since: midnight, until: midnight.addingTimeInterval(86_400)) != nil)
        #expect(SummaryQuery(since: midnight, until: midnight.addingTimeInterval(3_600), unit: 3_600) != nil)
    }
}
