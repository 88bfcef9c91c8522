import AppStoreSimulator
import Foundation
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Stopping is quick: SIGTERM drains within a bounded time even while Apple hangs, and a second
/// signal exits at once. The real binary against the simulator on loopback, on a SQLite file.
@Suite("SIGTERM: a bounded drain, and a second signal exits at once")
struct ShutdownTests {
    static let secret = "shutdown-test-secret-77"
    static let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test(
        """
        SIGTERM while Apple never answers: exit 3 within the drain time, partial report, leases released, nothing \
        changed
        """
    )
    func drainIsBoundedWhileAppleHangs() async throws {
        try await withHangingApple { state, env, directory in
            let report = directory + "/partial.json"
            // Apple takes 8 s per answer; the client would wait two minutes.
            let process = try PostgresKillTests.start(
                ["run", "--concurrency", "4", "--timeout", "120", "--drain-seconds", "2", "--report", report],
                environment: env, log: directory + "/run.log")
            try await Self.waitUntil { state.stats.requests >= 5 || !process.isRunning }
            #expect(process.isRunning)
            let signalled = ContinuousClock.now
            kill(process.processIdentifier, SIGTERM)
            _ = await PostgresKillTests.waitForExit(process)
            let took = ContinuousClock.now - signalled
            print(
                """
                shutdown figures: SIGTERM with 4 requests hanging 8 s, --drain-seconds 2: exited \
                \(process.terminationStatus) after \(took)
                """
            )
            #expect(process.terminationStatus == 3)
            #expect(took < .seconds(10), "the drain took \(took)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
            )
            #expect(object["status"] as? String == "interrupted")
            let counts = try #require(object["counts"] as? [String: Any])
            // The first receipt goes alone (it answered before the signal); the four after it were in
            // flight and the other three claimed but not started: all seven released untouched.
            #expect(counts["checked"] as? Int == 1 && counts["skipped"] as? Int == 7, "\(counts)")
            // Nothing was changed, nothing stays leased, and the next run (Apple back) takes everything
            state.latency = .zero
            let next = try await CLI.run(["run"], environment: env)
            #expect(next.status == 0, "\(next.stderr)")
            #expect(next.stdout.contains("checked 7,"), "\(next.stdout)")
        }
    }

    @Test("a second SIGTERM exits at once with 143; uncommitted work is rolled back and the next run finishes")
    func secondSignalExitsAtOnce() async throws {
        try await withHangingApple { state, env, directory in
            let process = try PostgresKillTests.start(
                ["run", "--concurrency", "4", "--timeout", "120", "--drain-seconds", "60"], environment: env,
                log: directory + "/run.log")
            try await Self.waitUntil { state.stats.requests >= 5 || !process.isRunning }
            kill(process.processIdentifier, SIGTERM)
            // The first signal is being handled (its notice is logged) before the second is sent.
            try await Self.waitUntil {
                (try? String(contentsOfFile: directory + "/run.log", encoding: .utf8))?.contains("Signal received")
                    == true
                    || !process.isRunning
            }
            let signalled = ContinuousClock.now
            kill(process.processIdentifier, SIGTERM)
            _ = await PostgresKillTests.waitForExit(process)
            let took = ContinuousClock.now - signalled
            print(
                """
                shutdown figures: second SIGTERM during a 60 s drain: exited \(process.terminationStatus) after \
                \(took)
                """
            )
            #expect(process.terminationStatus == 143)
            #expect(took < .seconds(3))
            let log = try String(contentsOfFile: directory + "/run.log", encoding: .utf8)
            #expect(log.contains("second SIGTERM received: exiting now"))
            #expect(!log.contains(Self.secret))
            state.latency = .zero
            let next = try await CLI.run(["run"], environment: env)
            #expect(next.status == 0, "\(next.stderr)")
            #expect(next.stdout.contains("checked 7,"), "\(next.stdout)")
            let status = try await CLI.run(["status", "--json"], environment: env)
            let rows = try #require(
                try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
            #expect(rows.count == 8 && rows.allSatisfy { $0["state"] as? String == "active" })
        }
    }

    /// Eight receipts due on a migrated SQLite file, and a simulator that holds every answer for 8 s
    /// (far longer than the drain; short enough that the simulator's own shutdown, which waits for
    /// the answers it still holds, keeps the test short).
    func withHangingApple(_ body: (SimulatorState, [String: String], String) async throws -> Void) async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = SimulatorState()
        let configuration = SimulatorConfiguration(sharedSecret: Self.secret, state: state)
        try await withAppStoreSimulator(configuration: configuration, logger: Self.quiet) { endpoints in
            let env = [
                "APPSTORE_SHARED_SECRET": Self.secret, "RENEWAL_DATABASE": directory + "/r.sqlite",
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
            ]
            #expect(try await CLI.run(["migrate"], environment: env).status == 0)
            let lines = (0..<8).map { index in
                let receipt = SimulatedReceipt(
                    account: "hang-\(index)", scenario: .renewal, start: state.now.addingTimeInterval(-86_400))
                return #"{"user_id": "u\#(index)", "latest_receipt": "\#(receipt.encoded)"}"#
            }
            #expect(
                try await CLI.run(["import", "-"], environment: env, stdin: lines.joined(separator: "\n") + "\n").status
                    == 0)
            state.latency = .seconds(8)
            try await body(state, env, directory)
        }
    }

    /// Polls `condition` every 10 ms for up to 30 s.
    static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition(), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
