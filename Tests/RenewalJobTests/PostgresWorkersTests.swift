import AppStoreSimulator
import Foundation
import Logging
import RenewalAppleAPI
import RenewalAppStore
import RenewalCore
import RenewalJob
import RenewalPostgres
import RenewalSQL
import RenewalStorage
import Testing

/// Several `RenewalRun`s sharing one PostgreSQL database (each with its own connection and worker
/// id, as separate processes would), against the App Store simulator. Needs `RENEWAL_TEST_POSTGRES_URL`.
@Suite(
    "RenewalRun workers sharing PostgreSQL",
    .enabled(if: PostgresWorkersHarness.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct PostgresWorkersTests {
    @Test("three concurrent runs share 200 due receipts: each is verified exactly once and all are settled")
    func concurrentWorkersVerifyEachReceiptOnce() async throws {
        try await PostgresWorkersHarness.with { harness in
            // Given 200 receipts due now
            let accounts = (0..<200).map { "acct-\($0)" }
            try await harness.importRenewals(accounts)
            // When three workers run at the same time, each holding its "run lock" as the CLI does
            let outcomes = try await withThrowingTaskGroup(of: RenewalOutcome.self) { group in
                for worker in ["worker-a", "worker-b", "worker-c"] {
                    let store = try harness.openStore()
                    group.addTask {
                        try await harness.run(store: store, worker: worker)
                    }
                }
                return try await group.reduce(into: [RenewalOutcome]()) { $0.append($1) }
            }
            // Then none exited as locked out, together they checked each receipt once
            #expect(outcomes.allSatisfy { $0.status == .completed }, "\(outcomes.map(\.status))")
            #expect(outcomes.map(\.counts.checked).reduce(0, +) == 200, "\(outcomes.map(\.counts.checked))")
            #expect(
                outcomes.filter { $0.counts.checked > 0 }.count >= 2,
                "one worker took everything: \(outcomes.map(\.counts.checked))")
            #expect(accounts.filter { harness.state.attempts(account: $0) != 1 }.isEmpty)
            #expect(harness.state.stats.requests == 200)
            // And every receipt is verified, unleased and scheduled in the future
            let rows = try await harness.receiptRows()
            #expect(rows.count == 200)
            #expect(
                rows.allSatisfy {
                    $0.status == "verified" && $0.leaseOwner == nil && $0.nextCheckAt > harness.state.now
                })
            let runs = try await harness.store.database.withConnection { connection in
                try connection.execute(
                    "SELECT COUNT(*) AS runs, SUM(checked) AS checked FROM runs WHERE status = 'completed'", []
                )
                .first.map { [try $0.value("runs").int64Value, try $0.value("checked").int64Value] }
            }
            #expect(runs == [3, 200] as [Int64?])
        }
    }

    @Test(
        """
        three workers verifying users who share one Apple ID at the same moment: exactly one owner, one verified \
        event, the rest conflicts
        """
    )
    func ownershipRaceHasOneWinner() async throws {
        try await PostgresWorkersHarness.with(latency: .milliseconds(20)) { harness in
            // Given 20 Apple IDs, each paying for three app accounts, imported interleaved so the
            // workers' small claims (2 rows each at concurrency 1) put one Apple ID in several workers at once
            let accounts = (0..<20).map { "shared-\($0)" }
            let start = harness.state.now.addingTimeInterval(-10 * 86_400)
            var items: [ReceiptImport] = []
            for account in accounts {
                let receipt = SimulatedReceipt(account: account, scenario: .renewal, start: start)
                for app in 0..<3 {
                    items.append(
                        ReceiptImport(
                            userID: "\(account)-app\(app)", latestReceipt: receipt.encoded, productID: receipt.productID
                        ))
                }
            }
            _ = try await harness.store.importReceipts(items, now: harness.state.now)

            // When three workers run at the same time
            let outcomes = try await withThrowingTaskGroup(of: RenewalOutcome.self) { group in
                for worker in ["worker-a", "worker-b", "worker-c"] {
                    let store = try harness.openStore()
                    group.addTask { try await harness.run(store: store, worker: worker, concurrency: 1) }
                }
                return try await group.reduce(into: [RenewalOutcome]()) { $0.append($1) }
            }

            // Then each subscription has one owner, one `verified` event, and two conflicts
            #expect(outcomes.map(\.counts.checked).reduce(0, +) == 60)
            #expect(outcomes.map(\.counts.conflicts).reduce(0, +) == 40)
            let counts = try await harness.store.database.withConnection { connection in
                try [
                    "SELECT COUNT(*) AS n FROM subscriptions",
                    "SELECT COUNT(*) AS n FROM entitlement_changes WHERE kind = 'verified'",
                    """
                    SELECT COUNT(DISTINCT original_transaction_id) AS n FROM entitlement_changes WHERE kind = \
                    'verified'
                    """,
                    "SELECT COUNT(*) AS n FROM ownership_conflicts",
                    """
                    SELECT COUNT(*) AS n FROM subscriptions s JOIN entitlement_changes c ON \
                    c.original_transaction_id = s.original_transaction_id AND c.user_id = s.user_id AND c.kind = \
                    'verified'
                    """,
                ].map { sql in try connection.execute(sql, []).first.map { try $0.value("n").int64Value } ?? nil }
            }
            #expect(
                counts == [20, 20, 20, 40, 20] as [Int64?],
                "subscriptions, verified events, distinct, conflicts, owner's events")
        }
    }

    @Test("a lease whose owner cannot be proven dead (no run row, e.g. an older version) is respected until it expires")
    func deadWorkersLeaseExpires() async throws {
        try await PostgresWorkersHarness.with { harness in
            let accounts = (0..<30).map { "acct-\($0)" }
            try await harness.importRenewals(accounts)
            // Given a worker claimed ten receipts for 30 s, then was killed before saving any
            let now = harness.state.now
            let claimed = try await harness.store.nextBatch(
                .due(asOf: now), after: nil, limit: 10,
                lease: Lease(owner: "dead-worker", until: now.addingTimeInterval(30), now: now))
            let claimedUsers = Set(claimed.map { String($0.userID.dropFirst("user-".count)) })
            #expect(claimedUsers.count == 10)
            // When another worker runs while that lease is live
            let during = try await harness.run(store: try harness.openStore(), worker: "worker-b", leaseSeconds: 30)
            // Then it verifies the twenty others and leaves the claimed ten untouched
            #expect(during.counts.checked == 20)
            #expect(
                accounts.filter { claimedUsers.contains($0) }.allSatisfy { harness.state.attempts(account: $0) == 0 })
            #expect(
                accounts.filter { !claimedUsers.contains($0) }.allSatisfy { harness.state.attempts(account: $0) == 1 })
            // When the lease has run out, the next run takes the ten over
            harness.state.advance(by: 31)
            let after = try await harness.run(store: try harness.openStore(), worker: "worker-c", leaseSeconds: 30)
            #expect(after.counts.checked == 10)
            #expect(accounts.allSatisfy { harness.state.attempts(account: $0) == 1 })
            let rows = try await harness.receiptRows()
            #expect(rows.allSatisfy { $0.status == "verified" && $0.leaseOwner == nil })
        }
    }

    @Test(
        """
        a worker whose session is terminated mid-run reconnects, takes its liveness lock back and finishes; \
        nothing is written twice
        """
    )
    func sessionTerminatedMidRun() async throws {
        try await PostgresWorkersHarness.with(latency: .milliseconds(40)) { harness in
            let accounts = (0..<100).map { "acct-\($0)" }
            try await harness.importRenewals(accounts)
            let victim = try harness.openStore(applicationName: "renewal-victim")
            // When the server terminates the worker's session after about twenty answers
            async let outcome = harness.run(store: victim, worker: "victim", leaseSeconds: 30)
            let deadline = ContinuousClock.now + .seconds(30)
            while harness.state.stats.requests < 20, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            let terminated = try await harness.store.database.withConnection { connection in
                try connection.execute(
                    "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE application_name = $1",
                    [.text("renewal-victim")]
                ).count
            }
            #expect(terminated == 1)
            // Then the run carries on over a new session and finishes every receipt
            let finished = try await outcome
            #expect(finished.status == .completed, "\(finished.status)")
            let rows = try await harness.receiptRows()
            #expect(rows.allSatisfy { $0.status == "verified" && $0.leaseOwner == nil })
            #expect(accounts.allSatisfy { (1...2).contains(harness.state.attempts(account: $0)) })
            // And each receipt's first verification is recorded exactly once
            let events = try await harness.store.database.withConnection { connection in
                try connection.execute(
                    """
                    SELECT COUNT(*) AS n, COUNT(DISTINCT user_id) AS users FROM entitlement_changes WHERE kind = \
                    'verified'
                    """,
                    []
                ).first.map { [try $0.value("n").int64Value, try $0.value("users").int64Value] }
            }
            #expect(events == [100, 100] as [Int64?])
        }
    }

    @Test(
        """
        a dead worker is detected, not waited out: a live worker's leases are respected, a dead one's taken at \
        once and its run abandoned
        """
    )
    func deadWorkerIsDetected() async throws {
        try await PostgresWorkersHarness.with { harness in
            let accounts = (0..<30).map { "acct-\($0)" }
            try await harness.importRenewals(accounts)
            // Given worker "a" (its own session, holding its liveness lock as every run does) claimed ten receipts for
            // an hour
            let a = try harness.openStore(applicationName: "renewal-worker-a")
            let now = harness.state.now
            try await a.database.withConnection { connection in
                _ = try connection.execute(
                    "SELECT pg_advisory_lock(hashtextextended(current_schema() || '/' || $1, 0))", [.text("worker-a")])
            }
            try await a.beginRun(
                RunRecord(
                    id: "run-a", command: "run", startedAt: now, host: "host-a", processID: 4242, workerID: "worker-a"))
            let claimed = try await a.nextBatch(
                .due(asOf: now), after: nil, limit: 10,
                lease: Lease(owner: "worker-a", until: now.addingTimeInterval(3600), now: now))
            let claimedUsers = Set(claimed.map(\.userID))
            #expect(claimedUsers.count == 10)
            // When worker b runs while a lives, it leaves a's ten alone
            let during = try await harness.run(store: try harness.openStore(), worker: "worker-b")
            #expect(during.counts.checked == 20 && during.counts.recoveredLeases == 0 && during.status == .completed)
            #expect(try await harness.runStatus("run-a") == "running")
            // When a's process dies (its session ends), the next worker takes its rows at once, without waiting an hour
            _ = try await harness.store.database.withConnection { connection in
                try connection.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                    [.text("renewal-worker-a")])
            }
            let after = try await harness.run(store: try harness.openStore(), worker: "worker-c")
            #expect(after.counts.checked == 10 && after.counts.recoveredLeases == 10 && after.status == .completed)
            #expect(try await harness.runStatus("run-a") == "abandoned")
            let rows = try await harness.receiptRows()
            #expect(rows.allSatisfy { $0.status == "verified" && $0.leaseOwner == nil })
            #expect(accounts.allSatisfy { harness.state.attempts(account: $0) == 1 })
        }
    }

    @Test("a worker that dies mid-run while another runs: the survivor's probe takes its rows back in the same run")
    func survivorTakesBackRowsMidRun() async throws {
        try await PostgresWorkersHarness.with(latency: .milliseconds(30)) { harness in
            let accounts = (0..<40).map { "acct-\($0)" }
            try await harness.importRenewals(accounts)
            let a = try harness.openStore(applicationName: "renewal-worker-a2")
            let now = harness.state.now
            try await a.database.withConnection { connection in
                _ = try connection.execute(
                    "SELECT pg_advisory_lock(hashtextextended(current_schema() || '/' || $1, 0))", [.text("worker-a2")])
            }
            try await a.beginRun(
                RunRecord(
                    id: "run-a2", command: "run", startedAt: now, host: "host-a", processID: 4243, workerID: "worker-a2"
                ))
            let claimed = try await a.nextBatch(
                .due(asOf: now), after: nil, limit: 10,
                lease: Lease(owner: "worker-a2", until: now.addingTimeInterval(3600), now: now))
            #expect(claimed.count == 10)
            // Worker b starts; once it has made some requests, a dies
            async let outcome = harness.run(
                store: try harness.openStore(), worker: "worker-b2", concurrency: 2, probeEvery: 0.05)
            let deadline = ContinuousClock.now + .seconds(30)
            while harness.state.stats.requests < 6, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            _ = try await harness.store.database.withConnection { connection in
                try connection.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                    [.text("renewal-worker-a2")])
            }
            let finished = try await outcome
            // b finished all forty in one run, a's ten included, and exits 0
            #expect(finished.counts.checked == 40 && finished.counts.recoveredLeases == 10, "\(finished.counts)")
            #expect(finished.status == .completed)
            #expect(try await harness.runStatus("run-a2") == "abandoned")
        }
    }
}

/// A fresh PostgreSQL schema, the simulator on loopback and a real client.
struct PostgresWorkersHarness: Sendable {
    static let secret = "test-shared-secret-pg-workers"

    static var baseURL: String? {
        ProcessInfo.processInfo.environment["RENEWAL_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The schema's URL (`search_path` set through libpq's `options` parameter).
    let url: String
    /// The store used to set up and inspect (the workers open their own).
    let store: PostgresSubscriptionStore
    let state: SimulatorState
    let client: AppStoreClient

    struct ReceiptRow: Sendable {
        var userID: String
        var status: String
        var leaseOwner: String?
        var nextCheckAt: Date
    }

    static func with(latency: Duration = .milliseconds(5), _ body: (PostgresWorkersHarness) async throws -> Void)
        async throws
    {
        let base = try #require(baseURL)
        let schema = "renewal_jobs_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        let admin = try PostgresDatabase(url: base)
        // The name is ours (hex digits), so splicing it is safe; identifiers cannot be bound.
        _ = try await admin.withConnection { try $0.execute("CREATE SCHEMA \(schema)", []) }
        do {
            try await withSimulator(url: url, latency: latency, body)
        } catch {
            _ = try? await admin.withConnection { try $0.execute("DROP SCHEMA \(schema) CASCADE", []) }
            throw error
        }
        _ = try await admin.withConnection { try $0.execute("DROP SCHEMA \(schema) CASCADE", []) }
    }

    private static func withSimulator(
        url: String, latency: Duration, _ body: (PostgresWorkersHarness) async throws -> Void
    ) async throws {
        let store = try PostgresSubscriptionStore.open(url: url)
        _ = try await store.migrate()
        let state = SimulatorState(now: Date(timeIntervalSince1970: 1_790_000_000))
        // Some latency so the workers' claims interleave.
        let configuration = SimulatorConfiguration(sharedSecret: secret, latency: latency, state: state)
        let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })
        try await withAppStoreSimulator(configuration: configuration, logger: quiet) { endpoints in
            let clientConfiguration = AppStoreClient.Configuration(
                productionURL: endpoints.productionURL, sandboxURL: endpoints.sandboxURL, sharedSecret: secret,
                requestTimeout: .seconds(30), maxAttempts: 2, retryBaseDelay: .milliseconds(1),
                retryMaxDelay: .milliseconds(5))
            try await AppStoreClient.withAppStoreClient(configuration: clientConfiguration) { client in
                try await body(PostgresWorkersHarness(url: url, store: store, state: state, client: client))
            }
        }
    }

    /// A new connection to the schema, as another process would open; `applicationName` lets a test find its backend.
    func openStore(applicationName: String? = nil) throws -> PostgresSubscriptionStore {
        try PostgresSubscriptionStore.open(url: url + (applicationName.map { "&application_name=\($0)" } ?? ""))
    }

    /// Imports one `.renewal` receipt per account (a subscription bought ten days ago), due now.
    func importRenewals(_ accounts: [String]) async throws {
        let start = state.now.addingTimeInterval(-10 * 86_400)
        let items = accounts.map { account in
            let receipt = SimulatedReceipt(account: account, scenario: .renewal, start: start)
            return ReceiptImport(
                userID: "user-\(account)", latestReceipt: receipt.encoded, productID: receipt.productID)
        }
        _ = try await store.importReceipts(items, now: state.now)
    }

    /// One worker's run on `store`, with the simulator's clock.
    /// One worker's run on `store`, holding its liveness lock as the CLI does.
    func run(
        store: PostgresSubscriptionStore, worker: String, leaseSeconds: TimeInterval = 600, concurrency: Int = 4,
        probeEvery: TimeInterval = 15
    ) async throws -> RenewalOutcome {
        var configuration = RenewalRun.Configuration(command: .run, workerID: worker)
        configuration.concurrency = concurrency
        configuration.leaseDuration = leaseSeconds
        configuration.livenessProbeInterval = probeEvery
        let state = self.state
        let logger = Logger(label: "renewal", factory: { _ in SwiftLogNoOpLogHandler() })
        let run = RenewalRun(
            configuration: configuration, store: store, verifier: client, logger: logger, now: { state.now })
        return try await store.withRunLock(owner: worker) { try await run.run() }
    }

    /// The `runs.status` of one run.
    func runStatus(_ id: String) async throws -> String? {
        try await store.run(id: id)?.status.rawValue
    }

    func receiptRows() async throws -> [ReceiptRow] {
        try await store.database.withConnection { connection in
            try connection.execute("SELECT user_id, status, lease_owner, next_check_at FROM receipts ORDER BY id", [])
                .map { row in
                    let millis = try #require(try row.value("next_check_at").int64Value)
                    return ReceiptRow(
                        userID: try row.value("user_id").textValue ?? "",
                        status: try row.value("status").textValue ?? "",
                        leaseOwner: try row.value("lease_owner").textValue,
                        nextCheckAt: Date(timeIntervalSince1970: Double(millis) / 1000))
                }
        }
    }
}

extension SQLRow {
    /// The column's value, or an error naming the missing column.
    fileprivate func value(_ name: String) throws -> SQLValue {
        try #require(self[name], "column \(name) is missing")
    }
}

extension SQLValue {
    fileprivate var int64Value: Int64? {
        if case .int64(let value) = self { return value }
        return nil
    }

    fileprivate var textValue: String? {
        if case .text(let value) = self { return value }
        return nil
    }
}
