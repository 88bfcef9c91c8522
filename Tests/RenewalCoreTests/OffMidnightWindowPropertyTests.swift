import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// Windows whose bounds are not UTC midnights (an age such as `28d`, `--until` now), answered from the day
/// summaries: the summed rows read for the days `(s, u)` around the window, corrected by the subscriptions
/// with something dated in the two part-days (`OffUnitWindow`), give every figure the recomputation gives
/// for `[since, until)`: the totals and products, MRR movement and its clipped days, the monthly figures
/// and the retention cohorts. And a subscription the window does not correct has the same rows on both
/// axes, so finding them by their dates is enough.
@Suite("Analytics summaries answer windows off UTC midnights once corrected, as the recomputation does")
struct OffMidnightWindowPropertyTests {
    /// A bound near `date`: on a midnight a tenth of the time, a ledger's own date a fifth (where "before"
    /// and "at" part), else any millisecond of its day.
    static func bound(near date: Date, _ ledgers: [SubscriptionLedger], _ random: inout SeededGenerator) -> Date {
        let day = (date.timeIntervalSince1970 / SummaryPopulation.day).rounded(.down) * SummaryPopulation.day
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return Date(timeIntervalSince1970: day)
        case 1, 2:
            let dates = ledgers.randomElement(using: &random)?.dates ?? []
            if let date = dates.randomElement(using: &random) { return date }
        default: break
        }
        return Date(timeIntervalSince1970: day + Double(Int.random(in: 0..<86_400_000, using: &random)) / 1000)
    }

    /// A window from an hour to 90 days, its `until` from three months before the population's first date
    /// to well after its last.
    static func window(_ ledgers: [SubscriptionLedger], _ random: inout SeededGenerator) -> (since: Date, until: Date) {
        let end = SummaryPopulation.origin.addingTimeInterval(
            Double(Int.random(in: -100...420, using: &random)) * SummaryPopulation.day)
        let until = bound(near: end, ledgers, &random)
        let length =
            Bool.random(using: &random)
            ? Double.random(in: 3_600...(2 * SummaryPopulation.day), using: &random)
            : Double.random(in: 1...90, using: &random) * SummaryPopulation.day
        var since = bound(near: until.addingTimeInterval(-length), ledgers, &random)
        if since >= until { since = until.addingTimeInterval(-length) }
        return (since, until)
    }

    @Test(
        "every figure of random windows off midnights equals the recomputation's", arguments: [UInt64(1), 2, 3, 4, 130])
    func windowsAgree(seed: UInt64) throws {
        let population = SummaryPopulation(count: 300, seed: seed)
        let summary = AnalyticsSummaryPropertyTests.summary(population.ledgers)
        var random = SeededGenerator(seed: seed &* 65_537)
        var found: [String] = []
        var corrected = 0
        var chosen = 0
        for round in 0..<30 {
            let (since, until) = Self.window(population.ledgers, &random)
            let catalogue = CohortSummaryPropertyTests.catalogues[round % 2]
            // Read from the midnight before or after each bound in turn: every choice gives the same answer.
            let window = try #require(OffUnitWindow(since: since, until: until))
            let read = window.reading(sinceAfter: round % 2 == 1, untilBefore: round % 4 >= 2) ?? window
            let query = SummaryQuery(read, catalogue: catalogue)
            if read != window { chosen += 1 }
            var answer = query.relabeled(summary)
            for ledger in population.ledgers {
                let correction = query.correction(of: ledger)
                if !correction.isEmpty { corrected += 1 }
                answer.add(correction)
            }
            found += try Self.compare(population.ledgers, answer, query)
        }
        #expect(corrected > 50, "seed \(seed): the windows corrected only \(corrected) subscriptions")
        #expect(chosen > 5, "seed \(seed): only \(chosen) windows read from another midnight")
        #expect(found.count == 0, "seed \(seed): \(found.count) differences, first: \(found.prefix(8))")
    }

    @Test(
        "windows off midnights over ledgers dated only on midnights are answered by the summaries alone",
        arguments: [UInt64(6), 7, 8])
    func midnightDatesNeedNoCorrection(seed: UInt64) throws {
        let population = SummaryPopulation(count: 300, seed: seed).ledgers.map(Self.onMidnights)
        let summary = AnalyticsSummaryPropertyTests.summary(population)
        var random = SeededGenerator(seed: seed &* 257)
        var found: [String] = []
        var readings = 0
        for round in 0..<24 {
            // Bounds at any millisecond of their days, never on a midnight: an hour to 90 days.
            let (since, until) = Self.window(population, &random)
            let off = { (date: Date) in
                date.timeIntervalSince1970.truncatingRemainder(dividingBy: SummaryPopulation.day) == 0
                    ? date.addingTimeInterval(1.5) : date
            }
            let window = try #require(OffUnitWindow(since: off(since), until: off(until)))
            for (sinceAfter, untilBefore) in [(false, false), (true, false), (false, true), (true, true)] {
                guard let read = window.reading(sinceAfter: sinceAfter, untilBefore: untilBefore) else { continue }
                readings += 1
                let query = SummaryQuery(read, catalogue: CohortSummaryPropertyTests.catalogues[round % 2])
                let needing = population.filter { read.needsCorrection($0) }.count
                #expect(needing == 0, "\(needing) subscriptions dated in the part-days of \(read)")
                found += try Self.compare(population, query.relabeled(summary), query)
            }
        }
        #expect(readings > 24)
        #expect(found.isEmpty, "seed \(seed): \(found.count) differences, first: \(found.prefix(8))")
    }

    /// `ledger` with each of its dates moved to the midnight (UTC) that begins its day.
    static func onMidnights(_ ledger: SubscriptionLedger) -> SubscriptionLedger {
        func midnight(_ date: Date) -> Date {
            Date(
                timeIntervalSince1970: (date.timeIntervalSince1970 / SummaryPopulation.day).rounded(.down)
                    * SummaryPopulation.day)
        }
        var ledger = ledger
        for index in ledger.transactions.indices {
            ledger.transactions[index].purchasedAt = ledger.transactions[index].purchasedAt.map(midnight)
            ledger.transactions[index].expiresAt = ledger.transactions[index].expiresAt.map(midnight)
            ledger.transactions[index].revokedAt = ledger.transactions[index].revokedAt.map(midnight)
            ledger.transactions[index].seatsRevokedAt = ledger.transactions[index].seatsRevokedAt.map(midnight)
        }
        for index in ledger.facts.indices {
            ledger.facts[index].startsAt = midnight(ledger.facts[index].startsAt)
            ledger.facts[index].endsAt = ledger.facts[index].endsAt.map(midnight)
            ledger.facts[index].statedAt = midnight(ledger.facts[index].statedAt)
        }
        return ledger
    }

    /// Every part of the answer against the recomputation over `ledgers`.
    static func compare(_ ledgers: [SubscriptionLedger], _ summary: AnalyticsSummary, _ query: SummaryQuery) throws
        -> [String]
    {
        var reference = SubscriptionAnalytics(
            since: query.since, until: query.until, catalogue: query.catalogue, reportingCurrency: "USD")
        var retention = CohortRetention(asOf: query.until, catalogue: query.catalogue)
        for ledger in ledgers {
            reference.add(ledger)
            retention.add(ledger)
        }
        let window = "[\(Timestamp.string(query.since)), \(Timestamp.string(query.until)))"
        let figures = query.figures(of: summary)
        var found = AnalyticsSummaryPropertyTests.differences(reference.total, figures.total).map {
            "\(window) total \($0)"
        }
        for product in Set(reference.byProduct.keys).union(figures.byProduct.keys).sorted() {
            found += AnalyticsSummaryPropertyTests.differences(
                reference.byProduct[product] ?? AnalyticsFigures(), figures.byProduct[product] ?? AnalyticsFigures()
            ).map { "\(window) \(product) \($0)" }
            if (reference.byProduct[product] == nil) != (figures.byProduct[product] == nil) {
                found.append("\(window) \(product) listed by one answer only")
            }
        }
        found += AnalyticsSummaryMovementTests.differences(
            reference.movement, query.movement(of: summary), window: window)
        found += query.cohortFigures(of: summary).differences(
            from: reference.cohortFigures, retention: retention.cohorts
        ).map { "\(window) \($0)" }
        return found
    }

    @Test("a correction is the difference of the two axes' rows, less the rows no read of its window takes")
    func correctionKeepsTheReadRows() throws {
        let population = SummaryPopulation(count: 300, seed: 5)
        let unitAxis = AnalyticsContributions()
        var random = SeededGenerator(seed: 55)
        var corrected = 0
        var left = 0
        var kept = 0
        var monthlyLeft = 0
        var differing: [String] = []
        for _ in 0..<40 {
            let (since, until) = Self.window(population.ledgers, &random)
            let own = try #require(OffUnitWindow(since: since, until: until))
            let window =
                own.reading(sinceAfter: Bool.random(using: &random), untilBefore: Bool.random(using: &random)) ?? own
            let query = SummaryQuery(window)
            let cohortsFrom = try #require(query.cohortUnits.first)
            // What a window's reads select: events in [s, u), steps up to u, the window's corners
            // (`since ≤ s < until ≤ u`) and the cohort rows of the 24 months up to until's (`until ≤ since ≤ u`).
            func read(_ shape: ContributionShape) -> Bool {
                switch shape {
                case .event(let day): window.s <= day && day < window.u
                case .step(let day): day <= window.u
                case .corner(let x, let y):
                    (x <= window.s && window.s < y && y <= window.u) || (y <= x && x <= window.u && y >= cohortsFrom)
                }
            }
            for ledger in population.ledgers where window.needsCorrection(ledger) {
                corrected += 1
                // Dates in the same units on both axes: the same rows, so one set of them is worked out.
                if window.keepsUnits(of: ledger) {
                    kept += 1
                    if unitAxis.rows(of: ledger) != AnalyticsContributions(window: window).rows(of: ledger) {
                        differing.append("\(ledger.originalTransactionID) keeps its units but not its rows")
                    }
                }
                let dayRows = Dictionary(
                    unitAxis.rows(of: ledger).map { (window.relabeled($0.key), $0.value) }, uniquingKeysWith: +)
                let whole = AnalyticsSummary.difference(
                    from: dayRows, to: AnalyticsContributions(window: window).rows(of: ledger))
                var expected = whole.filter { read($0.key.shape) }
                left += whole.count - expected.count
                if !window.keepsUnits(of: ledger), !window.changesMonthlyCohorts(of: ledger) {
                    // Nothing dated on until's last day: its monthly cohort rows only move between units that
                    // count alike, so they are left out, and they add up to no figure.
                    let monthly = expected.filter { $0.key.figure.isCohort && $0.key.figure != .payingInWindow }
                    expected = expected.filter { monthly[$0.key] == nil }
                    monthlyLeft += monthly.count
                    var moved = AnalyticsSummary()
                    moved.add(monthly)
                    if query.cohortFigures(of: moved) != query.cohortFigures(of: AnalyticsSummary()) {
                        differing.append("\(ledger.originalTransactionID)'s monthly rows count in [\(since), \(until))")
                    }
                }
                if query.correction(of: ledger) != expected {
                    differing.append("\(ledger.originalTransactionID) in [\(since), \(until))")
                }
            }
        }
        #expect(corrected > 100 && left > 0, "\(corrected) corrected, \(left) rows left out")
        #expect(kept > 20, "only \(kept) corrected subscriptions kept their units")
        #expect(monthlyLeft > 100, "only \(monthlyLeft) monthly cohort rows left out")
        #expect(differing.count == 0, "\(differing.count) corrections differ, first: \(differing.prefix(5))")
    }

    @Test("a subscription with nothing dated in the part-days has the same rows on both axes")
    func uncorrectedRowsAreEqual() throws {
        let population = SummaryPopulation(count: 300, seed: 9)
        let unitAxis = AnalyticsContributions()
        var random = SeededGenerator(seed: 99)
        var compared = 0
        var differing: [String] = []
        for _ in 0..<20 {
            let (since, until) = Self.window(population.ledgers, &random)
            let window = try #require(OffUnitWindow(since: since, until: until))
            let windowAxis = AnalyticsContributions(window: window)
            for ledger in population.ledgers where !window.needsCorrection(ledger) {
                compared += 1
                if unitAxis.rows(of: ledger) != windowAxis.rows(of: ledger) {
                    differing.append("\(ledger.originalTransactionID) in [\(since), \(until))")
                }
            }
        }
        #expect(compared > 1_000)
        #expect(differing.isEmpty, "\(differing.count) subscriptions differ, first: \(differing.prefix(5))")
    }

    @Test("a correction works out once the rows placed by dates in the same units on both axes")
    func correctionBuildsTheMovedRows() throws {
        // A year of monthly renewals at 05:00, the last on the window's day: only that renewal (and the
        // expiry it follows) is in the part-day before 06:30; the first purchase and the rest are not.
        let day = Date(timeIntervalSince1970: 1_760_572_800)  // 2025-10-16
        let renewals = (0..<12).map { month in
            let purchased = day.addingTimeInterval(Double(month - 11) * 30 * 86_400 + 5 * 3_600)
            return LedgerTransaction(
                transactionID: "t\(month)", originalTransactionID: "o", productID: "m", purchasedAt: purchased,
                expiresAt: purchased.addingTimeInterval(30 * 86_400), priceMilliunits: month < 6 ? nil : 9_990,
                currency: "USD", isTrial: false, ownershipType: "PURCHASED", transactionReason: "RENEWAL",
                origin: .statusAnswer)
        }
        let ledger = SubscriptionLedger(
            originalTransactionID: "o", bundleID: "app", environment: .production, transactions: renewals)
        let window = try #require(
            OffUnitWindow(since: day.addingTimeInterval(6.5 * 3_600), until: day.addingTimeInterval(7.5 * 3_600)))
        let query = SummaryQuery(window)
        #expect(window.needsCorrection(ledger) && !window.keepsUnits(of: ledger))
        // Worked out on both axes in full, a correction built 140 keys here, more than three per row read;
        // now only those of the rows the moved renewal places (20).
        let read = AnalyticsContributions().rows(of: ledger).keys.filter { query.reads.selects($0.shape) }
        let built = query.keysBuilt(correcting: ledger)
        #expect(read.count > 30, "\(read.count) rows read")
        #expect(built < read.count, "\(built) keys built for \(read.count) rows read")
        // And it is still the two axes' difference.
        let dayRows = AnalyticsContributions().rows(of: ledger)
        let whole = AnalyticsSummary.difference(
            from: dayRows, to: AnalyticsContributions(window: window).rows(of: ledger))
        #expect(query.correction(of: ledger) == whole.filter { query.reads.selects($0.key.shape) })
    }

    @Test("the axis: since and until take the place of their midnights, every other unit start stays")
    func axis() throws {
        let day = SummaryPopulation.day
        let midnight = SummaryPopulation.origin
        let window = try #require(
            OffUnitWindow(since: midnight.addingTimeInterval(6 * 3_600), until: midnight.addingTimeInterval(2.5 * day)))
        let contributions = AnalyticsContributions(window: window)
        let s = window.s
        // Three units a day: since inside day n is in unit 3n + 1, until inside day n + 2 has the first unit
        // start 3n + 8 (just before midnight n + 3).
        #expect(s % 3 == 1 && window.u == s + 7)
        #expect(window.parts.count == 2)
        // The midnight before since stays in its own unit; inside the day before since: that unit too.
        #expect(contributions.index(of: midnight) == s - 1)
        #expect(contributions.index(of: midnight.addingTimeInterval(1)) == s - 1)
        #expect(contributions.index(of: window.since) == s)
        #expect(contributions.index(of: midnight.addingTimeInterval(day)) == s + 2)
        #expect(contributions.index(of: midnight.addingTimeInterval(day + 1)) == s + 3)
        #expect(contributions.index(of: window.until.addingTimeInterval(-0.001)) == s + 6)
        #expect(contributions.index(of: window.until) == s + 7)
        // A span starting at the midnight holds its unit; one starting at or before since (after the midnight)
        // holds unit s's start, since.
        #expect(contributions.boundary(of: midnight) == s - 1)
        #expect(contributions.boundary(of: midnight.addingTimeInterval(1)) == s)
        #expect(contributions.boundary(of: window.since) == s)
        #expect(contributions.boundary(of: window.since.addingTimeInterval(0.001)) == s + 1)
        #expect(contributions.boundary(of: midnight.addingTimeInterval(day)) == s + 2)
        #expect(contributions.boundary(of: window.until) == s + 7)
        #expect(contributions.boundary(of: window.until.addingTimeInterval(0.001)) == s + 8)
        #expect(contributions.boundary(of: midnight.addingTimeInterval(3 * day)) == s + 8)
        // The part-days leave their midnights out.
        let parts = window.parts
        #expect(!parts[0].contains(midnight) && parts[0].contains(midnight.addingTimeInterval(0.001)))
        #expect(parts[0].contains(window.since) && !parts[0].contains(window.since.addingTimeInterval(0.001)))
        #expect(parts[1].contains(window.until) && !parts[1].contains(midnight.addingTimeInterval(3 * day)))
        #expect(parts[0].milliseconds.lowerBound == Int64(midnight.timeIntervalSince1970 * 1000) + 1)
        #expect(parts[1].milliseconds.upperBound == Int64(midnight.timeIntervalSince1970 * 1000) + 3 * 86_400_000 - 1)
        let aligned = try #require(OffUnitWindow(since: midnight, until: midnight.addingTimeInterval(day)))
        #expect(aligned.isAligned && aligned.parts.isEmpty)
    }
}
