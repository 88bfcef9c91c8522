import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real binary killed with SIGKILL while it answers refund requests (`CONSUMPTION_REQUEST`), Apple
/// answering slowly: the next run, minutes later (well inside the killed run's 10-minute claims), answers
/// every request left at once, because it knows the killed run is dead (SQLite: it holds the run lock;
/// PostgreSQL: no session holds the killed worker's liveness lock), and no request is recorded answered
/// twice. Only the one answer in flight at the kill may reach Apple twice (the same answer; Apple keeps
/// the last).
@Suite("kill -9 while answering refund requests")
struct RefundRequestKillTests {
    static let requests = 16

    @Test(
        """
        A run killed while answering refund requests: the next run answers the rest at once, each request is \
        answered once in the database, and Apple gets at most the one in flight twice
        """,
        arguments: FeedKillTests.backends)
    func killedWhileAnswering(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            // Each customer asks for a refund an hour from now (36 days after buying).
            let receipts = (0..<Self.requests).map { index in
                (
                    "user-\(index)",
                    SimulatedReceipt(
                        account: "refund-kill-\(index)", scenario: .refundRequest,
                        start: state.now.addingTimeInterval(-(36 - 1.0 / 24) * 86_400))
                )
            }
            state.register(receipts.map(\.1))
            let lines =
                receipts.map {
                    #"{"user_id": "\#($0.0)", "latest_receipt": "\#($0.1.encoded)", "consumption_consent": true}"#
                }.joined(separator: "\n") + "\n"
            try await FeedKillTests.withReferenceAndVictim(backend, directory: directory, receipts: []) { _, victim in
                let imported = try await CLI.run(["import", "-"] + victim.arguments, stdin: lines)
                #expect(imported.status == 0, "\(imported.stderr)")
                func run() -> [String] { ["run", "--now", Timestamp.string(state.now)] + victim.arguments }
                let first = try await CLI.run(run(), environment: environment)
                #expect(first.status == 0, "\(first.stdout)\n\(first.stderr.suffix(2_000))")

                // Two hours on, the feed holds the requests; Apple answers slowly; the run is killed
                // after a few answers.
                state.advance(by: 2 * 3_600)
                state.latency = .milliseconds(150)
                let process = try PostgresKillTests.start(
                    run(), environment: environment, log: directory + "/victim.log")
                let deadline = ContinuousClock.now + .seconds(90)
                while state.consumptionAnswers.count < 4, process.isRunning, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(2))
                }
                // Then killed while the next answer is on its way (four recorded answered, the fifth claimed,
                // Apple not answered yet).
                let inFlight =
                    "SELECT COUNT(*) FROM refund_requests WHERE state = 'pending' AND claimed_until IS NOT NULL"
                let fifthInFlight =
                    inFlight + " AND (SELECT COUNT(*) FROM refund_requests WHERE state = 'answered') >= 4"
                while try await victim.count(fifthInFlight) < 1, process.isRunning, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(5))
                }
                #expect(process.isRunning, "the run ended before it could be killed mid-answer")
                kill(process.processIdentifier, SIGKILL)
                _ = await PostgresKillTests.waitForExit(process)
                state.latency = .zero
                let answeredBeforeKill = try await victim.count(
                    "SELECT COUNT(*) FROM refund_requests WHERE state = 'answered'")
                let claimed = try await victim.count(inFlight)
                let recorded = try await victim.count("SELECT COUNT(*) FROM refund_requests")
                #expect(recorded == Self.requests, "the feed recorded every request before answering: \(recorded)")
                #expect(answeredBeforeKill < Self.requests, "killed mid-way: \(answeredBeforeKill) answered")
                #expect(claimed == 1, "only the request being sent is claimed: \(claimed)")
                print(
                    "figures[refund kill, \(backend)]: killed after \(answeredBeforeKill) of \(Self.requests) "
                        + "recorded answered, \(claimed) claimed, \(state.consumptionAnswers.count) at Apple")

                // A minute later: the killed run's claim has 9 minutes left, yet the next run answers all.
                state.advance(by: 60)
                let reportPath = directory + "/next.json"
                let next = try await CLI.run(run() + ["--report", reportPath], environment: environment)
                #expect(next.status == 0, "\(next.stdout)\n\(next.stderr.suffix(2_000))")
                #expect(
                    try await victim.count("SELECT COUNT(*) FROM refund_requests WHERE state = 'answered'")
                        == Self.requests, "every request answered by the next run")
                let report = try #require(
                    try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: reportPath)))
                        as? [String: Any])
                let counts = report["counts"] as? [String: Any] ?? report
                #expect(
                    counts["refund_requests_answered"] as? Int == Self.requests - answeredBeforeKill,
                    "the next run answered the rest: \(counts)")

                // Apple got every request, and at most the one in flight at the kill twice.
                let sent = state.consumptionAnswers.map(\.transactionID)
                let twice = Dictionary(grouping: sent, by: { $0 }).filter { $0.value.count > 1 }
                #expect(Set(sent).count == Self.requests, "\(Set(sent).count) of \(Self.requests) requests answered")
                #expect(twice.count <= 1 && twice.values.allSatisfy { $0.count == 2 }, "sent twice: \(twice)")
                print("figures[refund kill, \(backend)]: next run answered the rest; \(twice.count) sent twice")

                // A third run sends nothing.
                state.advance(by: 60)
                let third = try await CLI.run(run(), environment: environment)
                #expect(third.status == 0, "\(third.stderr.suffix(2_000))")
                #expect(state.consumptionAnswers.count == sent.count, "nothing is answered again")
            }
        }
    }
}
