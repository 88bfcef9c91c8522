import AppStoreSimulator
import Foundation
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The receipts every database-fault test imports: a mix of scenarios and ages, so the stored
/// states cover active, grace period, billing retry, expired, refunded, upgraded, family-shared and
/// a receipt holding two subscriptions.
struct FaultReceipts {
    static let scenarios: [Scenario] = [
        .renewal, .voluntaryExpiry, .billingRetry, .gracePeriod, .refund, .upgrade, .familyShared,
        .multipleSubscriptions,
    ]
    /// Ages in days, each well away from a 30-day period boundary.
    static let ages: [Double] = [10, 40, 52]

    let accounts: [String]
    let encoded: [String]
    let importLines: String

    init(count: Int, prefix: String, now: Date) {
        var accounts: [String] = []
        var encoded: [String] = []
        var lines: [String] = []
        for index in 0..<count {
            let account = "\(prefix)-\(index)"
            let scenario = Self.scenarios[index % Self.scenarios.count]
            let age = Self.ages[(index / Self.scenarios.count) % Self.ages.count]
            let receipt = SimulatedReceipt(
                account: account, scenario: scenario, start: now.addingTimeInterval(-age * 86_400))
            accounts.append(account)
            encoded.append(receipt.encoded)
            lines.append(#"{"user_id": "user-\#(account)", "latest_receipt": "\#(receipt.encoded)"}"#)
        }
        self.accounts = accounts
        self.encoded = encoded
        self.importLines = lines.joined(separator: "\n") + "\n"
    }
}

/// One finished child process.
struct FaultRun: Sendable {
    var status: Int32
    var reason: Process.TerminationReason
    var stdout: String
    var stderr: String
    var seconds: Double

    /// Lines on stderr the CLI writes for a whole-command failure (`renewal: …`), as opposed to log lines.
    var failureLines: [String] {
        stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix("renewal: ") }
    }
}

/// Starts the built `renewal` binary (optionally through a launcher such as `setpriv` or `sh -c
/// 'ulimit -f N; exec …'`), with output in files, and waits for it on a GCD thread so the
/// in-process simulator keeps its Swift concurrency threads.
final class FaultProcess: @unchecked Sendable {
    let process = Process()
    private let outPath: String
    private let errPath: String
    private let started = Date()

    /// - Parameters:
    ///   - launcher: the command line that runs the binary, the binary's path and its arguments
    ///     appended; empty to run it directly.
    init(
        _ arguments: [String], launcher: [String] = [], environment: [String: String], stdin: String? = nil,
        directory: String
    ) throws {
        let id = UUID().uuidString
        outPath = directory + "/out-\(id).log"
        errPath = directory + "/err-\(id).log"
        FileManager.default.createFile(atPath: outPath, contents: nil)
        FileManager.default.createFile(atPath: errPath, contents: nil)
        if let first = launcher.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = Array(launcher.dropFirst()) + [try CLI.binaryReachableByAnyone()] + arguments
        } else {
            process.executableURL = CLI.binary
            process.arguments = arguments
        }
        var env = ["PATH": "/usr/bin:/bin", "HOME": "/tmp"]
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        if let stdin {
            let input = directory + "/in-\(id).jsonl"
            try Data(stdin.utf8).write(to: URL(fileURLWithPath: input))
            process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        try process.run()
    }

    var isRunning: Bool { process.isRunning }

    /// Waits at most `timeout`; a child still running then is killed and the wait is reported as a failure.
    func finish(timeout: TimeInterval = 45) async -> FaultRun {
        let process = self.process
        let exited = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async {
                let deadline = Date().addingTimeInterval(timeout)
                while process.isRunning, Date() < deadline { usleep(20_000) }
                if process.isRunning {
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                    continuation.resume(returning: false)
                } else {
                    process.waitUntilExit()
                    continuation.resume(returning: true)
                }
            }
        }
        let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        #expect(exited, "renewal \(process.arguments ?? []) did not exit within \(timeout) s; killed")
        return FaultRun(
            status: process.terminationStatus, reason: process.terminationReason, stdout: out, stderr: err,
            seconds: Date().timeIntervalSince(started))
    }

    /// Runs to the end.
    static func run(
        _ arguments: [String], launcher: [String] = [], environment: [String: String] = [:], stdin: String? = nil,
        directory: String, timeout: TimeInterval = 45
    ) async throws -> FaultRun {
        try await FaultProcess(
            arguments, launcher: launcher, environment: environment, stdin: stdin, directory: directory
        )
        .finish(timeout: timeout)
    }
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held.
func poll(timeout: TimeInterval, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try condition()
}

/// Runs a tool to the end and returns its trimmed stdout; throws on a non-zero exit.
@discardableResult
func tool(_ path: String, _ arguments: [String], stdin: String? = nil) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    let input = Pipe()
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let errorData = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw ToolFailure(
            command: ([path] + arguments).joined(separator: " "), status: process.terminationStatus,
            stderr: String(decoding: errorData, as: UTF8.self))
    }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

struct ToolFailure: Error, CustomStringConvertible {
    var command: String
    var status: Int32
    var stderr: String
    var description: String { "\(command) exited with \(status): \(stderr)" }
}

/// What a database must hold after a fault and after the recovery: the same checks on SQLite
/// (through the `sqlite3` shell) and PostgreSQL (through `psql`), with SQL both understand.
enum DatabaseInvariants {
    /// Each query counts violations of one rule; every count must be 0.
    static let rules: [(String, String)] = [
        (
            "a transition recorded twice in entitlement_changes",
            """
            SELECT count(*) FROM (SELECT user_id FROM entitlement_changes
            GROUP BY user_id, original_transaction_id, kind, from_state, to_state, new_expires_at HAVING count(*) > 1) d
            """
        ),
        (
            "a never-verified receipt with subscriptions (half-written result)",
            """
            SELECT count(*) FROM receipts r WHERE r.status = 'unverified'
            AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.receipt_id = r.id)
            """
        ),
        (
            "a verified receipt without subscriptions (half-written result)",
            """
            SELECT count(*) FROM receipts r WHERE r.status = 'verified'
            AND NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.receipt_id = r.id)
            """
        ),
        (
            "a change event for a subscription that was not written",
            """
            SELECT count(*) FROM entitlement_changes e
            WHERE NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.original_transaction_id = e.original_transaction_id)
            """
        ),
        (
            "a subscription without its change events",
            """
            SELECT count(*) FROM subscriptions s
            WHERE NOT EXISTS (SELECT 1 FROM entitlement_changes e WHERE e.original_transaction_id = s.original_transaction_id)
            """
        ),
        (
            "a subscription whose state differs from its last change event's to_state",
            """
            SELECT count(*) FROM subscriptions s WHERE s.state <> (SELECT e.to_state FROM entitlement_changes e
            WHERE e.original_transaction_id = s.original_transaction_id ORDER BY e.id DESC LIMIT 1)
            """
        ),
        (
            "a subscription whose entitled flag contradicts its state",
            """
            SELECT count(*) FROM subscriptions WHERE (entitled <> 0) <> (state IN ('active', 'grace_period'))
            """
        ),
    ]

    /// Only once the follow-up run has finished.
    static let afterRecovery: [(String, String)] = [
        ("a receipt still leased", "SELECT count(*) FROM receipts WHERE lease_owner IS NOT NULL"),
        ("a runs row still 'running'", "SELECT count(*) FROM runs WHERE status = 'running'"),
        ("a receipt still unverified", "SELECT count(*) FROM receipts WHERE status = 'unverified'"),
    ]

    /// The change events, comparable between two databases fed the same answers.
    static let eventsQuery = """
        SELECT user_id, original_transaction_id, kind, from_state, to_state, new_expires_at
        FROM entitlement_changes ORDER BY user_id, original_transaction_id, kind, from_state, to_state, new_expires_at
        """

    /// The broken rules, as "rule: count"; empty when everything holds.
    static func violations(_ rules: [(String, String)], query: (String) throws -> String) throws -> [String] {
        try rules.compactMap { name, sql in
            let count = try query(sql)
            return count == "0" ? nil : "\(name): \(count)"
        }
    }
}

/// `status --json` reduced to the fields that must match an uninterrupted pass.
enum StableStatus {
    static let fields = [
        "user_id", "original_transaction_id", "product_id", "state", "entitled", "expires_at", "auto_renew",
        "environment",
    ]

    static func rows(_ json: String) throws -> [String] {
        let array = try #require(
            try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]], "status --json: \(json)")
        return array.map { row in
            fields.map { field in
                guard let value = row[field], !(value is NSNull) else { return "\(field)=null" }
                if field == "entitled" || field == "auto_renew", let flag = value as? Bool { return "\(field)=\(flag)" }
                return "\(field)=\(value)"
            }.joined(separator: " ")
        }.sorted()
    }
}

/// The `sqlite3` shell on a database file.
enum SQLiteShell {
    static let path = "/usr/bin/sqlite3"

    static func query(_ database: String, _ sql: String) throws -> String {
        try tool(path, ["-batch", "-bail", "-noheader", database, sql])
    }
}

/// A `sqlite3` shell that holds a write transaction (`BEGIN IMMEDIATE`) on a database until released:
/// another process locking the file, as an operator's ad-hoc session or a stuck job would.
final class SQLiteWriteLocker: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let outPath: String

    /// Starts the shell and returns once it reports holding the lock (it waits up to 20 s for it).
    init(database: String, directory: String) async throws {
        outPath = directory + "/locker-\(UUID().uuidString).log"
        FileManager.default.createFile(atPath: outPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: SQLiteShell.path)
        process.arguments = ["-batch", "-bail", database]
        process.standardInput = input
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(".timeout 20000\nBEGIN IMMEDIATE;\nSELECT 'write lock held';\n".utf8))
        let path = outPath
        let held = await poll(timeout: 25) {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains("write lock held")
        }
        guard held else {
            release()
            let log = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            throw ToolFailure(command: "sqlite3 BEGIN IMMEDIATE", status: -1, stderr: "the lock was not taken: \(log)")
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// Rolls back and ends the shell (idempotent).
    func release() {
        guard process.isRunning else { return }
        input.fileHandleForWriting.write(Data("ROLLBACK;\n.quit\n".utf8))
        try? input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { release() }
}

/// Asserts that no output carries the shared secret, a database password or a whole receipt.
func expectNoSecrets(
    in runs: [FaultRun], secrets: [String], receipts: [String], sourceLocation: SourceLocation = #_sourceLocation
) {
    let text = runs.map { $0.stdout + "\n" + $0.stderr }.joined(separator: "\n")
    for secret in secrets where !secret.isEmpty {
        #expect(!text.contains(secret), "a secret appears in the output", sourceLocation: sourceLocation)
    }
    let leaked = receipts.filter { text.contains($0) }
    #expect(leaked.isEmpty, "\(leaked.count) whole receipts appear in the output", sourceLocation: sourceLocation)
}

/// Quiet in-process simulator.
let faultSimulatorLogger = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })

extension DatabaseInvariants {
    /// After the recovery run: `status --json` equals the uninterrupted pass, the change events are the
    /// same rows, and every invariant holds. Returns the `status` run for the fixture's record.
    static func expectUninterruptedPass(
        database: String, directory: String, baselineStatus: [String], baselineEvents: String,
        query: (String) throws -> String,
        sourceLocation: SourceLocation
    ) async throws -> FaultRun {
        let status = try await FaultProcess.run(["status", "--json", "--database", database], directory: directory)
        let rows = try StableStatus.rows(status.stdout)
        let difference = rows == baselineStatus ? [] : Set(rows).symmetricDifference(baselineStatus).sorted()
        #expect(
            difference.isEmpty,
            "status --json differs from the uninterrupted pass (rows only on one side): \(difference)",
            sourceLocation: sourceLocation)
        let events = try query(eventsQuery)
        #expect(
            events == baselineEvents,
            """
            entitlement_changes differ from the uninterrupted pass: \(events.split(separator: "\n").count) rows, \
            uninterrupted \(baselineEvents.split(separator: "\n").count)
            """,
            sourceLocation: sourceLocation)
        let broken = try violations(rules + afterRecovery) { try query($0) }
        #expect(broken.isEmpty, "\(broken)", sourceLocation: sourceLocation)
        return status
    }
}

/// `tool` waited on a GCD thread: a child that runs for seconds (a browser, promtool, psql) must not
/// hold one of the few Swift concurrency threads the in-process simulators of other tests answer on.
@discardableResult
func toolOffPool(_ path: String, _ arguments: [String], stdin: String? = nil) async throws -> String {
    try await offPool { try tool(path, arguments, stdin: stdin) }
}

/// Runs blocking work (waiting for a child process) on a GCD thread and awaits its result.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(with: Result { try body() })
        }
    }
}
