import AppStoreSimulator
import Foundation
import Testing

/// What a new user tripped over, each through the real binary: test traffic that reached Apple, files
/// readable by everyone, messages that misled and help that left things out.
@Suite("What a new user tripped over")
struct NewUserFixesTests {
    static let secret = "new-user-secret-5f1e"

    @Test(
        """
        one URL of a production/sandbox pair set without its sibling: run, backfill, check and deliver refuse \
        with exit 78 and name the sibling; nothing is written
        """
    )
    func halfOverriddenPairsRefused() async throws {
        try await CLI.withDirectoryAndSimulator(secret: Self.secret) { directory, state, _, endpoints in
            let database = directory + "/renewal.sqlite"
            let base = ["RENEWAL_DATABASE": database, "APPSTORE_SHARED_SECRET": Self.secret]
            #expect(try await CLI.run(["migrate"], environment: base).status == 0)
            let receipt = SimulatedReceipt(
                account: "ann", scenario: .renewal, start: state.now.addingTimeInterval(-86_400))
            let lines = #"{"user_id": "ann", "latest_receipt": "\#(receipt.encoded)"}"# + "\n"
            #expect(try await CLI.run(["import", "-"], environment: base, stdin: lines).status == 0)

            let halves: [(arguments: [String], environment: [String: String], sibling: String)] = [
                ([], ["APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL], "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL"),
                (["--production-url", endpoints.productionURL], [:], "--sandbox-url"),
                (["--sandbox-url", endpoints.sandboxURL], [:], "APPSTORE_VERIFY_RECEIPT_URL"),
                ([], ["APPSTORE_SERVER_API_URL": "http://127.0.0.1:9/"], "APPSTORE_SANDBOX_SERVER_API_URL"),
            ]
            for half in halves {
                // The verifyReceipt pair whole, unless this case breaks it.
                var environment = base
                if !half.sibling.contains("VERIFY_RECEIPT") && !half.sibling.contains("-url") {
                    environment["APPSTORE_VERIFY_RECEIPT_URL"] = endpoints.productionURL
                    environment["APPSTORE_SANDBOX_VERIFY_RECEIPT_URL"] = endpoints.sandboxURL
                }
                environment.merge(half.environment) { $1 }
                for command in [["run"], ["backfill", "--all"], ["check"]] {
                    let result = try await CLI.run(command + half.arguments, environment: environment)
                    #expect(result.status == 78, "\(command) \(half): exit \(result.status) \(result.stderr)")
                    #expect(result.stderr.contains(half.sibling), "\(command): \(result.stderr)")
                    #expect(!result.stderr.contains(Self.secret))
                }
                if half.arguments.isEmpty {
                    var deliver = environment
                    deliver["RENEWAL_WEBHOOK_URL"] = "http://127.0.0.1:9/hook"
                    let result = try await CLI.run(["deliver"], environment: deliver)
                    #expect(result.status == 78, "deliver \(half): exit \(result.status) \(result.stderr)")
                    #expect(result.stderr.contains(half.sibling), "deliver: \(result.stderr)")
                }
            }
            // Nothing was checked: the receipt is still unverified and no run was recorded.
            let rows = try await CLI.statusRows(database, environment: base)
            #expect(rows.map { $0["state"] as? String } == ["unverified"])

            // Both set: check asks each URL it would use, the sandbox's too.
            var whole = base
            whole["APPSTORE_VERIFY_RECEIPT_URL"] = endpoints.productionURL
            whole["APPSTORE_SANDBOX_VERIFY_RECEIPT_URL"] = endpoints.sandboxURL
            let check = try await CLI.run(["check"], environment: whole)
            #expect(check.status == 0, "\(check.stderr)")
            #expect(check.stdout.contains("apple: ok (\(endpoints.productionURL) answers)"), "\(check.stdout)")
            #expect(check.stdout.contains("apple sandbox: ok (\(endpoints.sandboxURL) answers)"), "\(check.stdout)")

            // A sandbox URL nobody answers at: check says so instead of "ok".
            whole["APPSTORE_SANDBOX_VERIFY_RECEIPT_URL"] = "http://127.0.0.1:9/verifyReceipt"
            let unreachable = try await CLI.run(["check", "--timeout", "2", "--max-attempts", "1"], environment: whole)
            #expect(unreachable.status == 4, "\(unreachable.stdout) \(unreachable.stderr)")
            #expect(unreachable.stderr.contains("apple sandbox"), "\(unreachable.stderr)")
        }
    }

    @Test("the SQLite database, its -wal and -shm, reports and metrics files are created readable by the owner only")
    func ownerOnlyFiles() async throws {
        try await CLI.withDirectoryAndSimulator(secret: Self.secret) { directory, state, _, endpoints in
            let database = directory + "/renewal.sqlite"
            let environment = [
                "RENEWAL_DATABASE": database, "APPSTORE_SHARED_SECRET": Self.secret,
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
            ]
            #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
            let receipt = SimulatedReceipt(
                account: "ann", scenario: .renewal, start: state.now.addingTimeInterval(-86_400))
            let lines = #"{"user_id": "ann", "latest_receipt": "\#(receipt.encoded)"}"# + "\n"
            #expect(try await CLI.run(["import", "-"], environment: environment, stdin: lines).status == 0)
            let run = try await CLI.run(
                [
                    "run", "--report", directory + "/report.json", "--report-html", directory + "/report.html",
                    "--metrics-textfile", directory + "/renewal.prom",
                ], environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
            let report = try await CLI.run(
                ["report", "--since", "2000-01-01", "--format", "csv", "--output", directory + "/changes.csv"],
                environment: environment)
            #expect(report.status == 0, "\(report.stderr)")
            var files = ["renewal.sqlite", "report.json", "report.html", "renewal.prom", "changes.csv"]
            // The -wal and -shm files exist while a connection is open: checked while one is.
            let store = try FileManager.default.contentsOfDirectory(atPath: directory)
            files += store.filter { $0.hasSuffix("-wal") || $0.hasSuffix("-shm") }
            for file in files {
                let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/" + file)
                let mode = (attributes?[.posixPermissions] as? NSNumber)?.intValue
                #expect(mode != nil, "\(file) was not written")
                #expect((mode ?? 0) & 0o077 == 0, "\(file) has mode \(String((mode ?? 0) & 0o777, radix: 8))")
            }
        }
    }

    @Test("status --user names a user with no receipt instead of saying the database is empty")
    func statusOfUnknownUser() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = ["RENEWAL_DATABASE": directory + "/renewal.sqlite"]
        #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
        let lines = #"{"user_id": "ann", "latest_receipt": "TUlJQmV4YW1wbGU="}"# + "\n"
        #expect(try await CLI.run(["import", "-"], environment: environment, stdin: lines).status == 0)
        let nobody = try await CLI.run(["status", "--user", "nobody"], environment: environment)
        #expect(nobody.status == 0)
        #expect(nobody.stdout.contains("nobody has no receipt"), "\(nobody.stdout)")
        #expect(!nobody.stdout.contains("Load some"), "\(nobody.stdout)")
    }

    @Test(
        """
        --version; every command's --help names the environment variables it reads, credentials included; a \
        secret given as a flag is refused with the variable to use
        """
    )
    func helpAndSecrets() async throws {
        let version = try await CLI.run(["--version"])
        #expect(version.status == 0)
        #expect(
            version.stdout.range(of: #"^\d+\.\d+\.\d+ \(database schema \d+\)$"#, options: .regularExpression) != nil
                || version.stdout.split(separator: "\n").first.map { $0.contains("database schema") } == true,
            "\(version.stdout)")

        let apple = [
            "APPSTORE_SHARED_SECRET", "APPSTORE_SHARED_SECRET_FILE", "APPSTORE_KEY_ID", "APPSTORE_ISSUER_ID",
            "APPSTORE_PRIVATE_KEY_FILE", "APPSTORE_ROOT_CERTIFICATES", "APPSTORE_BUNDLE_ID",
            "APPSTORE_VERIFY_RECEIPT_URL", "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL", "APPSTORE_SERVER_API_URL",
            "APPSTORE_SANDBOX_SERVER_API_URL", "RENEWAL_APPS_FILE", "RENEWAL_SOURCE",
        ]
        let database = ["RENEWAL_DATABASE", "PGPASSWORD", "RENEWAL_LOG_LEVEL"]
        let webhook = ["RENEWAL_WEBHOOK_URL", "RENEWAL_WEBHOOK_SECRET_FILE"]
        let expected: [String: [String]] = [
            "run": database + apple + webhook + ["RENEWAL_PUSHGATEWAY_URL"],
            "backfill": database + apple + webhook + ["RENEWAL_PUSHGATEWAY_URL"],
            "check": database + apple + webhook,
            "deliver": database + webhook + ["RENEWAL_PUSHGATEWAY_URL"],
            "import": database + ["APPSTORE_BUNDLE_ID"],
            "migrate": database, "status": database, "report": database, "copy-database": ["PGPASSWORD", "RENEWAL_LOG_LEVEL"],
        ]
        for (command, variables) in expected {
            let help = try await CLI.run([command, "--help"])
            // ArgumentParser wraps long lines: compare without line breaks and indentation.
            let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            for variable in variables {
                #expect(text.contains(variable), "renewal \(command) --help does not name \(variable)")
            }
        }

        for (flag, variable) in [
            ("--shared-secret", "APPSTORE_SHARED_SECRET_FILE"), ("--shared-secret=x", "APPSTORE_SHARED_SECRET"),
            ("--private-key", "APPSTORE_PRIVATE_KEY_FILE"), ("--webhook-secret", "RENEWAL_WEBHOOK_SECRET_FILE"),
        ] {
            let result = try await CLI.run(["run", flag, "hunter2-value"])
            #expect(result.status == 64, "\(flag): exit \(result.status)")
            #expect(result.stderr.contains("never taken on the command line"), "\(flag): \(result.stderr)")
            #expect(result.stderr.contains(variable), "\(flag): \(result.stderr)")
            #expect(!result.stderr.contains("hunter2"), "\(flag) echoed its value")
        }
    }
}
