import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real binary killed with SIGKILL in the middle of reading Apple's change feed: the window is
/// read again by the next run, no notification is lost or acted on twice, and the end state equals a
/// run that was never interrupted.
@Suite("kill -9 during a read of Apple's change feed")
struct FeedKillTests {
    static var backends: [String] {
        ["sqlite"] + (PostgresKillEnvironment.baseURL != nil && PostgresKillTests.psqlPath != nil ? ["postgres"] : [])
    }

    /// Two databases of `backend` holding the same imported `receipts`: the reference, run without
    /// interruption, and the victim, killed; both dropped after `body`.
    static func withReferenceAndVictim(
        _ backend: String, directory: String, receipts: [(String, SimulatedReceipt)],
        _ body: (_ reference: KillLoopTests.Target, _ victim: KillLoopTests.Target) async throws -> Void
    ) async throws {
        let targets: [KillLoopTests.Target]
        if backend == "postgres" {
            let base = try #require(PostgresKillEnvironment.baseURL)
            let psql = try #require(PostgresKillTests.psqlPath)
            targets = [try .postgres(base: base, psql: psql), try .postgres(base: base, psql: psql)]
        } else {
            targets = [.sqlite(directory + "/reference.sqlite"), .sqlite(directory + "/victim.sqlite")]
        }
        defer { targets.forEach { $0.drop() } }
        for target in targets {
            try await target.prepare(ServerAPIMigrationTests.importLines(receipts))
        }
        try await body(targets[0], targets[1])
    }

    static let scenarios: [Scenario] = [.renewal, .refund, .billingRetry, .voluntaryExpiry, .billingRecovery]

    @Test(
        """
        A run killed after a few pages of the feed, applied and recorded but the cursor not moved, leaves the \
        cursor where it was; the next run reads the window again and applies nothing twice: it ends like an \
        uninterrupted one, same notifications, same states, each change once
        """,
        arguments: backends)
    func killedMidRead(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let receipts = (0..<90).map { index in
                (
                    "user-\(index)",
                    SimulatedReceipt(
                        account: "feed-kill-\(index)", scenario: Self.scenarios[index % Self.scenarios.count],
                        start: state.now.addingTimeInterval(-Double(5 + index % 50) * 86_400))
                )
            }
            state.register(receipts.map(\.1))
            try await FeedKillTests.withReferenceAndVictim(backend, directory: directory, receipts: receipts) {
                reference, victim in
                func run(_ target: KillLoopTests.Target) async throws {
                    let result = try await CLI.run(
                        ["run", "--now", Timestamp.string(state.now)] + target.arguments, environment: environment)
                    #expect([0, 3].contains(result.status), "\(result.stdout)\n\(result.stderr.suffix(2_000))")
                }
                // The first read sets each cursor; forty days of renewals, refunds and failures follow.
                for target in [reference, victim] { try await run(target) }
                let cursors = "SELECT environment, pulled_until FROM feed_cursors ORDER BY environment"
                let firstCursors = try await victim.lines(cursors)
                #expect(firstCursors.count == 2, "\(firstCursors)")
                state.advance(by: 40 * 86_400)
                try await run(reference)
                let expected = try await reference.lines("SELECT notification_uuid FROM feed_notifications").sorted()
                // Most are applied from their signed data as they are recorded, before the cursor moves.
                #expect(try await reference.count("SELECT COALESCE(SUM(notifications_applied), 0) FROM runs") > 20)

                // The victim is killed while the feed's pages come slowly.
                state.latency = .milliseconds(40)
                let before = state.feedRequests
                let process = try PostgresKillTests.start(
                    ["run", "--now", Timestamp.string(state.now)] + victim.arguments, environment: environment,
                    log: directory + "/victim.log")
                let deadline = ContinuousClock.now + .seconds(60)
                while state.feedRequests - before < 4, process.isRunning, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(2))
                }
                #expect(process.isRunning, "the run ended before it could be killed mid-read")
                kill(process.processIdentifier, SIGKILL)
                _ = await PostgresKillTests.waitForExit(process)
                state.latency = .zero
                let partial = try await victim.count("SELECT COUNT(*) FROM feed_notifications")
                #expect(try await victim.lines(cursors) == firstCursors, "the cursor moved without a whole window")
                #expect(partial < expected.count, "killed after the read: \(partial) of \(expected.count)")

                try await run(victim)
                let found = try await victim.lines("SELECT notification_uuid FROM feed_notifications").sorted()
                #expect(found == expected, "\(found.count) notifications recorded, \(expected.count) expected")
                #expect(expected.count > 40, "a window of several pages: \(expected.count)")
                try await KillLoopTests.expectSameOutcome(victim, as: reference)
            }
        }
    }
}
