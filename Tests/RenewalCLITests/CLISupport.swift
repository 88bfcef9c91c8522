import AppStoreSimulator
import Foundation
import Logging
import Testing

/// Runs the built `renewal` binary as a child process.
struct CLI {
    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The `renewal` executable SwiftPM built next to the test bundle (it is a dependency of this target).
    static var binary: URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let candidates = [
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("renewal"),
            Bundle.main.bundleURL.appendingPathComponent("renewal"),
            root.appendingPathComponent(".build/debug/renewal"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[2]
    }

    /// Runs `renewal args…` (or another program SwiftPM built beside it, such as
    /// `appstore-simulator`) with a clean environment plus `environment`, optionally feeding stdin.
    ///
    /// The child is waited for on a GCD thread, never on a Swift concurrency thread: the in-process
    /// simulator the child talks to needs those threads to answer. A child still running after
    /// `timeLimit` is killed and the test records it, with the end of what the child wrote, so a stuck
    /// child fails its test instead of stalling the whole suite.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil, program: String = "renewal",
        timeLimit: Duration = .seconds(300)
    ) async throws -> Result {
        let (result, killed) = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Swift.Result<(CLI.Result, Bool), any Error> {
                        try runBlocking(
                            arguments, environment: environment, stdin: stdin, program: program, timeLimit: timeLimit)
                    })
            }
        }
        if killed {
            Issue.record(
                """
                \(program) \(arguments.joined(separator: " ")) ran past \(timeLimit) and was killed. \
                Its stdout ended: \(result.stdout.suffix(1_500)) Its stderr ended: \(result.stderr.suffix(1_500))
                """)
        }
        return result
    }

    private static func runBlocking(
        _ arguments: [String], environment: [String: String], stdin: String?, program: String, timeLimit: Duration
    ) throws -> (Result, killed: Bool) {
        let process = Process()
        process.executableURL =
            program == "renewal" ? binary : binary.deletingLastPathComponent().appendingPathComponent(program)
        process.arguments = arguments
        var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        let watchdog = ChildWatchdog(process: process, after: timeLimit)
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let result = Result(
            status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData, as: UTF8.self))
        return (result, watchdog.finish())
    }

    /// A copy of the binary in a fresh 0755 folder under /tmp, for runs as an unprivileged user
    /// (who may not be able to search the folders above the build directory). Made once per process.
    static func binaryReachableByAnyone() throws -> String {
        try reachableCopy.get()
    }

    private static let reachableCopy: Swift.Result<String, any Error> = Swift.Result {
        let folder = "/tmp/renewal-binary-" + UUID().uuidString
        try FileManager.default.createDirectory(
            atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let copy = folder + "/renewal"
        try FileManager.default.copyItem(atPath: binary.path, toPath: copy)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy)
        return copy
    }

    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "renewal-cli-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A fresh directory (removed afterwards) and the in-process simulator with `secret`, logging
    /// nothing, for `body`.
    static func withDirectoryAndSimulator(
        secret: String,
        _ body: (String, SimulatorState, SimulatorConfiguration, SimulatorEndpoints) async throws -> Void
    ) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = SimulatorState()
        let configuration = SimulatorConfiguration(sharedSecret: secret, state: state)
        let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })
        try await withAppStoreSimulator(configuration: configuration, logger: quiet) { endpoints in
            try await body(directory, state, configuration, endpoints)
        }
    }
}

/// Kills a child process that outlives its time limit (SIGKILL), and says whether it had to.
final class ChildWatchdog: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    private var killed = false

    init(process: Process, after limit: Duration) {
        let pid = process.processIdentifier
        let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            lock.withLock {
                guard !done else { return }
                killed = true
                kill(pid, SIGKILL)
            }
        }
    }

    /// Call once the child has been waited for: the watchdog does nothing after, and this says whether it
    /// killed the child.
    func finish() -> Bool {
        lock.withLock {
            done = true
            return killed
        }
    }
}

extension CLI {
    /// `status --json` of `database`: one object per row.
    static func statusRows(_ database: String, environment: [String: String]) async throws -> [[String: Any]] {
        let result = try await run(["status", "--json", "--database", database], environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
    }
}
