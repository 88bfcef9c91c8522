import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalSQL
import RenewalStorage
import RenewalTesting
import Testing

/// Issue 45: the MRR movement rows are kept by the job's own writes like the other summary rows. Built on
/// an empty database, then kept by two weeks of runs of `ClosedWindowPlan`'s subscribers (renewals in
/// four currencies, trials, grace periods, billing retry, refunds, upgrades, extensions, new purchases):
/// the movement of UTC-day windows read from the database (`analyticsMovementSummary`) equals
/// `MRRMovementSeries` over the ledger, before the end-of-run fold and after it.
@Suite("MRR movement from the summaries kept by the job's writes equals the recomputation, on both databases")
struct MovementUpkeepJobTests {
    static let day: TimeInterval = 86_400

    @Test(
        "summaries built on an empty database and kept by two weeks of runs: window, days and ARPU's subscriptions",
        arguments: Backend.available)
    func keptByRuns(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let store = try #require(h.store as? any AnalyticsSummaryStore)
            _ = try await store.rebuildAnalyticsSummaries()
            let origin = h.state.now
            var plan = ClosedWindowPlan(origin: origin)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                try await ClosedWindowMonthTests.runs(
                    h, plan: &plan, through: origin.addingTimeInterval(14 * Self.day), router, client)
            }
            try await Self.expectEqual(h, store, from: origin, label: "before the fold")
            try await store.compactSummaries()
            try await Self.expectEqual(h, store, from: origin, label: "after the fold")
        }
    }

    /// Windows of 1 to 15 UTC days inside the runs' span and the whole span.
    static func expectEqual(
        _ h: JobHarness, _ store: any AnalyticsSummaryStore, from origin: Date, label: String
    ) async throws {
        let first = SummaryUpkeepJobTests.midnight(origin)
        let last = SummaryUpkeepJobTests.midnight(h.state.now).addingTimeInterval(Self.day)
        let span = Int(last.timeIntervalSince(first) / Self.day)
        var random = SeededGenerator(seed: 19)
        var windows = [(0, span), (span - 1, span)]
        for _ in 0..<5 {
            let start = Int.random(in: 0..<span, using: &random)
            windows.append((start, Int.random(in: (start + 1)...span, using: &random)))
        }
        var moved = false
        for (start, end) in windows {
            let since = first.addingTimeInterval(Double(start) * Self.day)
            let until = first.addingTimeInterval(Double(end) * Self.day)
            let query = try #require(
                SummaryQuery(since: since, until: until, catalogue: ClosedWindowMonthTests.catalogue))
            let summary = try await store.analyticsMovementSummary(
                s: Int(since.timeIntervalSince1970 / Self.day), u: Int(until.timeIntervalSince1970 / Self.day),
                bundleID: nil, environment: .production)
            let answer = try #require(query.movement(of: summary), "\(label): no movement")
            let expected = try await ClosedWindowMonthTests.figures(h, since: since, until: until).movement
            let window = "\(label), days \(start) to \(end)"
            #expect(answer.window == expected.window, "\(window): \(answer.window) against \(expected.window)")
            #expect(answer.payingAtUntil == expected.payingAtUntil, "\(window): paying at until")
            let days = answer.days ?? []
            let wrong = zip(expected.dayNames, zip(expected.days, days)).filter { $0.1.0 != $0.1.1 }.map(\.0)
            #expect(days.count == expected.days.count && wrong.isEmpty, "\(window): days differ: \(wrong.prefix(5))")
            moved = moved || !expected.window.buckets.isEmpty
        }
        #expect(moved, "\(label): the runs moved no MRR")
    }
}
