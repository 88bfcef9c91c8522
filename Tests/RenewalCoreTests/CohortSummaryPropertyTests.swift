import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// The monthly figures from the summaries: for any window aligned to UTC days, refund rate by month,
/// trial conversion by cohort, LTV by cohort (every horizon, complete or not), ARPU's paying subscriptions
/// and the retention cohorts folded from the summed contribution rows equal `CohortFigures` (through
/// `SubscriptionAnalytics`) and `CohortRetention` over every ledger, value by value, under catalogues that
/// price and period the products differently (resolved at query time, not when the rows were made).
@Suite("Analytics summaries answer the monthly figures and ARPU's paying subscriptions as the recomputation does")
struct CohortSummaryPropertyTests {
    static let seeds: [UInt64] = [1, 2, 3, 4, 5, 6, 130]

    /// The population's catalogue, and one that gives other periods (yearly read as monthly, the unknown
    /// product weekly) and list prices in more currencies, so rows made once answer under both.
    static let catalogues: [ProductCatalogue] = [
        SummaryPopulation.catalogue,
        ProductCatalogue(products: [
            "com.example.weekly": .init(period: .week, listPrices: ["JPY": 400]),
            "com.example.monthly": .init(period: .twoMonths, listPrices: ["USD": 9.99, "EUR": 8.99]),
            "com.example.yearly": .init(period: .month, listPrices: ["EUR": 99]),
            "com.example.quarterly": .init(period: .sixMonths, listPrices: ["GBP": 20]),
        ]),
    ]

    /// A window of 1 to 90 days whose `until` falls from three months before the population's first
    /// purchase to a year and a half after its last, so young, full and complete LTV cohorts all occur.
    static func window(_ random: inout SeededGenerator) -> (since: Date, until: Date) {
        let end = Int.random(in: -120...560, using: &random)
        let length = Int.random(in: 1...90, using: &random)
        let until = SummaryPopulation.origin.addingTimeInterval(Double(end) * SummaryPopulation.day)
        return (until.addingTimeInterval(-Double(length) * SummaryPopulation.day), until)
    }

    /// Both answers for one window; the differences, named.
    static func compare(
        _ ledgers: [SubscriptionLedger], _ summary: AnalyticsSummary, since: Date, until: Date,
        catalogue: ProductCatalogue, environment: AppStoreEnvironment = .production, bundleID: String? = nil,
        unit: TimeInterval = 86_400
    ) throws -> (differences: [String], reference: CohortFigures, retention: CohortRetention) {
        var reference = SubscriptionAnalytics(
            since: since, until: until, catalogue: catalogue, reportingCurrency: "USD", environment: environment)
        var retention = CohortRetention(asOf: until, catalogue: catalogue)
        for ledger in ledgers where bundleID == nil || ledger.bundleID == bundleID {
            reference.add(ledger)
            retention.add(ledger)
        }
        let query = try #require(
            SummaryQuery(
                since: since, until: until, catalogue: catalogue, reportingCurrency: "USD", environment: environment,
                unit: unit))
        let answer = query.cohortFigures(of: summary, bundleID: bundleID)
        // CohortRetention counts Production only.
        let found = answer.differences(
            from: reference.cohortFigures, retention: environment == .production ? retention.cohorts : nil)
        let window = "[\(Timestamp.string(since)), \(Timestamp.string(until)))"
        return (found.map { "\(window) \($0)" }, reference.cohortFigures, retention)
    }

    @Test("summed contributions give the monthly figures of random windows and untils", arguments: seeds)
    func windowsAgree(seed: UInt64) throws {
        let population = SummaryPopulation(count: 400, seed: seed)
        let summary = AnalyticsSummaryPropertyTests.summary(population.ledgers)
        var random = SeededGenerator(seed: seed &* 104_729)
        var found: [String] = []
        var exercised: [String: Int] = [:]
        for round in 0..<40 {
            let (since, until) = Self.window(&random)
            let catalogue = Self.catalogues[round % Self.catalogues.count]
            let (differences, reference, retention) = try Self.compare(
                population.ledgers, summary, since: since, until: until, catalogue: catalogue)
            found += differences
            Self.count(reference, retention, into: &exercised)
        }
        // The population exercises every figure, so agreeing is not agreeing on empty tables.
        let names = [
            "refunded", "refund amount", "trials converted", "in trial", "ltv 365 complete",
            "ltv by currency", "paying in window", "retained",
        ]
        for name in names { #expect(exercised[name, default: 0] > 0, "seed \(seed): \(name) never occurs") }
        var app = SeededGenerator(seed: seed)
        for environment in [AppStoreEnvironment.sandbox, .production] {
            let (since, until) = Self.window(&app)
            found +=
                try Self.compare(
                    population.ledgers, summary, since: since, until: until, catalogue: Self.catalogues[1],
                    environment: environment, bundleID: environment == .production ? "com.example.a" : nil
                ).differences
        }
        #expect(found.count == 0, "seed \(seed): \(found.count) differences, first: \(found.prefix(6))")
    }

    /// Tallies what the reference's tables hold, to show the comparison is not of empty tables.
    static func count(_ figures: CohortFigures, _ retention: CohortRetention, into tally: inout [String: Int]) {
        for month in figures.refundMonths.values {
            tally["refunded", default: 0] += month.refunded
            tally["refund amount", default: 0] += month.refunds.byCurrency.count
        }
        for cohort in figures.trialCohorts.values {
            tally["trials converted", default: 0] += cohort.converted
            tally["in trial", default: 0] += cohort.inTrial
        }
        for cohort in figures.ltvCohorts.values {
            if cohort.complete(365, asOf: figures.asOf), cohort.customers > 0 {
                tally["ltv 365 complete", default: 0] += 1
            }
            tally["ltv by currency", default: 0] += cohort.customersByCurrency.count
        }
        tally["paying in window", default: 0] += figures.payingInWindow.values.reduce(0, +)
        for cohort in retention.cohorts.values { tally["retained", default: 0] += cohort.retained.reduce(0, +) }
    }

    @Test("an hourly summary answers the monthly figures of windows aligned to hours")
    func hourlyWindows() throws {
        let population = SummaryPopulation(count: 300, seed: 7)
        let summary = AnalyticsSummaryPropertyTests.summary(population.ledgers, unit: 3_600)
        var random = SeededGenerator(seed: 707)
        var found: [String] = []
        for round in 0..<20 {
            let end = Int.random(in: -100 * 24...500 * 24, using: &random)
            let until = SummaryPopulation.origin.addingTimeInterval(Double(end) * 3_600)
            let since = until.addingTimeInterval(-Double(Int.random(in: 1...2_160, using: &random)) * 3_600)
            found +=
                try Self.compare(
                    population.ledgers, summary, since: since, until: until,
                    catalogue: Self.catalogues[round % Self.catalogues.count], unit: 3_600
                ).differences
        }
        #expect(found.count == 0, "\(found.count) differences, first: \(found.prefix(6))")
    }

    @Test("a cohort month's first day is the calendar's, for every month from 1970 to 2100")
    func firstDays() {
        for index in (1970 * 12)..<(2100 * 12) {
            let day = AnalyticsContributions.firstDay(ofMonth: index)
            let date = Date(timeIntervalSince1970: Double(day) * 86_400)
            #expect(CohortFigures.monthIndex(of: date) == index)
            #expect(CohortFigures.monthIndex(of: date.addingTimeInterval(-1)) == index - 1)
        }
    }
}
