import AppStoreSimulator
import Foundation
import Logging
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("The renewal binary end to end")
struct RenewalCLITests {
    static let secret = "cli-test-secret-91c2"
    static let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Starts the simulator in-process and returns the environment the binary needs to reach it.
    func withSimulator(_ body: (SimulatorState, [String: String]) async throws -> Void) async throws {
        let state = SimulatorState()
        let configuration = SimulatorConfiguration(sharedSecret: Self.secret, state: state)
        try await withAppStoreSimulator(configuration: configuration, logger: Self.quiet) { endpoints in
            try await body(
                state,
                [
                    "APPSTORE_SHARED_SECRET": Self.secret,
                    "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                    "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
                ])
        }
    }

    func importLines(_ receipts: [(String, SimulatedReceipt)]) -> String {
        receipts.map { #"{"user_id": "\#($0.0)", "latest_receipt": "\#($0.1.encoded)"}"# }.joined(separator: "\n")
            + "\n"
    }

    @Test("migrate → import → run → status, with the contract's exit codes and JSON")
    func endToEnd() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/renewal.sqlite"
        try await withSimulator { state, env in
            let env = env.merging(["RENEWAL_DATABASE": db]) { $1 }
            #expect(try await CLI.run(["migrate"], environment: env).status == 0)
            #expect(try await CLI.run(["migrate"], environment: env).stdout.contains("up to date"))

            let start = state.now.addingTimeInterval(-10 * 86_400)
            let lines = importLines([
                ("alice", SimulatedReceipt(account: "alice", scenario: .renewal, start: start)),
                ("tess", SimulatedReceipt(account: "tess", scenario: .sandbox, start: start)),
                ("gone", SimulatedReceipt(account: "gone", scenario: .accountNotFound, start: start)),
            ])
            let imported = try await CLI.run(["import", "-"], environment: env, stdin: lines)
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(imported.stdout.contains("3 new"))

            let before = try await statusJSON(env)
            #expect(before.count == 3)
            #expect(before.allSatisfy { $0["state"] as? String == "unverified" && $0["entitled"] as? Bool == false })

            let report = dir + "/report.json"
            let run = try await CLI.run(["run", "--report", report], environment: env)
            #expect(run.status == 0, "\(run.stderr)")
            let reportObject = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
            )
            #expect(reportObject["checked"] as? Int == 3)
            #expect((reportObject["changes"] as? [Any])?.count == 3)

            let rows = try await statusJSON(env)
            let byUser = Dictionary(rows.map { ($0["user_id"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
            #expect(byUser["alice"]?["state"] as? String == "active")
            #expect(byUser["alice"]?["entitled"] as? Bool == true)
            #expect(byUser["alice"]?["environment"] as? String == "Production")
            #expect(byUser["tess"]?["environment"] as? String == "Sandbox")
            #expect(byUser["gone"]?["state"] as? String == "invalid")
            for key in [
                "user_id", "original_transaction_id", "product_id", "state", "entitled", "expires_at", "auto_renew",
                "environment", "grace_period_expires_at", "last_verified_at", "next_check_at",
            ] {
                #expect(byUser["alice"]?.keys.contains(key) == true, "status lacks \(key)")
            }

            // An immediate second run has nothing due.
            let second = try await CLI.run(["run", "--report", dir + "/second.json"], environment: env)
            #expect(second.status == 0)
            #expect(second.stdout.contains("checked 0"))
        }
    }

    @Test("A wrong shared secret exits 78 and changes nothing")
    func wrongSecret() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await withSimulator { state, env in
            var env = env.merging(["RENEWAL_DATABASE": dir + "/r.sqlite"]) { $1 }
            _ = try await CLI.run(["migrate"], environment: env)
            _ = try await CLI.run(
                ["import", "-"], environment: env,
                stdin: importLines([
                    ("a", SimulatedReceipt(account: "a", scenario: .renewal, start: state.now))
                ]))
            let before = try await CLI.run(["status", "--json"], environment: env).stdout
            env["APPSTORE_SHARED_SECRET"] = "wrong"
            let run = try await CLI.run(["run"], environment: env)
            #expect(run.status == 78)
            #expect(run.stderr.contains("21004"))
            #expect(!run.stderr.contains("wrong") || run.stderr.contains("shared secret"))
            #expect(try await CLI.run(["status", "--json"], environment: env).stdout == before)
        }
    }

    @Test("An overlapping run on SQLite exits 75 without touching anything")
    func lockHeld() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/r.sqlite"
        try await withSimulator { _, env in
            let env = env.merging(["RENEWAL_DATABASE": db]) { $1 }
            _ = try await CLI.run(["migrate"], environment: env)
            let store = try SQLiteSubscriptionStore.open(path: db, create: false)
            let result = try await store.withRunLock(owner: "test") {
                try await CLI.run(["run"], environment: env)
            }
            #expect(result.status == 75)
            #expect(result.stderr.contains("lock"))
        }
    }

    @Test("Usage errors exit 64, configuration errors 78, bad import lines 3 with the line named")
    func errorExitCodes() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let env = ["RENEWAL_DATABASE": dir + "/r.sqlite", "APPSTORE_SHARED_SECRET": "x"]
        #expect(try await CLI.run(["run", "--concurrency", "0"], environment: env).status == 64)
        #expect(try await CLI.run(["backfill"], environment: env).status == 64)
        #expect(try await CLI.run(["run", "--bogus"], environment: env).status == 64)
        let missing = try await CLI.run(["run"], environment: env)
        #expect(missing.status == 78)
        #expect(missing.stderr.contains("renewal migrate"))
        #expect(try await CLI.run(["run"], environment: ["RENEWAL_DATABASE": "mysql://x"]).status == 78)

        _ = try await CLI.run(["migrate"], environment: env)
        #expect(
            try await CLI.run(["run"], environment: ["RENEWAL_DATABASE": dir + "/r.sqlite"]).status == 78,
            "no shared secret")
        let bad = try await CLI.run(
            ["import", "-"], environment: env,
            stdin: """
                {"user_id": "ok", "latest_receipt": "aGVsbG8="}
                not json
                {"user_id": "u3", "latest_receipt": "%%%not-base64%%%"}
                {"latest_receipt": "aGVsbG8="}
                """)
        #expect(bad.status == 3)
        #expect(bad.stderr.contains("line 2"))
        #expect(bad.stderr.contains("line 3"))
        #expect(bad.stderr.contains("line 4"))
        #expect(!bad.stderr.contains("%%%not-base64%%%"), "receipts never appear in errors")
        #expect(bad.stdout.contains("1 new"))
    }

    @Test("SIGTERM stops claiming, finishes in-flight receipts, writes a partial report and leaves the rest due")
    func gracefulShutdown() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await withSimulator { state, env in
            let env = env.merging(["RENEWAL_DATABASE": dir + "/r.sqlite"]) { $1 }
            _ = try await CLI.run(["migrate"], environment: env)
            let lines = importLines(
                (0..<60).map { ("u\($0)", SimulatedReceipt(account: "a\($0)", scenario: .renewal, start: state.now)) })
            _ = try await CLI.run(["import", "-"], environment: env, stdin: lines)
            state.latency = .milliseconds(200)

            let report = dir + "/partial.json"
            // SIGTERM once a few answers are in (polled, not a fixed delay: a loaded machine starts slowly)
            let process = try PostgresKillTests.start(
                ["run", "--concurrency", "2", "--report", report], environment: env, log: dir + "/run.log")
            try await ShutdownTests.waitUntil { state.stats.requests >= 4 || !process.isRunning }
            kill(process.processIdentifier, SIGTERM)
            _ = await PostgresKillTests.waitForExit(process)
            let status = process.terminationStatus

            #expect(status == 3)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
            )
            #expect(object["status"] as? String == "interrupted")
            let checked = try #require(object["checked"] as? Int)
            #expect(checked > 0 && checked < 60)

            // The rest is still due and not leased: the next run takes exactly the remaining receipts.
            state.latency = .zero
            let rest = try await CLI.run(["run", "--report", dir + "/rest.json"], environment: env)
            #expect(rest.status == 0, "\(rest.stderr)")
            let restObject = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/rest.json")))
                    as? [String: Any])
            #expect(restObject["checked"] as? Int == 60 - checked)
        }
    }

    @Test("--help explains every command")
    func help() async throws {
        let help = try await CLI.run(["--help"])
        for command in ["demo", "migrate", "import", "run", "backfill", "status", "check"] {
            #expect(help.stdout.contains(command))
        }
        #expect(try await CLI.run(["backfill", "--help"]).stdout.contains("--expired-within-days"))
    }

    private func statusJSON(_ env: [String: String]) async throws -> [[String: Any]] {
        let result = try await CLI.run(["status", "--json"], environment: env)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
    }
}

@Suite("renewal check proves the shared secret with a stored receipt")
struct CheckCommandTests {
    @Test("check exits 78 for a wrong shared secret when the database holds a receipt, and writes nothing")
    func wrongSecretCaughtWithStoredReceipt() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cli = RenewalCLITests()
        try await cli.withSimulator { state, env in
            var env = env.merging(["RENEWAL_DATABASE": dir + "/r.sqlite"]) { $1 }
            _ = try await CLI.run(["migrate"], environment: env)
            // Given an empty database, check cannot prove the secret and says so plainly
            let empty = try await CLI.run(["check"], environment: env)
            #expect(empty.status == 0, "\(empty.stderr)")
            #expect(empty.stdout.contains("not confirmed"))
            #expect(empty.stdout.contains("holds no receipt"))

            _ = try await CLI.run(
                ["import", "-"], environment: env,
                stdin: cli.importLines([
                    ("a", SimulatedReceipt(account: "a", scenario: .renewal, start: state.now))
                ]))
            #expect(try await CLI.run(["run"], environment: env).status == 0)
            let before = try await CLI.run(["status", "--json"], environment: env).stdout
            let requests = state.stats.requests

            // When the secret is right, check says Apple accepted it for the stored receipt
            let good = try await CLI.run(
                ["check"], environment: env.merging(["APPSTORE_BUNDLE_ID": "com.example.app"]) { $1 })
            #expect(good.status == 0, "\(good.stderr)")
            #expect(good.stdout.contains("shared secret: accepted by Apple for the stored receipt of user a"))
            #expect(state.lastReceived(account: "a") != nil)
            // The stored receipt to production, and a made-up one to the sandbox URL (every URL a run uses).
            #expect(state.stats.requests == requests + 2)
            #expect(good.stdout.contains("apple sandbox: ok"), "\(good.stdout)")

            // When it is wrong, check fails with 78 although Apple answers
            env["APPSTORE_SHARED_SECRET"] = "not-the-secret"
            let bad = try await CLI.run(["check"], environment: env)
            #expect(bad.status == 78)
            #expect(bad.stderr.contains("21004"))
            #expect(!bad.stderr.contains("not-the-secret") && !bad.stdout.contains("not-the-secret"))
            #expect(bad.stdout.contains("bundle id: not set"))
            // And nothing was written
            #expect(try await CLI.run(["status", "--json"], environment: env).stdout == before)
        }
    }
}
