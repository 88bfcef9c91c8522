import Foundation
import RenewalCore
import RenewalTesting
import Testing

/// One UTC-day window of a job test's runs, as the summaries are read for it: days `start..<end` counted
/// from the first run's midnight.
struct DayWindow {
    var start: Int
    var end: Int
    var since: Date
    var until: Date
    /// The query `renewal analytics` makes of the window, over `ClosedWindowMonthTests.catalogue`.
    var query: SummaryQuery

    /// The units the summary stores are read with (three a day: `SummaryQuery.sinceUnit`, `untilUnit`).
    var s: Int { query.sinceUnit }
    var u: Int { query.untilUnit }

    /// `label` and the window, for an expectation's message.
    func named(_ label: String) -> String { "\(label), days \(start) to \(end)" }
}

/// The windows the summary upkeep tests compare with the recomputation: the runs' whole span of UTC days
/// (from `origin`'s midnight to the end of `now`'s day), its first and last day, and `random` windows
/// drawn with `seed`, so a failure names a window that comes again on the next run.
enum RandomDayWindows {
    static let day: TimeInterval = 86_400

    /// The UTC midnight starting `date`'s day.
    static func midnight(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / day).rounded(.down) * day)
    }

    static func windows(from origin: Date, to now: Date, seed: UInt64, random: Int) throws -> [DayWindow] {
        let first = midnight(origin)
        let span = Int(midnight(now).addingTimeInterval(day).timeIntervalSince(first) / day)
        var generator = SeededGenerator(seed: seed)
        var bounds = [(0, span), (0, 1), (span - 1, span)]
        for _ in 0..<random {
            let start = Int.random(in: 0..<span, using: &generator)
            bounds.append((start, Int.random(in: (start + 1)...span, using: &generator)))
        }
        return try bounds.map { start, end in
            let since = first.addingTimeInterval(Double(start) * day)
            let until = first.addingTimeInterval(Double(end) * day)
            let query = try #require(
                SummaryQuery(since: since, until: until, catalogue: ClosedWindowMonthTests.catalogue))
            return DayWindow(start: start, end: end, since: since, until: until, query: query)
        }
    }

    /// `count` windows of the runs' span whose bounds fall at random milliseconds (not midnights), drawn with
    /// `seed`, each as `renewal analytics` queries it (`SummaryQuery(window:…)`).
    static func offMidnight(from origin: Date, to now: Date, seed: UInt64, count: Int) throws -> [SummaryQuery] {
        let first = midnight(origin).timeIntervalSince1970
        let last = now.timeIntervalSince1970
        var generator = SeededGenerator(seed: seed)
        return try (0..<count).map { _ in
            let a = Double.random(in: first..<last, using: &generator)
            let b = Double.random(in: first..<last, using: &generator)
            let (since, until) = (Date(timeIntervalSince1970: min(a, b)), Date(timeIntervalSince1970: max(a, b) + 1))
            return try #require(
                SummaryQuery(window: since, until: until, catalogue: ClosedWindowMonthTests.catalogue))
        }
    }
}
