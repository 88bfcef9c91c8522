import AppStoreSimulator
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalObservability
import RenewalServerAPI
import RenewalStorage
import Testing

/// Get Notification History through the real Server API client against the simulator over
/// loopback: pages, verified payloads, the delay before a notification is listed, the kept span.
@Suite("Notification History: the simulator's feed read and verified by the job's client")
struct NotificationHistoryTests {
    static let quiet = Logger(label: "feed", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Every page of `[start, end)` in `environment`, each payload verified.
    static func pull(
        _ client: ServerAPIClient, _ environment: AppStoreEnvironment, start: Date, end: Date
    ) async throws -> (notifications: [VerifiedNotification], pages: [Int]) {
        var token: String?
        var notifications: [VerifiedNotification] = []
        var pages: [Int] = []
        repeat {
            let page = try await client.notificationHistory(
                environment: environment, start: start, end: end, token: token, logger: Self.quiet
            ).get()
            let records = page.notificationHistory ?? []
            pages.append(records.count)
            for record in records {
                let payload = try #require(record.signedPayload)
                notifications.append(try await client.verifier.notification(payload, environment: environment.rawValue))
            }
            token = page.nextToken
        } while token != nil
        return (notifications, pages)
    }

    @Test(
        """
        A refund, an auto-renew change, a billing failure, a recovery and renewals come back verified, in order, \
        20 a page, each once, naming their subscription
        """)
    func pagesOfVerifiedNotifications() async throws {
        try await JobHarness.with { h in
            let refund = h.receipt("feed-refund", .refund, daysAgo: 50)
            let recovery = h.receipt("feed-recovery", .billingRecovery, daysAgo: 40)
            let lapse = h.receipt("feed-lapse", .voluntaryExpiry, daysAgo: 40)
            let renewals = (0..<12).map { h.receipt("feed-renew-\($0)", .renewal, daysAgo: 59) }
            let tester = h.receipt("feed-tester", .sandbox, daysAgo: 20)
            h.state.register([refund, recovery, lapse, tester] + renewals)
            try await h.withServerAPIClient { client in
                let start = h.state.now.addingTimeInterval(-60 * 86_400)
                let (production, pages) = try await Self.pull(client, .production, start: start, end: h.state.now)
                #expect(pages.count >= 2 && pages.allSatisfy { $0 <= 20 }, "\(pages)")
                #expect(Set(production.map(\.uuid)).count == production.count, "each notification once")
                #expect(production.map(\.signedDate) == production.map(\.signedDate).sorted(), "oldest first")
                let expected = [refund, recovery, lapse] + renewals
                #expect(production.count == expected.flatMap { $0.notifications(until: h.state.now) }.count)

                func kinds(_ receipt: SimulatedReceipt) -> [String] {
                    production.filter { $0.originalTransactionID == receipt.originalTransactionID }
                        .map { [$0.type, $0.subtype].compactMap { $0 }.joined(separator: "/") }
                }
                #expect(
                    kinds(refund) == [
                        "SUBSCRIBED/INITIAL_BUY", "DID_RENEW", "REFUND",
                        "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED",
                    ])
                #expect(
                    kinds(recovery) == ["SUBSCRIBED/INITIAL_BUY", "DID_FAIL_TO_RENEW", "DID_RENEW/BILLING_RECOVERY"])
                #expect(
                    kinds(lapse) == [
                        "SUBSCRIBED/INITIAL_BUY", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED", "EXPIRED/VOLUNTARY",
                    ])
                // The refund's own signed transaction carries the revocation.
                let refunded = try #require(production.first { $0.type == "REFUND" })
                #expect(refunded.transaction?.revocationDate != nil)

                // The sandbox keeps 30 days.
                let (sandbox, _) = try await Self.pull(
                    client, .sandbox, start: h.state.now.addingTimeInterval(-25 * 86_400), end: h.state.now)
                #expect(Set(sandbox.map(\.originalTransactionID)) == [tester.originalTransactionID])
            }
        }
    }

    @Test("a notification is listed only once Apple has indexed it; a window older than the kept span is refused")
    func delayAndRetention() async throws {
        try await JobHarness.with { h in
            // Renewed an hour ago.
            let renewed = SimulatedReceipt(
                account: "feed-recent", scenario: .renewal, start: h.state.now.addingTimeInterval(-30 * 86_400 - 3_600))
            h.state.register([renewed])
            try await h.withServerAPIClient { client in
                let start = h.state.now.addingTimeInterval(-2 * 86_400)
                h.state.notificationDelay = 2 * 3_600
                var (listed, _) = try await Self.pull(client, .production, start: start, end: h.state.now)
                #expect(listed.isEmpty, "not indexed yet: \(listed.map(\.type))")
                h.state.notificationDelay = 60
                (listed, _) = try await Self.pull(client, .production, start: start, end: h.state.now)
                #expect(listed.map(\.type) == ["DID_RENEW"])

                let tooOld = await client.notificationHistory(
                    environment: .production, start: h.state.now.addingTimeInterval(-181 * 86_400), end: h.state.now,
                    token: nil, logger: Self.quiet)
                guard case .failure(.httpStatus(400, let code)) = tooOld else {
                    Issue.record("expected a 400, got \(tooOld)")
                    return
                }
                #expect(code == 4_000_012)
            }
        }
    }

    @Test("a notification signed by a chain the job does not trust is refused with jws_untrusted_chain")
    func forgedNotificationIsRefused() async throws {
        try await JobHarness.with { h in
            let refund = h.receipt("feed-forged", .refund, daysAgo: 50)
            let forger = try SigningChain.generate(name: "forger")
            let notification = try #require(refund.notifications(until: h.state.now).first { $0.type == "REFUND" })
            let forged = try notification.signedPayload(signer: forger)
            let genuine = try notification.signedPayload(signer: h.serverAPI.chain)
            let verifier = SignedDataVerifier(
                rootCertificates: [h.serverAPI.chain.root], bundleID: SimulatedReceipt.bundleID)
            #expect(try await verifier.notification(genuine, environment: "Production").type == "REFUND")
            do {
                _ = try await verifier.notification(forged, environment: "Production")
                Issue.record("a forged notification was accepted")
            } catch let error as SignedDataFailure {
                #expect(error.reason == .jwsUntrustedChain)
            }
            do {
                _ = try await verifier.notification(genuine, environment: "Sandbox")
                Issue.record("a production notification was accepted as the sandbox's")
            } catch let error as SignedDataFailure {
                #expect(error.reason == .jwsWrongEnvironment)
            }
        }
    }
}

/// The job reading the feed at the start of each run, on SQLite and PostgreSQL.
@Suite("Change feed in the run: what Apple's feed names is checked in the same run")
struct ChangeFeedRunTests {
    static func states(_ h: JobHarness) async throws -> [String: String] {
        var states: [String: String] = [:]
        for receipt in try await h.receipts() {
            states[receipt.userID] = receipt.subscriptions.map(\.snapshot.state.rawValue).sorted().joined(
                separator: ",")
        }
        return states
    }

    @Test(
        """
        A refund (with its auto-renew change) and a billing failure Apple published since the last run are checked \
        by the next run, the refund through the feed although the schedule had it not due; nothing is acted on twice
        """,
        arguments: Backend.available)
    func feedMakesChangesDue(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let customers = [
                ("refunded", h.receipt("cf-refund", .refund, daysAgo: 40)),
                ("failing", h.receipt("cf-billing", .billingRetry, daysAgo: 25)),
                ("steady", h.receipt("cf-steady", .renewal, daysAgo: 3)),
            ]
            try await h.importReceipts(customers)
            // Apple knows a customer this database never imported.
            let stranger = h.receipt("cf-stranger", .refund, daysAgo: 40)
            h.state.register([stranger])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                let first = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(first.counts.checked == 3 && first.counts.failed == 0)
                #expect(try await Self.states(h) == ["refunded": "active", "failing": "active", "steady": "active"])

                // Six days on: the refund (day 45) and the billing failure (day 30) have happened.
                h.state.advance(by: 6 * 86_400)
                let notDue = try await h.receipts().filter { $0.nextCheckAt > h.state.now }.map(\.userID)
                // The billing failure falls on the expiry the schedule checks anyway; the refund, mid-period,
                // only the feed names.
                #expect(notDue.contains("refunded"), "the schedule alone would wait: \(notDue)")
                let metrics = RunMetrics(command: "run")
                let second = try await h.run(.run, verifier: router) { configuration in
                    configuration.feed = client
                    configuration.reportPath = h.directory + "/feed-run.json"
                    configuration.metrics = metrics
                }
                let exposition = metrics.text()
                #expect(exposition.contains(#"renewal_feed_notifications_total{command="run",type="REFUND"} 2"#))
                #expect(exposition.contains(#"renewal_feed_healthy{command="run"} 1"#), "\(exposition)")
                #expect(second.counts.notifications >= 3, "\(second.counts)")
                // The stranger's notifications adopt its subscription, unclaimed, checked in the same run (issue 44).
                #expect(second.counts.notificationsUnmatched == 0, "\(second.counts)")
                let adopted = try await h.receipts().filter { PurchaseAdoption.isReserved($0.userID) }
                #expect(adopted.count == 1 && adopted.first?.lastVerifiedAt != nil, "\(adopted)")
                let states = try await Self.states(h)
                #expect(states["refunded"] == "revoked" && states["failing"] == "billing_retry", "\(states)")
                #expect(states["steady"] == "active")
                // status shows each subscription's last notification.
                let rows = try await h.status()
                let refundedRow = try #require(rows.first { $0.userID == "refunded" })
                #expect(refundedRow.lastNotification?.type == "DID_CHANGE_RENEWAL_STATUS")
                #expect(refundedRow.lastNotification?.subtype == "AUTO_RENEW_DISABLED")
                #expect(rows.first { $0.userID == "steady" }?.lastNotification == nil)
                let report = try h.report(second)
                let kinds = (report["changes"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String }
                #expect(kinds.contains("refunded") && kinds.contains("billing_issue"), "\(kinds)")
                let counts = try #require(report["counts"] as? [String: Any])
                #expect(counts["notifications"] as? Int == second.counts.notifications)

                // The dashboard view: the day's refunds, the stranger's among them unmatched.
                let refunds = try await DashboardViewsTests.query(
                    h,
                    """
                    SELECT SUM(notifications) AS notifications, SUM(unmatched) AS unmatched FROM notifications_per_day
                    WHERE environment = 'Production' AND notification_type = 'REFUND'
                    """)
                #expect(refunds.first.flatMap { DashboardViewsTests.int($0, "notifications") } == 2)
                #expect(refunds.first.flatMap { DashboardViewsTests.int($0, "unmatched") } == 1)

                // At once again: the overlap re-reads the window's end, and nothing is acted on twice.
                let third = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(third.counts.notifications == 0 && third.counts.checked == 0, "\(third.counts)")
            }
        }
    }

    @Test(
        """
        A feed outage leaves the run to its schedule and the cursor where it was; the next healthy run reads the \
        missed window and catches the change
        """,
        arguments: Backend.available)
    func outageThenCatchUp(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("refunded", h.receipt("co-refund", .refund, daysAgo: 40))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let cursor = try await h.store.feedCursor(environment: .production)
                #expect(cursor != nil)

                h.state.advance(by: 6 * 86_400)
                h.state.feedFault = .outage
                let metrics = RunMetrics(command: "run")
                let failed = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.metrics = metrics
                }
                #expect(metrics.text().contains(#"renewal_feed_healthy{command="run"} 0"#))
                // Six days behind: the last good read ended at the first run.
                #expect(
                    failed.counts.feedLagSeconds == Double(6 * 86_400),
                    "\(String(describing: failed.counts.feedLagSeconds))")
                #expect(metrics.text().contains(#"renewal_feed_lag_seconds{command="run"} 518400"#))
                #expect(failed.status == .completed && failed.counts.notifications == 0, "\(failed.status)")
                #expect(try await h.store.feedCursor(environment: .production) == cursor, "the cursor stays")
                #expect(try await ChangeFeedRunTests.states(h)["refunded"] == "active")

                h.state.feedFault = .none
                h.state.advance(by: 3_600)
                let caughtUp = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(caughtUp.counts.notifications >= 1 && caughtUp.counts.feedLagSeconds == 0)
                #expect(try await ChangeFeedRunTests.states(h)["refunded"] == "revoked")
            }
        }
    }
}
