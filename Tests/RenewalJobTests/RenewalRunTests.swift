import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

@Suite("RenewalRun against a SQLite file and the simulator")
struct RenewalRunTests {
    @Test("A first run verifies each scenario into the state docs/design.md §3 defines")
    func firstRunDerivesEveryScenario() async throws {
        try await JobHarness.with { h in
            // Given one customer per scenario, each purchased 10 days ago on a 30-day plan
            let expected: [(Scenario, SubscriptionState, Bool)] = [
                (.renewal, .active, true), (.voluntaryExpiry, .active, true), (.sandbox, .active, true),
                (.familyShared, .active, true), (.trial, .active, true), (.legacyIOS6, .active, true),
                (.accountNotFound, .invalid, false),
            ]
            try await h.importReceipts(
                expected.map { ("user-\($0.0.rawValue)", h.receipt("acct-\($0.0.rawValue)", $0.0)) })

            // When the job runs
            let outcome = try await h.run()

            // Then every subscription has the expected state, and each got exactly one event
            #expect(outcome.status == .completed)
            #expect(outcome.counts.checked == expected.count)
            #expect(outcome.counts.changed == expected.count)
            for (scenario, state, entitled) in expected {
                let rows = try await h.status(user: "user-\(scenario.rawValue)")
                let row = try #require(rows.first, "no status row for \(scenario)")
                #expect(rows.count == 1)
                #expect(row.state == state, "\(scenario)")
                #expect(row.entitled == entitled, "\(scenario)")
            }
            let sandbox = try #require(try await h.status(user: "user-sandbox").first)
            #expect(sandbox.environment == .sandbox)
            let family = try #require(try await h.status(user: "user-family_shared").first)
            #expect(family.ownershipType == "FAMILY_SHARED")
            #expect(try await h.status(user: "user-renewal").first?.environment == .production)
            #expect(try await h.status(user: "user-voluntary_expiry").first?.autoRenew == false)
        }
    }

    @Test("Time passing turns into renewed, expired, billing_issue, grace_period_started and refunded events")
    func laterRunReportsTransitions() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([
                ("renews", h.receipt("a1", .renewal, daysAgo: 20)),
                ("lapses", h.receipt("a2", .voluntaryExpiry, daysAgo: 20)),
                ("declined", h.receipt("a3", .billingRetry, daysAgo: 20)),
                ("grace", h.receipt("a4", .gracePeriod, daysAgo: 20)),
                ("refunded", h.receipt("a5", .refund, daysAgo: 40)),
                ("upgrades", h.receipt("a6", .upgrade, daysAgo: 40)),
            ])
            _ = try await h.run()
            h.state.advance(by: 11 * 86_400)

            let outcome = try await h.run { $0.reportPath = h.directory + "/report.json" }

            let report = try h.report(outcome)
            let changes = try #require(report["changes"] as? [[String: Any]])
            let kinds = Set(changes.map { "\($0["user_id"] ?? "")=\($0["kind"] ?? "")" })
            for expected in [
                "renews=renewed", "lapses=expired", "declined=billing_issue", "grace=grace_period_started",
                "refunded=refunded", "upgrades=product_changed",
            ] {
                #expect(kinds.contains(expected), "missing \(expected) in \(kinds.sorted())")
            }
            #expect(try await h.status(user: "grace").first?.entitled == true)
            #expect(try await h.status(user: "declined").first?.entitled == false)
            #expect(try await h.status(user: "refunded").first?.state == .revoked)
        }
    }

    @Test("A renewal stores Apple's newer latest_receipt and the next check sends it")
    func renewalReplacesStoredReceipt() async throws {
        try await JobHarness.with { h in
            let original = h.receipt("renewing", .renewal, daysAgo: 20)
            try await h.importReceipts([("u1", original)])
            _ = try await h.run()
            h.state.advance(by: 11 * 86_400)
            _ = try await h.run()

            let stored = try #require(try await h.receipts().first)
            let newer = try #require(SimulatedReceipt(encoded: stored.latestReceipt ?? ""))
            #expect(stored.latestReceipt != original.encoded)
            #expect(newer.generation == 1)

            h.state.advance(by: 30 * 86_400)
            _ = try await h.run()
            #expect(h.state.lastReceived(account: "renewing") == stored.latestReceipt)
        }
    }

    @Test("An immediate second run re-verifies nothing that is settled and reports no changes")
    func secondRunIsQuiet() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([
                ("a", h.receipt("a", .renewal)), ("b", h.receipt("b", .voluntaryExpiry)),
                ("c", h.receipt("c", .accountNotFound)), ("d", h.receipt("d", .sandbox)),
            ])
            let first = try await h.run()
            let requests = h.state.stats.requests
            #expect(first.counts.checked == 4)

            let second = try await h.run { $0.reportPath = h.directory + "/second.json" }

            #expect(second.status == .completed)
            #expect(second.counts.checked == 0)
            #expect(second.counts.changed == 0)
            #expect(h.state.stats.requests == requests)
            #expect((try h.report(second)["changes"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("A subscription with 200 days left is not due the next day, but is re-checked within a week")
    func longSubscriptionIsNotDue() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([("annual", h.receipt("annual", .renewal, daysAgo: 165, periodDays: 365))])
            _ = try await h.run()
            let row = try #require(try await h.status().first)
            let expires = try #require(row.expiresAt)
            #expect(expires.timeIntervalSince(h.state.now) > 199 * 86_400)
            let next = try #require(row.nextCheckAt)
            #expect(next.timeIntervalSince(h.state.now) <= 7 * 86_400)

            h.state.advance(by: 86_400)
            #expect(try await h.run().counts.checked == 0)
        }
    }

    @Test("Sandbox receipts are answered by the sandbox endpoint after 21007 and marked Sandbox")
    func sandboxReceiptsAreMarked() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([("tester", h.receipt("tester", .sandbox))])
            let outcome = try await h.run { $0.reportPath = h.directory + "/r.json" }
            #expect(try await h.status().first?.environment == .sandbox)
            let change = try #require((try h.report(outcome)["changes"] as? [[String: Any]])?.first)
            #expect(change["environment"] as? String == "Sandbox")
            #expect(h.state.stats.sandbox == 1)
            #expect(h.state.stats.production == 1)
        }
    }

    @Test("A receipt another user already owns is a shared_apple_id conflict: the first owner keeps it")
    func sharedAppleIDKeepsFirstOwner() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([("first", h.receipt("same-apple-id", .renewal))])
            _ = try await h.run()
            try await h.importReceipts([("second", h.receipt("same-apple-id", .renewal))])

            let outcome = try await h.run { $0.reportPath = h.directory + "/r.json" }

            #expect(outcome.counts.conflicts == 1)
            let conflict = try #require((try h.report(outcome)["conflicts"] as? [[String: Any]])?.first)
            #expect(conflict["kind"] as? String == "shared_apple_id")
            #expect(conflict["owner_user_id"] as? String == "first")
            #expect(conflict["user_id"] as? String == "second")
            #expect(try await h.status(user: "first").first?.entitled == true)
            #expect(try await h.status(user: "second").allSatisfy { !$0.entitled })
        }
    }

    @Test("--dry-run reports the changes it would make and writes nothing")
    func dryRunWritesNothing() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([("a", h.receipt("a", .renewal)), ("b", h.receipt("b", .accountNotFound))])
            let before = try await h.receipts()

            let outcome = try await h.run {
                $0.dryRun = true
                $0.reportPath = h.directory + "/dry.json"
            }

            #expect(outcome.counts.changed == 2)
            #expect((try h.report(outcome)["changes"] as? [Any])?.count == 2)
            #expect(try await h.receipts() == before)
            #expect(try await h.status().allSatisfy { $0.state == .unverified })
        }
    }

    @Test("The report has the contract's keys")
    func reportShape() async throws {
        try await JobHarness.with { h in
            try await h.importReceipts([("a", h.receipt("a", .renewal)), ("b", h.receipt("b", .outage))])
            let outcome = try await h.run { $0.reportPath = h.directory + "/r.json" }
            let report = try h.report(outcome)
            for key in [
                "run_id", "started_at", "finished_at", "checked", "changed", "failed", "changes", "failures", "counts",
            ] {
                #expect(report[key] != nil, "missing \(key)")
            }
            #expect(report["run_id"] as? String == outcome.runID)
            #expect(report["failed"] as? Int == 1)
            let change = try #require((report["changes"] as? [[String: Any]])?.first)
            for key in [
                "user_id", "original_transaction_id", "product_id", "kind", "from_state", "to_state", "old_expires_at",
                "new_expires_at", "environment",
            ] {
                #expect(change.keys.contains(key), "change lacks \(key)")
            }
            let failure = try #require((report["failures"] as? [[String: Any]])?.first)
            #expect(failure["user_id"] as? String == "b")
            #expect(failure["reason"] as? String == "http_503")
            #expect(Timestamp.date(report["started_at"] as? String ?? "") != nil)
        }
    }
}
