import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `renewal extend` killed with SIGKILL after Apple granted an extension and before the binary recorded
/// Apple's answer: run again, it sends each request identifier once, and Apple extends each subscriber once.
@Suite("kill -9 while extending renewal dates")
struct ExtendKillTests {
    @Test(
        """
        renewal extend killed between Apple's extension and its record, then run again: every request identifier \
        is sent once, every subscriber is extended once, the one in flight is reported unconfirmed (exit 3) and \
        Apple's RENEWAL_EXTENDED confirms it on the next run; a third invocation sends nothing
        """,
        arguments: FeedKillTests.backends)
    func killedBetweenSendingAndRecording(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let receipts = (0..<24).map { index in
                (
                    "user-\(index)",
                    SimulatedReceipt(
                        account: "extend-kill-\(index)", scenario: .renewal,
                        start: state.now.addingTimeInterval(-Double(5 + index % 20) * 86_400))
                )
            }
            state.register(receipts.map(\.1))
            try await FeedKillTests.withReferenceAndVictim(backend, directory: directory, receipts: receipts) {
                _, victim in
                let now = ["--now", Timestamp.string(state.now)]
                let checked = try await CLI.run(
                    ["run", "--source", "server-api"] + now + victim.arguments, environment: environment)
                #expect(checked.status == 0, "\(checked.stderr.suffix(2_000))")
                let extend =
                    ["extend", "--days", "7", "--reason", "3", "--intent", "outage-2026-11", "--source", "server-api"]
                    + receipts.flatMap { ["--user", $0.0] } + now + victim.arguments

                // Apple answers slowly once it has extended: the binary is killed while it waits.
                state.extensionAnswerDelay = .milliseconds(150)
                let before = state.extensionRequests.count
                let process = try PostgresKillTests.start(
                    extend, environment: environment, log: directory + "/victim.log")
                let deadline = ContinuousClock.now + .seconds(90)
                while state.extensionRequests.count - before < 8, process.isRunning, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(2))
                }
                #expect(process.isRunning, "extend ended before it could be killed")
                kill(process.processIdentifier, SIGKILL)
                _ = await PostgresKillTests.waitForExit(process)
                state.extensionAnswerDelay = .zero
                let sentBeforeKill = state.extensionRequests.count - before
                #expect((8..<24).contains(sentBeforeKill), "killed mid-way: \(sentBeforeKill) sent")
                print("figures[extend kill, \(backend)]: killed after \(sentBeforeKill) of 24 requests")

                let again = try await CLI.run(extend, environment: environment)
                #expect(again.status == 3, "the request in flight is unconfirmed: \(again.stdout)\n\(again.stderr)")
                #expect(again.stdout.contains("unconfirmed"), "\(again.stdout)")
                let sent = Array(state.extensionRequests[before...])
                #expect(sent.count == 24, "one request per subscriber: \(sent.count)")
                #expect(Set(sent).count == sent.count, "each request identifier sent once")
                for (user, receipt) in receipts {
                    let original = receipt.originalTransactionID
                    #expect(state.extensions(of: original).count == 1, "\(user) extended once")
                }
                let states = try await victim.lines("SELECT state FROM renewal_extensions")
                #expect(states.filter { $0 == "succeeded" }.count == 23, "\(states)")
                #expect(states.filter { $0 == "sending" }.count == 1, "\(states)")

                // The next run reads Apple's RENEWAL_EXTENDED: the request in flight is confirmed.
                state.advance(by: 3_600)
                let confirmed = try await CLI.run(
                    ["run", "--source", "server-api", "--now", Timestamp.string(state.now)] + victim.arguments,
                    environment: environment)
                #expect(confirmed.status == 0, "\(confirmed.stderr.suffix(2_000))")
                #expect(
                    try await victim.count("SELECT COUNT(*) FROM renewal_extensions WHERE state = 'succeeded'") == 24)

                // The same intent a third time: nothing is sent; the subscribers are checked again, and the
                // report is a run's.
                let reportPath = directory + "/extend-report.json"
                let third = try await CLI.run(extend + ["--report", reportPath], environment: environment)
                #expect(third.status == 0, "\(third.stdout)\n\(third.stderr)")
                #expect(state.extensionRequests.count - before == 24)
                #expect(third.stdout.contains("already_extended 24"), "\(third.stdout)")
                let report = try #require(
                    try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: reportPath)))
                        as? [String: Any])
                #expect(report["command"] as? String == "backfill" && report["checked"] as? Int == 24, "\(report)")
            }
        }
    }

    @Test(
        """
        renewal extend's usage errors exit 64 naming the fix (days over 90, no subscriber named, --user with \
        --product, a storefront that is not a country code); without Server API credentials it exits 78; \
        --dry-run --product lists the product's subscribers and sends nothing
        """)
    func usageAndDryRun() async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let database = ["--database", directory + "/renewal.sqlite"]
            for (arguments, message) in [
                (["--days", "91", "--reason", "3", "--user", "u"], "--days must be between 1 and 90"),
                (["--days", "7", "--reason", "3"], "Name the subscribers to extend"),
                (["--days", "7", "--reason", "3", "--user", "u", "--product", "p"], "Name the subscribers to extend"),
                (["--days", "7", "--reason", "9", "--user", "u"], "--reason must be 0"),
                (["--days", "7", "--reason", "3", "--product", "p", "--storefront", "us"], "ISO 3166-1 alpha-3"),
            ] {
                let result = try await CLI.run(["extend"] + arguments + database, environment: environment)
                #expect(result.status == 64, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            }
            let receipts = (0..<3).map { index in
                (
                    "user-\(index)",
                    SimulatedReceipt(
                        account: "extend-dry-\(index)", scenario: index == 2 ? .voluntaryExpiry : .renewal,
                        start: state.now.addingTimeInterval(-Double(index == 2 ? 40 : 5) * 86_400))
                )
            }
            state.register(receipts.map(\.1))
            let file = directory + "/lines.jsonl"
            try ServerAPIMigrationTests.importLines(receipts).write(toFile: file, atomically: true, encoding: .utf8)
            #expect(try await CLI.run(["migrate"] + database, environment: environment).status == 0)
            #expect(try await CLI.run(["import", file] + database, environment: environment).status == 0)
            let now = ["--now", Timestamp.string(state.now)]
            #expect(
                try await CLI.run(["run", "--source", "server-api"] + now + database, environment: environment).status
                    == 0)
            let dry = try await CLI.run(
                ["extend", "--days", "7", "--reason", "3", "--product", "com.example.pro.monthly", "--dry-run"] + now
                    + database, environment: environment)
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.stdout.contains("would_extend 2") && dry.stdout.contains("ineligible 1"), "\(dry.stdout)")
            #expect(dry.stdout.contains("ineligible:not_active"), "\(dry.stdout)")
            #expect(state.massExtensions.isEmpty && state.extensionRequests.isEmpty, "a dry run sends nothing")

            var noKey = environment
            noKey["APPSTORE_KEY_ID"] = nil
            noKey["APPSTORE_ISSUER_ID"] = nil
            noKey["APPSTORE_PRIVATE_KEY_FILE"] = nil
            let refused = try await CLI.run(
                ["extend", "--days", "7", "--reason", "3", "--user", "user-0"] + now + database, environment: noKey)
            #expect(refused.status == 78, "\(refused.stderr)")
            #expect(refused.stderr.contains("needs App Store Server API credentials"), "\(refused.stderr)")
        }
    }
}
