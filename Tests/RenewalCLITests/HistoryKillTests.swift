import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real binary killed with SIGKILL while Get Transaction History completes the ledger: every page
/// recorded before the kill stays, the next runs go on from the stored revisions once the dead worker's
/// claims lapse, and the ledger ends like one never interrupted, each transaction once.
@Suite("kill -9 while Get Transaction History completes the ledger")
struct HistoryKillTests {
    @Test(
        """
        A run killed in the middle of the history backfill keeps every page it recorded; once the dead \\
        worker's claims lapse the next run completes every history from its stored revision, and the ledger \\
        equals an uninterrupted one's, each transaction once
        """,
        arguments: FeedKillTests.backends)
    func killedMidHistory(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            // Thirty subscribers of six monthly periods, one transaction a history page: 180 pages.
            let receipts = (0..<30).map { index in
                (
                    "user-\(index)",
                    SimulatedReceipt(
                        account: "history-kill-\(index)", scenario: .renewal,
                        start: state.now.addingTimeInterval(-Double(170 + index % 5) * 86_400))
                )
            }
            state.register(receipts.map(\.1))
            state.historyPageSize = 1
            try await FeedKillTests.withReferenceAndVictim(backend, directory: directory, receipts: receipts) {
                reference, victim in
                func arguments(_ target: KillLoopTests.Target) -> [String] {
                    [
                        "run", "--source", "server-api", "--history-requests", "1000", "--now",
                        Timestamp.string(state.now),
                    ]
                        + target.arguments
                }
                func run(_ target: KillLoopTests.Target) async throws {
                    let result = try await CLI.run(arguments(target), environment: environment)
                    #expect([0, 3].contains(result.status), "\(result.stdout)\n\(result.stderr.suffix(2_000))")
                }
                let ledger =
                    "SELECT transaction_id, original_transaction_id, purchased_at, price_milliunits FROM transactions"
                let complete = "SELECT COUNT(*) FROM subscriptions WHERE history_completed_at IS NOT NULL"
                try await run(reference)
                let expected = try await reference.lines(ledger).sorted()
                #expect(expected.count == 180, "six periods each: \(expected.count)")
                #expect(try await reference.count(complete) == 30)

                // The victim is killed while the history's pages come slowly.
                state.latency = .milliseconds(30)
                let before = state.historyRevisions.count
                let process = try PostgresKillTests.start(
                    arguments(victim), environment: environment, log: directory + "/victim.log")
                let deadline = ContinuousClock.now + .seconds(90)
                while state.historyRevisions.count - before < 40, process.isRunning, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(2))
                }
                #expect(process.isRunning, "the run ended before it could be killed mid-history")
                kill(process.processIdentifier, SIGKILL)
                _ = await PostgresKillTests.waitForExit(process)
                state.latency = .zero
                let recorded = try await victim.count("SELECT COUNT(*) FROM transactions")
                #expect(recorded > 30 && recorded < 180, "killed mid-history: \(recorded) of 180 recorded")
                let completedBefore = try await victim.count(complete)
                #expect(
                    completedBefore > 0 && completedBefore < 30,
                    "\(completedBefore) histories completed before the kill")

                // At once, the dead worker's claims still hold its subscriptions; a quarter of an hour later
                // they have lapsed and the next run completes every history.
                state.advance(by: 16 * 60)
                try await run(victim)
                #expect(try await victim.count(complete) == 30)
                #expect(try await victim.lines(ledger).sorted() == expected, "the ledger differs from the reference")
                // Resumed from stored revisions: no history was read again from its first page, but for the one
                // whose first page was in flight when the worker died.
                let firstPages = state.historyRevisions[before...].filter { $0 == nil }.count
                #expect((30...31).contains(firstPages), "each history's first page asked once: \(firstPages)")
            }
        }
    }
}
