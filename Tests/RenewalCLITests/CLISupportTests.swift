import Foundation
import Testing

@Suite("Test support: a child that never ends fails its test instead of stalling the suite")
struct CLISupportTests {
    @Test("A child still running at its time limit is killed, and the test records it with what the child wrote")
    func stuckChildIsKilled() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let started = ContinuousClock.now
        var result: CLI.Result?
        // The simulator's `serve` runs until it is stopped: a stand-in for a stuck job.
        try await withKnownIssue("the watchdog records the kill") {
            result = try await CLI.run(
                ["serve", "--port", "0", "--export-dir", directory + "/credentials"], program: "appstore-simulator",
                timeLimit: .seconds(3))
        } matching: { issue in
            issue.description.contains("ran past") && issue.description.contains("was killed")
        }
        let elapsed = ContinuousClock.now - started
        let killed = try #require(result)
        #expect(killed.status == SIGKILL, "terminated by \(killed.status)")
        #expect(elapsed < .seconds(60), "the run returned after \(elapsed)")
    }
}
