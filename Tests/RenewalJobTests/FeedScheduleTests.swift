import AppStoreSimulator
import Foundation
import InMemoryLogging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalObservability
import RenewalPostgres
import RenewalServerAPI
import RenewalSQL
import RenewalStorage
import Testing

/// Polling less while Apple's change feed is healthy, and falling back to the full schedule by itself
/// when it is not, on SQLite and PostgreSQL against the simulator.
@Suite("Change feed schedule: poll rarely while the feed is current, fall back when it is not")
struct FeedScheduleTests {
    static let minute: TimeInterval = 60
    static let hour: TimeInterval = 3_600
    static let day: TimeInterval = 86_400

    /// Each user's receipt `next_check_at` and `polling_check_at`.
    static func schedule(_ h: JobHarness) async throws -> [String: (next: Date?, polling: Date?)] {
        let rows = try await DashboardViewsTests.query(
            h, "SELECT user_id, next_check_at, polling_check_at FROM receipts")
        var schedule: [String: (next: Date?, polling: Date?)] = [:]
        for row in rows {
            guard let user = DashboardViewsTests.text(row, "user_id") else { continue }
            func date(_ column: String) -> Date? {
                DashboardViewsTests.int(row, column).map { Date(timeIntervalSince1970: Double($0) / 1000) }
            }
            schedule[user] = (date("next_check_at"), date("polling_check_at"))
        }
        return schedule
    }

    @Test(
        """
        A healthy feed: checks only after expiry and at the 35-day safety net, a renewal is applied from the \
        notification without a status request; a feed failing past the maximum lag polls only what cannot wait (a \
        renewal due), says so in the report, log and metric, and once it has caught up nothing else was checked
        """,
        arguments: Backend.available)
    func stretchAndFallBack(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let t0 = h.state.now
            let monthly = h.receipt("fs-monthly", .renewal, daysAgo: 3)
            let annual = h.receipt("fs-annual", .renewal, daysAgo: 10, periodDays: 365)
            try await h.importReceipts([("monthly", monthly), ("annual", annual)])
            let firstExpiry = t0.addingTimeInterval(27 * Self.day)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                let metrics = RunMetrics(command: "run")
                let first = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.metrics = metrics
                    $0.reportPath = h.directory + "/healthy.json"
                }
                #expect(first.counts.checked == 2 && first.counts.feedFallback == [:], "\(first.counts)")
                #expect(metrics.text().contains(#"renewal_feed_healthy{command="run"} 1"#))
                let counts = try #require(try h.report(first)["counts"] as? [String: Any])
                #expect((counts["feed_fallback"] as? [String: Any])?.isEmpty == true, "\(counts)")
                var schedule = try await Self.schedule(h)
                // Not an hour before the expiry (polling's check, kept beside it), but just after it.
                #expect(schedule["monthly"]?.next == firstExpiry.addingTimeInterval(15 * Self.minute))
                // Polling would look weekly (before the expiry an hour before it).
                #expect(schedule["monthly"]?.polling == t0.addingTimeInterval(7 * Self.day))
                #expect(schedule["annual"]?.next == t0.addingTimeInterval(35 * Self.day))
                #expect(schedule["annual"]?.polling == t0.addingTimeInterval(7 * Self.day))

                // A week on, half-hourly runs: nothing is due, the feed is read once per run and environment.
                let feedRequests = h.state.feedRequests
                h.state.advance(by: 7 * Self.day)
                let quiet = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(quiet.counts.checked == 0, "polling would check the annual subscription now")
                #expect(h.state.feedRequests - feedRequests == 2)

                // The renewal: the feed lists it in the run after Apple publishes it, with Apple's signed
                // transaction and renewal info: applied as they are, no status request.
                h.state.advance(by: firstExpiry.timeIntervalSince(h.state.now) + 10 * Self.minute)
                let before = h.state.serverAPIRequests(account: "fs-monthly")
                let renewed = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(renewed.counts.notifications == 1 && renewed.counts.checked == 0, "\(renewed.counts)")
                #expect(renewed.counts.notificationsApplied == 1 && renewed.counts.changed == 1, "\(renewed.counts)")
                #expect(h.state.serverAPIRequests(account: "fs-monthly") - before == 0)
                schedule = try await Self.schedule(h)
                let secondExpiry = firstExpiry.addingTimeInterval(30 * Self.day)
                let expiries = try await h.receipts().first { $0.userID == "monthly" }?.subscriptions.map(\.snapshot)
                #expect(
                    schedule["monthly"]?.next == secondExpiry.addingTimeInterval(15 * Self.minute), "\(expiries ?? [])")
                // The scheduled look 15 minutes after the expiry is not needed any more.
                h.state.advance(by: 10 * Self.minute)
                let after = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(after.counts.checked == 0)

                // The feed breaks. Within the maximum lag (1 h) the schedule stays stretched …
                h.state.feedFault = .outage
                h.state.advance(by: 30 * Self.minute)
                let tolerated = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(tolerated.counts.feedFallback == [:], "\(tolerated.counts)")
                // … past it, only what cannot wait for the feed is polled: the annual subscription's weekly
                // check (polling's, for refunds the feed brings later) is not made.
                h.state.advance(by: Self.hour)
                let fallbackMetrics = RunMetrics(command: "run")
                let fellBack = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.metrics = fallbackMetrics
                    $0.reportPath = h.directory + "/fallback.json"
                }
                #expect(fellBack.counts.feedFallback == ["Production": "pull_failed", "Sandbox": "pull_failed"])
                #expect(fallbackMetrics.text().contains(#"renewal_feed_healthy{command="run"} 0"#))
                let fallbackCounts = try #require(try h.report(fellBack)["counts"] as? [String: Any])
                #expect(
                    (fallbackCounts["feed_fallback"] as? [String: String])?["Production"] == "pull_failed",
                    "\(fallbackCounts)")
                #expect(h.logs.entries.contains { "\($0.message)".contains("Apple's change feed is not current") })
                #expect(fellBack.counts.checked == 0, "nothing is due before the next renewal")
                let unchanged = try await Self.schedule(h)
                #expect(unchanged["monthly"]?.next == schedule["monthly"]?.next)
                #expect(unchanged["annual"]?.next == t0.addingTimeInterval(35 * Self.day))
                let stored = try await (h.store as? any RunHistoryStore)?.lastRun()
                #expect(stored?.counts.feedFallback == ["Production": "pull_failed", "Sandbox": "pull_failed"])

                // Healthy again: the catch-up reads the outage's window; nothing was moved, nothing checked.
                h.state.feedFault = .none
                h.state.advance(by: 30 * Self.minute)
                let healed = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(healed.counts.feedFallback == [:] && healed.counts.feedLagSeconds == 0)
                #expect(try await Self.schedule(h)["annual"]?.next == t0.addingTimeInterval(35 * Self.day))
            }
        }
    }

    @Test(
        """
        A feed down for two days polls only the renewal that falls within the outage, an hour before it, and \
        leaves the annual subscription to the feed; the catch-up applies the renewal from its notification and \
        every row keeps the feed's schedule without a check
        """,
        arguments: Backend.available)
    func outagePollsWhatCannotWait(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let t0 = h.state.now
            let monthly = h.receipt("fo-monthly", .renewal, daysAgo: 28)
            let annual = h.receipt("fo-annual", .renewal, daysAgo: 10, periodDays: 365)
            try await h.importReceipts([("monthly", monthly), ("annual", annual)])
            let expiry = t0.addingTimeInterval(2 * Self.day)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                h.state.feedFault = .outage
                var polledRuns = 0
                // Half-hourly runs through two days of outage.
                while h.state.now < expiry.addingTimeInterval(-40 * Self.minute) {
                    h.state.advance(by: 30 * Self.minute)
                    let run = try await h.run(.run, verifier: router) { $0.feed = client }
                    polledRuns += run.counts.checked
                }
                #expect(polledRuns == 1, "the renewal due, checked once an hour before it")
                #expect(h.state.serverAPIRequests(account: "fo-monthly") == 2)
                #expect(h.state.serverAPIRequests(account: "fo-annual") == 1, "the annual one waits for the feed")

                h.state.feedFault = .none
                h.state.advance(by: expiry.timeIntervalSince(h.state.now) + 10 * Self.minute)
                let healed = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(healed.counts.feedFallback == [:] && healed.counts.checked == 0, "\(healed.counts)")
                #expect(healed.counts.notificationsApplied == 1, "the renewal, from its notification")
                let schedule = try await Self.schedule(h)
                #expect(schedule["monthly"]?.next == expiry.addingTimeInterval(30 * Self.day + 15 * Self.minute))
                #expect(schedule["annual"]?.next == t0.addingTimeInterval(35 * Self.day))
            }
        }
    }

    @Test(
        """
        A feed read for over a day without a notification while checks find renewals (no V2 URL set) is called \
        silent: the job polls on the full schedule and says why
        """,
        arguments: Backend.available)
    func silentFeedFallsBack(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let t0 = h.state.now
            // Renews a day from now.
            try await h.importReceipts([("renewing", h.receipt("fs-silent", .renewal, daysAgo: 29))])
            h.state.feedFault = .silent
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                let first = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(first.counts.feedFallback == [:])
                // The check just after the expiry finds the renewal the feed never announced.
                h.state.advance(by: Self.day + 20 * Self.minute)
                let renewalCheck = h.state.now
                let renewal = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(renewal.counts.checked == 1 && renewal.counts.feedFallback == [:], "\(renewal.counts)")
                h.state.advance(by: 30 * Self.minute)
                let silent = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(silent.counts.feedFallback?["Production"] == "silent", "\(silent.counts)")
                #expect(silent.counts.feedFallback?["Sandbox"] == nil, "no sandbox renewals: not silent")
                #expect(h.logs.entries.contains { "\($0.message)".contains("App Store Server Notifications V2 URL") })
                let next = try await Self.schedule(h)["renewing"]?.next
                #expect(next == renewalCheck.addingTimeInterval(7 * Self.day), "back to the weekly check")
            }
        }
    }

    @Test(
        """
        Notifications listed twice or newest first change nothing twice and never roll state back: a refund, an \
        auto-renew change, a billing failure and a recovery each end as Apple says, each checked once a run
        """,
        arguments: Backend.available)
    func duplicatedAndReorderedPages(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let customers = [
                ("refunded", h.receipt("fs-refund", .refund, daysAgo: 40)),
                ("lapsing", h.receipt("fs-lapse", .voluntaryExpiry, daysAgo: 25)),
                ("failing", h.receipt("fs-billing", .billingRetry, daysAgo: 25)),
                ("recovering", h.receipt("fs-recovery", .billingRecovery, daysAgo: 25)),
            ]
            try await h.importReceipts(customers)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                var expected: [String: String] = [:]
                for (fault, days) in [(SimulatorState.FeedFault.duplicated, 6.0), (.reordered, 4.0)] {
                    h.state.feedFault = fault
                    h.state.advance(by: days * Self.day)
                    let accounts = customers.map(\.1.account)
                    let before = accounts.map { h.state.serverAPIRequests(account: $0) }
                    let outcome = try await h.run(.run, verifier: router) { $0.feed = client }
                    let after = accounts.map { h.state.serverAPIRequests(account: $0) }
                    #expect(zip(before, after).allSatisfy { $1 - $0 <= 1 }, "\(fault): \(before) → \(after)")
                    #expect(outcome.counts.failed == 0 && outcome.counts.feedFallback == [:], "\(outcome.counts)")
                    // Read again at once: nothing new, nothing checked.
                    let again = try await h.run(.run, verifier: router) { $0.feed = client }
                    let nexts = try await Self.schedule(h).mapValues(\.next)
                    #expect(
                        again.counts.notifications == 0 && again.counts.checked == 0,
                        "\(fault): \(again.counts) \(nexts) now \(h.state.now)")
                    expected = try await ChangeFeedRunTests.states(h)
                }
                #expect(
                    expected == [
                        "refunded": "revoked", "lapsing": "expired", "failing": "billing_retry",
                        "recovering": "active",
                    ], "\(expected)")
                // The recorded notifications are each Apple's once, whatever the pages repeated.
                let rows = try await DashboardViewsTests.query(
                    h, "SELECT COUNT(*) AS n, COUNT(DISTINCT notification_uuid) AS distinct_n FROM feed_notifications")
                let n = rows.first.flatMap { DashboardViewsTests.int($0, "n") }
                #expect(n != nil && n == rows.first.flatMap { DashboardViewsTests.int($0, "distinct_n") })
            }
        }
    }
}

@Suite(
    "Change feed with several PostgreSQL workers",
    .enabled(if: PostgresWorkersHarness.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct FeedWorkersTests {
    @Test(
        """
        Three workers starting together: exactly one reads each environment's window (one request a page), the \
        others go on with due rows; every notification is recorded once and the refund is caught
        """)
    func onePullerPerWindow() async throws {
        try await JobHarness.with(.postgres) { h in
            let url = try #require(h.postgresURL)
            let customers = (0..<12).map {
                ("user-\($0)", h.receipt("fw-\($0)", $0 == 0 ? .refund : .renewal, daysAgo: 40))
            }
            try await h.importReceipts(customers)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                h.state.advance(by: 6 * 86_400)
                let requests = h.state.feedRequests
                // The workers' clock moves on in real time, as it does in production: a worker that starts
                // after the reader began, finds nothing and ends before the reader claims what the feed made due
                // must not report those rows as left (it once did: "incomplete", exit 3).
                let clock = RunClock.ticking(from: h.state.now)
                let outcomes = try await withThrowingTaskGroup(of: RenewalOutcome.self) { group in
                    for worker in ["feed-a", "feed-b", "feed-c"] {
                        let store = try PostgresSubscriptionStore.open(url: url)
                        group.addTask {
                            try await store.withRunLock(owner: worker) {
                                try await h.run(.run, store: store, verifier: router, clock: clock) {
                                    $0.feed = client
                                    $0.workerID = worker
                                }
                            }
                        }
                    }
                    return try await group.reduce(into: [RenewalOutcome]()) { $0.append($1) }
                }
                // Production and the sandbox, one page each, read once between the three.
                #expect(h.state.feedRequests - requests == 2, "\(h.state.feedRequests - requests) feed requests")
                #expect(
                    outcomes.allSatisfy { $0.status == .completed },
                    "\(outcomes.map { "\($0.status) checked \($0.counts.checked) dueLeft \($0.counts.dueLeft) dueAtStart \(String(describing: $0.counts.dueAtStart)) notifications \($0.counts.notifications)" })"
                )
                #expect(outcomes.allSatisfy { $0.counts.feedFallback == [:] }, "\(outcomes.map(\.counts))")
                let recorded = outcomes.map(\.counts.notifications).reduce(0, +)
                let rows = try await DashboardViewsTests.query(h, "SELECT COUNT(*) AS n FROM feed_notifications")
                #expect(recorded > 0 && rows.first.flatMap { DashboardViewsTests.int($0, "n") } != nil)
                #expect(try await ChangeFeedRunTests.states(h)["user-0"] == "revoked")
            }
        }
    }
}
