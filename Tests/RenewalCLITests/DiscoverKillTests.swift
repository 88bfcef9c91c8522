import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real binary killed with SIGKILL in the middle of `renewal discover`: the pages it recorded stay
/// recorded, its progress row says where it stopped, and the next discover goes on from there; every
/// purchase is adopted exactly once.
@Suite("kill -9 during renewal discover")
struct DiscoverKillTests {
    @Test(
        """
        A discover killed after a few pages of Notification History leaves its window unfinished; the next \
        discover resumes it (fewer pages than the whole window) and each of the 200 purchases is adopted once, \
        with one purchase_unclaimed change each
        """,
        arguments: FeedKillTests.backends)
    func killedMidDiscover(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            // Yearly subscriptions bought over the last 20 days: one notification each, ten pages of twenty.
            let lost = state.makeLostPurchases(
                count: 200, prefix: "kill", start: state.now.addingTimeInterval(-20 * 86_400), spacing: 600,
                withToken: false, period: 365 * 86_400)
            let expected = lost.map(\.originalTransactionID).sorted()
            try await FeedKillTests.withReferenceAndVictim(backend, directory: directory, receipts: []) { victim, _ in
                let arguments =
                    ["discover", "--since", "30d", "--json", "--now", Timestamp.string(state.now)] + victim.arguments
                state.latency = .milliseconds(40)
                let before = state.feedRequests
                let process = try PostgresKillTests.start(
                    arguments, environment: environment, log: directory + "/victim.log")
                let deadline = ContinuousClock.now + .seconds(60)
                while state.feedRequests - before < 4, process.isRunning, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(2))
                }
                #expect(process.isRunning, "discover ended before it could be killed mid-read")
                kill(process.processIdentifier, SIGKILL)
                _ = await PostgresKillTests.waitForExit(process)
                state.latency = .zero
                let partial = try await victim.count("SELECT COUNT(*) FROM adopted_purchases")
                #expect(partial > 0 && partial < expected.count, "killed mid-read: \(partial) of \(expected.count)")
                let progress = try await victim.lines(
                    "SELECT pages, page_token IS NULL, completed_at IS NULL FROM discover_cursors WHERE stream = 'Production'"
                )
                #expect(progress.count == 1, "\(progress)")

                let resumedAt = state.feedRequests
                let rerun = try await CLI.run(arguments, environment: environment)
                #expect(rerun.status == 0, "\(rerun.stdout)\n\(rerun.stderr.suffix(2_000))")
                let json = try #require(
                    try JSONSerialization.jsonObject(with: Data(rerun.stdout.utf8)) as? [String: Any])
                let windows = json["windows"] as? [[String: Any]] ?? []
                let production = windows.first { $0["stream"] as? String == "Production" }
                #expect(production?["resumed"] as? Bool == true, "\(windows) after \(progress)")
                #expect(json["adopted"] as? Int == expected.count - partial, "\(json)")
                // Ten pages of production and one of the sandbox read whole; resuming reads fewer.
                let requests = state.feedRequests - resumedAt
                #expect(requests < 11, "the rerun read \(requests) pages: it did not resume")

                let adopted = try await victim.lines(
                    "SELECT original_transaction_id FROM adopted_purchases ORDER BY original_transaction_id")
                #expect(adopted == expected, "\(adopted.count) adopted, \(expected.count) expected")
                let changes = "SELECT COUNT(*) FROM entitlement_changes WHERE kind = 'purchase_unclaimed'"
                #expect(try await victim.count(changes) == expected.count, "one purchase_unclaimed change each")
                let rows = "SELECT COUNT(*) FROM receipts WHERE user_id LIKE 'adopted:%'"
                #expect(try await victim.count(rows) == expected.count)
                let done = try await victim.lines(
                    "SELECT page_token IS NULL, completed_at IS NOT NULL FROM discover_cursors ORDER BY stream")
                #expect(done.allSatisfy { $0 == "1|1" || $0 == "t|t" }, "\(done)")
            }
        }
    }
}
