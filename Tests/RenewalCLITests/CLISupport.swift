import Foundation
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
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("renewal"),
            Bundle.main.bundleURL.appendingPathComponent("renewal"),
            root.appendingPathComponent(".build/debug/renewal"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[2]
    }

    /// Runs `renewal args…` with a clean environment plus `environment`, optionally feeding stdin.
    ///
    /// The child is waited for on a GCD thread, never on a Swift concurrency thread: the in-process
    /// simulator the child talks to needs those threads to answer.
    static func run(_ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Swift.Result<CLI.Result, any Error> {
                    try runBlocking(arguments, environment: environment, stdin: stdin)
                })
            }
        }
    }

    private static func runBlocking(_ arguments: [String], environment: [String: String], stdin: String?) throws -> Result {
        let process = Process()
        process.executableURL = binary
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
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData, as: UTF8.self))
    }

    /// Starts `renewal args…`, sends SIGTERM after `delay`, and waits for it to exit.
    static func runAndTerminate(_ arguments: [String], environment: [String: String], after delay: Duration) async throws -> Int32 {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()].merging(environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        try await Task.sleep(for: delay)
        process.terminate()
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                process.waitUntilExit()
                continuation.resume(returning: process.terminationStatus)
            }
        }
    }

    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "renewal-cli-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
