import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// The daily series the job keeps from the summaries after every run: for any run of days, the rows
/// `DailyAnalytics(summary:…)` gives from the summed contribution rows equal, row by row and column by
/// column, the rows `DailyAnalytics` computes over every ledger (`--refresh-daily --recompute`).
@Suite("The daily series from the summaries equals the one from the ledger")
struct DailySummaryPropertyTests {
    static let rates = ExchangeRates(reportingCurrency: "USD", rates: ["EUR": 1.1])

    @Test(
        "Random runs of days over a population with trials, grace, refunds, upgrades and currencies",
        arguments: [1, 2, 3, 130] as [UInt64])
    func randomDays(seed: UInt64) throws {
        let population = SummaryPopulation(count: 300, seed: seed)
        let summary = AnalyticsSummaryPropertyTests.summary(population.ledgers)
        var random = SeededGenerator(seed: seed &+ 1000)
        for _ in 0..<4 {
            let window = AnalyticsSummaryPropertyTests.window(&random)
            let last = window.until.addingTimeInterval(-SummaryPopulation.day)
            var reference = DailyAnalytics(
                from: window.since, through: last, catalogue: SummaryPopulation.catalogue, reportingCurrency: "USD")
            for ledger in population.ledgers { reference.add(ledger) }
            let answer = DailyAnalytics(
                summary: summary, from: window.since, through: last, catalogue: SummaryPopulation.catalogue,
                reportingCurrency: "USD")
            let expected = reference.rows(rates: Self.rates)
            let actual = answer.rows(rates: Self.rates)
            #expect(!expected.isEmpty || actual.isEmpty)
            let missing = Set(expected).subtracting(actual)
            let extra = Set(actual).subtracting(expected)
            #expect(
                missing.isEmpty && extra.isEmpty,
                "days \(Timestamp.string(window.since)) to \(Timestamp.string(last)): \(Self.describe(missing, extra))")
        }
    }

    /// The rows of one side only, as the columns that differ where both sides have the row.
    static func describe(_ missing: Set<AnalyticsDayRow>, _ extra: Set<AnalyticsDayRow>) -> String {
        var lines: [String] = []
        for row in missing.sorted(by: { $0.key < $1.key }).prefix(4) {
            let name = "\(row.key.day) \(row.key.bundleID) \(row.key.productID) \(row.key.environment) \(row.currency)"
            guard let other = extra.first(where: { $0.key == row.key && $0.currency == row.currency }) else {
                lines.append("\(name) recomputed only")
                continue
            }
            let columns = Mirror(reflecting: row).children.map { "\($0.label ?? ""): \($0.value)" }
            let others = Mirror(reflecting: other).children.map { "\($0.label ?? ""): \($0.value)" }
            let differing = zip(columns, others).filter { $0 != $1 }.map { "recomputed \($0) summary \($1)" }
            lines.append("\(name) \(differing.joined(separator: ", "))")
        }
        for row in extra where !missing.contains(where: { $0.key == row.key && $0.currency == row.currency }) {
            lines.append("\(row.key.day) \(row.key.productID) \(row.key.environment) summary only: \(row)")
        }
        return lines.joined(separator: "; ")
    }

    /// Some rows must carry movement and sandbox rows for the comparison to mean something.
    @Test("The population's days carry movement, several products and both environments")
    func populationCoversTheColumns() throws {
        let population = SummaryPopulation(count: 300, seed: 1)
        let summary = AnalyticsSummaryPropertyTests.summary(population.ledgers)
        let first = SummaryPopulation.origin
        let rows = DailyAnalytics(
            summary: summary, from: first, through: first.addingTimeInterval(120 * SummaryPopulation.day),
            catalogue: SummaryPopulation.catalogue, reportingCurrency: "USD"
        ).rows(rates: Self.rates)
        #expect(rows.contains { !$0.movementCents.isEmpty })
        #expect(rows.contains { $0.key.environment == AppStoreEnvironment.sandbox.rawValue })
        #expect(Set(rows.map(\.key.productID)).count >= 3)
        #expect(rows.contains { $0.churned > 0 } && rows.contains { $0.refundsCents > 0 })
    }
}
