import AppStoreSimulator
import Foundation
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the PostgreSQL server for these tests is (`.ci/run` sets it).
enum PostgresKillEnvironment {
    static var baseURL: String? {
        ProcessInfo.processInfo.environment["RENEWAL_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// The built `renewal` binary against a real PostgreSQL schema and the in-process simulator: a run
/// killed with SIGKILL mid-way loses nothing. Needs `RENEWAL_TEST_POSTGRES_URL` and `psql`.
@Suite(
    "renewal run killed with kill -9 on PostgreSQL",
    .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct PostgresKillTests {
    static let secret = "cli-kill-test-secret"
    static let receipts = 60
    /// Long enough that waiting it out would fail the test.
    static let leaseSeconds = 600.0

    @Test("after kill -9 mid-run, the next run takes the dead run's leases at once and finishes every receipt")
    func killedRunLosesNothing() async throws {
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(Self.psqlPath, "psql is needed to create the test schema")
        let schema = "renewal_cli_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await Self.sqlOffPool("CREATE SCHEMA \(schema)", url: base, psql: psql)
        defer { _ = try? Self.sql("DROP SCHEMA \(schema) CASCADE", url: base, psql: psql) }
        let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }

        // Each answer takes 100 ms, so a run at concurrency 2 lasts about three seconds.
        let state = SimulatorState()
        let configuration = SimulatorConfiguration(sharedSecret: Self.secret, latency: .milliseconds(100), state: state)
        let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })
        try await withAppStoreSimulator(configuration: configuration, logger: quiet) { endpoints in
            // Given a migrated schema with 60 receipts due now
            let accounts = (0..<Self.receipts).map { "kill-\($0)" }
            let lines = accounts.map { account -> String in
                let receipt = SimulatedReceipt(
                    account: account, scenario: .renewal, start: state.now.addingTimeInterval(-10 * 86_400))
                return #"{"user_id": "user-\#(account)", "latest_receipt": "\#(receipt.encoded)"}"#
            }
            #expect(try await CLI.run(["migrate", "--database", url]).status == 0)
            let imported = try await CLI.run(
                ["import", "-", "--database", url], stdin: lines.joined(separator: "\n") + "\n")
            #expect(imported.status == 0, "\(imported.stderr)")
            let runArguments = [
                "run", "--database", url, "--lease-seconds", "\(Int(Self.leaseSeconds))", "--concurrency", "2",
                "--production-url", endpoints.productionURL, "--sandbox-url", endpoints.sandboxURL,
            ]
            let environment = ["APPSTORE_SHARED_SECRET": Self.secret]

            // When a run is killed with SIGKILL after about ten answers
            let victim = try Self.start(runArguments, environment: environment, log: directory + "/victim.log")
            let deadline = Date().addingTimeInterval(30)
            while state.stats.requests < 10, victim.isRunning, Date() < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(victim.isRunning, "the run ended before it could be killed")
            kill(victim.processIdentifier, SIGKILL)
            let reason = await Self.waitForExit(victim)
            #expect(reason == .uncaughtSignal)
            let verifiedBeforeKill = try await Self.sqlOffPool(
                "SELECT count(*) FROM \(schema).receipts WHERE status = 'verified'", url: base, psql: psql)
            let leasedAtKill = try await Self.sqlOffPool(
                "SELECT count(*) FROM \(schema).receipts WHERE lease_owner IS NOT NULL", url: base, psql: psql)
            #expect((Int(verifiedBeforeKill) ?? 0) < Self.receipts, "the killed run had already finished")

            // Then a second run, started at once, finishes every receipt and marks the dead run abandoned
            let second = try await CLI.run(runArguments, environment: environment)
            #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
            let status = try await CLI.run(["status", "--json", "--database", url])
            let rows = try #require(
                try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
            #expect(rows.count == Self.receipts)
            #expect(
                rows.allSatisfy { $0["state"] as? String == "active" && $0["entitled"] as? Bool == true },
                "\(status.stdout)")
            #expect(
                try await Self.sqlOffPool(
                    "SELECT count(*) FROM \(schema).receipts WHERE lease_owner IS NOT NULL", url: base, psql: psql)
                    == "0")
            #expect(
                try await Self.sqlOffPool(
                    "SELECT count(*) FROM \(schema).runs WHERE status = 'abandoned'", url: base, psql: psql) == "1")
            // Every receipt reached Apple; only those in flight when the first run died went twice
            let attempts = accounts.map { state.attempts(account: $0) }
            #expect(attempts.allSatisfy { (1...2).contains($0) }, "\(attempts)")
            #expect(
                attempts.filter { $0 == 2 }.count <= max(Int(leasedAtKill) ?? 0, 4), "leased at kill: \(leasedAtKill)")
        }
    }

    /// Starts `renewal` without waiting, its output going to `log`.
    static func start(_ arguments: [String], environment: [String: String], log: String) throws -> Process {
        let process = Process()
        process.executableURL = CLI.binary
        process.arguments = arguments
        var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
        for (key, value) in environment { env[key] = value }
        process.environment = env
        FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Waits for `process` on a GCD thread, so Swift concurrency threads stay free for the simulator.
    static func waitForExit(_ process: Process) async -> Process.TerminationReason {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                process.waitUntilExit()
                continuation.resume(returning: process.terminationReason)
            }
        }
    }

    /// `psql` on PATH or in the newest /usr/lib/postgresql/N/bin.
    static var psqlPath: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let onPath = path.split(separator: ":").map { "\($0)/psql" }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let bundled = versions.sorted { $0.compare($1, options: .numeric) == .orderedDescending }.map {
            "/usr/lib/postgresql/\($0)/bin/psql"
        }
        return (onPath + bundled).first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// `sql` waited on a GCD thread (see `toolOffPool`).
    @discardableResult
    static func sqlOffPool(_ statement: String, url: String, psql: String) async throws -> String {
        try await offPool { try sql(statement, url: url, psql: psql) }
    }

    /// Runs one statement with psql and returns its unaligned, tuples-only output.
    @discardableResult
    static func sql(_ statement: String, url: String, psql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: psql)
        process.arguments = ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", statement]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw PSQLFailure(statement: statement, status: process.terminationStatus)
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// psql exited with an error.
struct PSQLFailure: Error, CustomStringConvertible {
    var statement: String
    var status: Int32
    var description: String { "psql exited with \(status) running: \(statement)" }
}
