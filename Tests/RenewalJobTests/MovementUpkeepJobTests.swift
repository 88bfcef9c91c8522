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
    @Test(
        "summaries built on an empty database and kept by two weeks of runs: window, days and ARPU's subscriptions",
        arguments: Backend.available)
    func keptByRuns(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let (store, origin, _) = try await SummaryUpkeepJobTests.builtThenKeptByRuns(h, days: 14)
            try await Self.expectEqual(h, store, from: origin, label: "before the fold")
            try await store.compactSummaries()
            try await Self.expectEqual(h, store, from: origin, label: "after the fold")
        }
    }

    /// Windows of 1 to 15 UTC days inside the runs' span and the whole span (`RandomDayWindows`).
    static func expectEqual(
        _ h: JobHarness, _ store: any AnalyticsSummaryStore, from origin: Date, label: String
    ) async throws {
        var moved = false
        for window in try RandomDayWindows.windows(from: origin, to: h.state.now, seed: 19, random: 5) {
            let summary = try await store.analyticsMovementSummary(
                s: window.s, u: window.u, bundleID: nil, environment: .production)
            let answer = try #require(window.query.movement(of: summary), "\(label): no movement")
            let expected = try await ClosedWindowMonthTests.figures(h, since: window.since, until: window.until)
                .movement
            let name = window.named(label)
            #expect(answer.window == expected.window, "\(name): \(answer.window) against \(expected.window)")
            #expect(answer.payingAtUntil == expected.payingAtUntil, "\(name): paying at until")
            let days = answer.days ?? []
            let wrong = zip(expected.dayNames, zip(expected.days, days)).filter { $0.1.0 != $0.1.1 }.map(\.0)
            #expect(days.count == expected.days.count && wrong.isEmpty, "\(name): days differ: \(wrong.prefix(5))")
            moved = moved || !expected.window.buckets.isEmpty
        }
        #expect(moved, "\(label): the runs moved no MRR")
    }
}
