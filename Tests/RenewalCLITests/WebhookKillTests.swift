import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real binary killed with SIGKILL while it delivers webhooks: nothing is lost (every change
/// arrives at least once), nothing is marked delivered without a 2xx.
@Suite("kill -9 while delivering webhooks")
struct WebhookKillTests {
    @Test(
        "run and deliver killed mid-delivery: every change arrives, none is marked delivered without a 2xx",
        arguments: FeedKillTests.backends)
    func killedWhileDelivering(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: KillLoopTests.secret) { directory, state, _, endpoints in
            let secret = WebhookTests.secret()
            try secret.write(toFile: directory + "/webhook-secret", atomically: true, encoding: .utf8)
            let receiver = WebhookReceiver(secret: secret)
            let target: KillLoopTests.Target
            if backend == "postgres" {
                let base = try #require(PostgresKillEnvironment.baseURL)
                target = try .postgres(base: base, psql: try #require(PostgresKillTests.psqlPath))
            } else {
                target = .sqlite(directory + "/renewal.sqlite")
            }
            defer { target.drop() }
            try await receiver.serve { url in
                let database = target.database
                let environment = [
                    "APPSTORE_SHARED_SECRET": KillLoopTests.secret,
                    "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                    "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL, "RENEWAL_DATABASE": database,
                    "RENEWAL_WEBHOOK_URL": url, "RENEWAL_WEBHOOK_SECRET_FILE": directory + "/webhook-secret",
                ]
                let start = state.now.addingTimeInterval(-50 * 86_400)
                let lines = (0..<60).map { index in
                    let receipt = SimulatedReceipt(
                        account: "hook-kill-\(index)",
                        scenario: KillLoopTests.scenarios[index % KillLoopTests.scenarios.count],
                        start: start)
                    return #"{"user_id": "user-\#(index)", "latest_receipt": "\#(receipt.encoded)"}"#
                }
                #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
                #expect(
                    try await CLI.run(["import", "-"], environment: environment, stdin: lines.joined(separator: "\n"))
                        .status == 0)
                receiver.mode = .slow

                // A run killed once some of its changes went out.
                let run = try PostgresKillTests.start(["run"], environment: environment, log: directory + "/run.log")
                try await Self.killAfter(receiver, requests: 5, process: run)
                // Another run finishes the checks (and delivers within its budget); deliver, killed too.
                _ = try await CLI.run(["run", "--webhook-seconds", "0"], environment: environment)
                let later = Timestamp.string(Date().addingTimeInterval(3600))
                let deliver = try PostgresKillTests.start(
                    ["deliver", "--now", later], environment: environment, log: directory + "/deliver.log")
                try await Self.killAfter(receiver, requests: receiver.received.count + 8, process: deliver)
                // Past the killed worker's leases, everything is delivered.
                let finish = try await CLI.run(
                    ["deliver", "--now", Timestamp.string(Date().addingTimeInterval(7200))], environment: environment)
                #expect(finish.status == 0, "\(finish.stdout)\(finish.stderr)")

                let changes = try await target.count("SELECT COUNT(*) FROM entitlement_changes")
                let queued = try await target.count("SELECT COUNT(*) FROM webhook_outbox")
                #expect(changes > 25 && queued == changes, "\(queued) queued of \(changes) changes")
                let accepted = Set(
                    receiver.received.filter { $0.answered == 204 }.map { WebhookTests.changeNumber($0.id) })
                let delivered = Set(
                    try await target.lines("SELECT change_id FROM webhook_outbox WHERE delivered_at IS NOT NULL")
                        .compactMap { Int($0) })
                #expect(delivered.count == changes, "every change delivered in the end")
                #expect(delivered.isSubset(of: accepted), "marked delivered without a 2xx")
                print("webhook kill figures (\(backend)): \(receiver.received.count) requests for \(changes) changes")
            }
        }
    }

    /// Waits (polling) until the receiver has seen `requests` requests, then kills `process`.
    static func killAfter(_ receiver: WebhookReceiver, requests: Int, process: Process) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while receiver.received.count < requests, process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(process.isRunning, "it finished before it could be killed")
        kill(process.processIdentifier, SIGKILL)
        _ = await PostgresKillTests.waitForExit(process)
    }
}
