import AppStoreSimulator
import Foundation
import Logging
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Fault injection: the real `renewal` binary killed with SIGKILL at random moments, several times
/// in a row, then one normal run. The end state must equal an uninterrupted pass over the same
/// receipts, each transition recorded once, with no lease and no `running` run left, and the
/// follow-up run must not wait for a lease to expire (leases here last the default 10 minutes).
@Suite("kill -9 at random moments, then one normal run")
struct KillLoopTests {
    static let secret = "kill-loop-secret-5d1e"
    static let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })
    static let scenarios: [Scenario] = [
        .renewal, .voluntaryExpiry, .billingRetry, .gracePeriod, .refund, .upgrade, .trial, .familyShared,
        .multipleSubscriptions, .sandbox,
    ]

    @Test(
        """
        SQLite: backfill --all of 300 receipts killed 4 times, then run: same state as one clean pass, each \
        change once
        """
    )
    func sqliteBackfillKilledFourTimes() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await Self.withScenario(receipts: 300) { state, imports, apple in
            let reference = Target.sqlite(directory + "/reference.sqlite")
            let victim = Target.sqlite(directory + "/victim.sqlite")
            for target in [reference, victim] { try await target.prepare(imports) }
            let clean = try await CLI.run(
                ["backfill", "--all", "--concurrency", "8"] + reference.arguments + apple.arguments,
                environment: apple.environment)
            #expect(clean.status == 0, "\(clean.stderr)")

            var verified: Set<String> = []
            for round in 1...4 {
                let killed = try await Self.killAfterRandomRequests(
                    [["backfill", "--all", "--concurrency", "8"] + victim.arguments + apple.arguments], apple: apple,
                    state: state,
                    log: directory + "/victim-\(round).log")
                // No receipt regresses: every receipt verified before is still verified.
                let now = Set(try await victim.lines("SELECT user_id FROM receipts WHERE status = 'verified'"))
                #expect(
                    verified.isSubset(of: now),
                    "round \(round) (killed after \(killed) requests) lost verified receipts")
                verified = now
            }
            let leased = try await victim.count("SELECT COUNT(*) FROM receipts WHERE lease_owner IS NOT NULL")
            let started = ContinuousClock.now
            let finish = try await CLI.run(
                ["run", "--concurrency", "8"] + victim.arguments + apple.arguments, environment: apple.environment)
            print(
                """
                kill-loop figures: \(victim.sqlitePath == nil ? "postgres" : "sqlite"): \(verified.count) \
                verified before the follow-up, \(leased) rows stranded by dead leases, follow-up took \
                \(ContinuousClock.now - started): \(finish.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
                """
            )
            #expect(finish.status == 0, "leased before the follow-up: \(leased)\n\(finish.stdout)\n\(finish.stderr)")
            try await Self.expectSameOutcome(victim, as: reference)
        }
    }

    @Test(
        "PostgreSQL: one worker killed 4 times, then run: same state as one clean pass, each change once",
        .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
    func postgresOneWorkerKilled() async throws {
        try await Self.postgresKillLoop(workers: 1, rounds: 4)
    }

    @Test(
        "PostgreSQL: three workers killed together twice, then one run: same state as one clean pass, each change once",
        .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
    func postgresThreeWorkersKilled() async throws {
        try await Self.postgresKillLoop(workers: 3, rounds: 2)
    }

    static func postgresKillLoop(workers: Int, rounds: Int) async throws {
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath, "psql is needed")
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reference = try Target.postgres(base: base, psql: psql)
        let victim = try Target.postgres(base: base, psql: psql)
        defer {
            reference.drop()
            victim.drop()
        }
        try await withScenario(receipts: 300) { state, imports, apple in
            for target in [reference, victim] { try await target.prepare(imports) }
            let clean = try await CLI.run(
                ["run", "--concurrency", "8"] + reference.arguments + apple.arguments, environment: apple.environment)
            #expect(clean.status == 0, "\(clean.stderr)")

            var verified: Set<String> = []
            for round in 1...rounds {
                let commands = (0..<workers).map { _ in
                    ["run", "--concurrency", "4"] + victim.arguments + apple.arguments
                }
                let killed = try await killAfterRandomRequests(
                    commands, apple: apple, state: state, log: directory + "/victim-\(round)")
                let now = Set(try await victim.lines("SELECT user_id FROM receipts WHERE status = 'verified'"))
                #expect(
                    verified.isSubset(of: now),
                    "round \(round) (killed after \(killed) requests) lost verified receipts")
                verified = now
            }
            let leased = try await victim.count("SELECT COUNT(*) FROM receipts WHERE lease_owner IS NOT NULL")
            let started = ContinuousClock.now
            let finish = try await CLI.run(
                ["run", "--concurrency", "8"] + victim.arguments + apple.arguments, environment: apple.environment)
            print(
                """
                kill-loop figures: \(victim.sqlitePath == nil ? "postgres" : "sqlite"): \(verified.count) \
                verified before the follow-up, \(leased) rows stranded by dead leases, follow-up took \
                \(ContinuousClock.now - started): \(finish.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
                """
            )
            #expect(finish.status == 0, "leased before the follow-up: \(leased)\n\(finish.stdout)\n\(finish.stderr)")
            try await expectSameOutcome(victim, as: reference)
        }
    }

    // MARK: - Steps

    /// Starts every command at once, waits until Apple has seen a random number of further requests
    /// (or the processes ended), and kills them all with SIGKILL. Returns the number waited for.
    static func killAfterRandomRequests(
        _ commands: [[String]], apple: Apple, state: SimulatorState, log: String
    ) async throws -> Int {
        let target = Int.random(in: 3...90)
        let start = state.stats.requests
        let processes = try commands.enumerated().map { index, arguments in
            try PostgresKillTests.start(arguments, environment: apple.environment, log: "\(log)-\(index).log")
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while state.stats.requests - start < target, processes.contains(where: \.isRunning),
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(2))
        }
        let alive = processes.filter(\.isRunning)
        for process in alive { kill(process.processIdentifier, SIGKILL) }
        print(
            """
            kill-loop figures: killed \(alive.count) of \(processes.count) after \(state.stats.requests - start) \
            Apple requests (target \(target))
            """
        )
        for process in processes { _ = await PostgresKillTests.waitForExit(process) }
        return target
    }

    /// The victim ends exactly as the clean pass did: the same entitlements, the same transitions
    /// (each once), no lease and no `running` run left.
    static func expectSameOutcome(_ victim: Target, as reference: Target) async throws {
        let expected = try await reference.statusLines()
        let found = try await victim.statusLines()
        #expect(found.count == expected.count)
        #expect(
            found == expected, "status differs: \(Set(found).symmetricDifference(Set(expected)).sorted().prefix(5))")
        let changes = """
            SELECT user_id, COALESCE(original_transaction_id, '-'), kind, from_state, to_state FROM entitlement_changes
            """
        let expectedChanges = try await reference.lines(changes).sorted()
        let foundChanges = try await victim.lines(changes).sorted()
        #expect(!expectedChanges.isEmpty)
        #expect(foundChanges == expectedChanges, "changes differ: \(foundChanges.count) vs \(expectedChanges.count)")
        #expect(try await victim.count("SELECT COUNT(*) FROM receipts WHERE lease_owner IS NOT NULL") == 0)
        #expect(try await victim.count("SELECT COUNT(*) FROM runs WHERE status = 'running'") == 0)
        #expect(try await victim.count("SELECT COUNT(*) FROM receipts WHERE status = 'unverified'") == 0)
    }

    // MARK: - Set-up

    /// Where Apple is, and the environment the binary needs to reach it.
    struct Apple: Sendable {
        var arguments: [String]
        var environment: [String: String]
    }

    /// Runs the simulator with `receipts` accounts cycling through `scenarios`, bought ten days ago.
    static func withScenario(
        receipts: Int, _ body: (SimulatorState, String, Apple) async throws -> Void
    ) async throws {
        let state = SimulatorState()
        let configuration = SimulatorConfiguration(sharedSecret: secret, latency: .milliseconds(15), state: state)
        try await withAppStoreSimulator(configuration: configuration, logger: quiet) { endpoints in
            let start = state.now.addingTimeInterval(-10 * 86_400)
            let lines = (0..<receipts).map { index -> String in
                let account = "kill-\(index)"
                let receipt = SimulatedReceipt(
                    account: account, scenario: scenarios[index % scenarios.count], start: start)
                return #"{"user_id": "user-\#(account)", "latest_receipt": "\#(receipt.encoded)"}"#
            }
            let apple = Apple(
                arguments: ["--production-url", endpoints.productionURL, "--sandbox-url", endpoints.sandboxURL],
                environment: ["APPSTORE_SHARED_SECRET": secret])
            try await body(state, lines.joined(separator: "\n") + "\n", apple)
        }
    }

    /// A database the binary runs against: a SQLite file or a PostgreSQL schema of its own.
    struct Target: Sendable {
        var database: String
        var sqlitePath: String?
        var psql: String?
        var base: String?
        var schema: String?

        var arguments: [String] { ["--database", database] }

        static func sqlite(_ path: String) -> Target {
            Target(database: path, sqlitePath: path)
        }

        static func postgres(base: String, psql: String) throws -> Target {
            let schema = "renewal_kill_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try PostgresKillTests.sql("CREATE SCHEMA \(schema)", url: base, psql: psql)
            let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
            return Target(database: url, psql: psql, base: base, schema: schema)
        }

        func drop() {
            guard let schema, let base, let psql else { return }
            _ = try? PostgresKillTests.sql("DROP SCHEMA \(schema) CASCADE", url: base, psql: psql)
        }

        func prepare(_ imports: String) async throws {
            let migrated = try await CLI.run(["migrate"] + arguments)
            #expect(migrated.status == 0, "\(migrated.stderr)")
            let imported = try await CLI.run(["import", "-"] + arguments, stdin: imports)
            #expect(imported.status == 0, "\(imported.stderr)")
        }

        /// `status --json`, reduced to the fields that do not depend on when the check ran.
        func statusLines() async throws -> [String] {
            let result = try await CLI.run(["status", "--json"] + arguments)
            #expect(result.status == 0, "\(result.stderr)")
            let rows = try #require(
                try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
            let fields = [
                "user_id", "original_transaction_id", "product_id", "state", "entitled", "expires_at", "auto_renew",
                "environment", "grace_period_expires_at",
            ]
            return rows.map { row in fields.map { "\(row[$0] ?? "-")" }.joined(separator: "|") }.sorted()
        }

        /// The rows of `query`, each as its columns joined by `|`.
        func lines(_ query: String) async throws -> [String] {
            if let sqlitePath {
                let database = try SQLiteDatabase(path: sqlitePath, create: false)
                let rows = try await database.withConnection { try $0.execute(query, []) }
                return rows.map { row in row.values.map(\.plain).joined(separator: "|") }
            }
            let output = try await PostgresKillTests.sqlOffPool(
                query.replacingOccurrences(of: "FROM ", with: "FROM \(schema ?? "public")."), url: base ?? "",
                psql: psql ?? "psql")
            return output.split(separator: "\n").map(String.init)
        }

        func count(_ query: String) async throws -> Int {
            Int(try await lines(query).first ?? "") ?? -1
        }
    }
}

extension SQLValue {
    /// The value as psql's unaligned output would print it.
    fileprivate var plain: String {
        switch self {
        case .null: return ""
        case .int64(let value): return String(value)
        case .double(let value): return String(value)
        case .text(let value): return value
        }
    }
}
