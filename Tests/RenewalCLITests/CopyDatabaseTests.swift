import AppStoreSimulator
import Foundation
import Logging
import Testing

/// `renewal copy-database FROM TO` through the built binary: a SQLite database filled by real imports
/// and runs against the simulator is copied to PostgreSQL and back, and the copies answer `status`,
/// `report` and `deliver --status` exactly as the original, and their next run does what the
/// original's would.
@Suite(
    "copy-database: SQLite to PostgreSQL and back (real binary)",
    .enabled(
        if: PostgresKillEnvironment.baseURL != nil && PostgresKillTests.psqlPath != nil,
        "RENEWAL_TEST_POSTGRES_URL is not set, or psql is missing"))
struct CopyDatabaseTests {
    static let secret = "copy-database-secret"

    /// Scenarios with changes of every kind, failures, and receipts left due.
    /// Imported in this order, so the first run (15 of 22) meets both failures and leaves 7 due.
    static let scenarios: [Scenario] = [
        .renewal, .outage, .refund, .malformed, .billingRetry, .gracePeriod, .voluntaryExpiry, .sandbox,
        .familyShared, .upgrade, .multipleSubscriptions,
    ]

    /// The simulator, a directory, and an environment pointing the binary at both, with a webhook
    /// URL nobody answers (so the outbox holds queued changes) and its secret.
    static func withSetup(
        _ body: (_ directory: String, SimulatorState, _ environment: [String: String]) async throws -> Void
    ) async throws {
        try await CLI.withDirectoryAndSimulator(secret: secret) { directory, state, _, endpoints in
            let webhookSecret = directory + "/webhook-secret"
            try ("whsec_" + Data((0..<32).map { UInt8($0) }).base64EncodedString()).write(
                toFile: webhookSecret, atomically: true, encoding: .utf8)
            let environment = [
                "APPSTORE_SHARED_SECRET": secret, "APPSTORE_BUNDLE_ID": SimulatedReceipt.bundleID,
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
                "RENEWAL_WEBHOOK_URL": "http://127.0.0.1:9/hooks", "RENEWAL_WEBHOOK_SECRET_FILE": webhookSecret,
            ]
            try await body(directory, state, environment)
        }
    }

    /// Two customers per scenario, imported into `database`, then one run over part of them: the
    /// database then holds changes, failures, a run, queued webhooks, and receipts still due.
    static func populate(_ database: String, directory: String, environment: [String: String]) async throws {
        let start = Date().addingTimeInterval(-40 * 86_400)
        var lines: [String] = []
        for (index, scenario) in scenarios.enumerated() {
            for copy in 0..<2 {
                let receipt = SimulatedReceipt(
                    account: "copy-\(index)-\(copy)-\(UUID().uuidString.prefix(8))", scenario: scenario,
                    start: start.addingTimeInterval(Double(copy) * 86_400))
                lines.append(
                    #"{"user_id": "u-\#(scenario.rawValue)-\#(copy)", "latest_receipt": "\#(receipt.encoded)"}"#)
            }
        }
        try await SeveralAppsTests.migrateAndImport(
            lines.joined(separator: "\n") + "\n", directory: directory, database: database)
        let run = try await CLI.run(
            [
                "run", "--database", database, "--limit", "15", "--max-attempts", "1", "--webhook-seconds", "0",
                "--report", directory + "/first.json",
            ], environment: environment)
        #expect(run.status == 3, "\(run.stdout)\n\(run.stderr)")
    }

    /// What an operator reads from `database`: `status` (JSON and table), the last run's report in
    /// three formats and every run's, and the webhook outbox's state (without the age of its oldest
    /// entry, which grows with the clock). `reports: false` for a database that holds no run.
    static func answers(_ database: String, environment: [String: String], reports: Bool = true) async throws
        -> [String: String]
    {
        var answers: [String: String] = [:]
        var commands: [String: [String]] = [
            "status --json": ["status", "--json"],
            "status": ["status"],
            "deliver --status": ["deliver", "--status", "--json"],
        ]
        if reports {
            commands["report json"] = ["report", "--format", "json"]
            commands["report csv"] = ["report", "--format", "csv"]
            commands["report table"] = ["report", "--format", "table"]
            commands["report range"] = ["report", "--format", "json", "--since", "2000-01-01"]
        }
        for (name, arguments) in commands {
            let result = try await CLI.run(arguments + ["--database", database], environment: environment)
            #expect(result.status == 0, "\(name) on \(database): \(result.stderr)")
            answers[name] = result.stdout
        }
        if let outbox = answers["deliver --status"],
            var object = try JSONSerialization.jsonObject(with: Data(outbox.utf8)) as? [String: Any]
        {
            object["oldest_undelivered_seconds"] = nil
            answers["deliver --status"] = String(
                decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        }
        return answers
    }

    /// Every row of the dashboard views whose answer does not depend on the clock, as text, sorted.
    static func views(_ database: String) async throws -> [String: [String]] {
        let backend = database.hasPrefix("postgres") ? "postgres" : "sqlite"
        var views: [String: [String]] = [:]
        let columns: [String: String] = [
            "entitlements_by_product":
                "bundle_id, product_id, environment, ownership_type, state, entitled, subscribers",
            "changes_per_day": "bundle_id, day, kind, product_id, environment, changes",
            "refunds_per_day": "bundle_id, day, product_id, environment, refunds",
            "failures_by_reason": "bundle_id, day, reason, failures, receipts",
            "receipts_by_source": "bundle_id, source, environment, status, receipts, with_transaction_id, migrated",
        ]
        for (view, list) in columns {
            let concatenated = list.split(separator: ",").map {
                "COALESCE(CAST(\($0.trimmingCharacters(in: .whitespaces)) AS TEXT), 'NULL')"
            }.joined(separator: " || '|' || ")
            views[view] = try await SeveralAppsTests.strings(
                "SELECT \(concatenated) AS value FROM \(view)", backend: backend, database: database
            ).sorted()
        }
        return views
    }

    /// `status --json` without the times a check sets (they differ by the seconds between two runs).
    static func statusWithoutCheckTimes(_ database: String, environment: [String: String]) async throws
        -> [String: [String]]
    {
        try await StoreKit2ImportTests.status(database, environment: environment)
    }

    /// A fresh PostgreSQL schema; its URL and how to drop it.
    static func postgres(_ directory: String, _ name: String) async throws -> StoreKit2ImportTests.Database {
        try await StoreKit2ImportTests.database("postgres", directory: directory, name: name)
    }

    @Test(
        """
        SQLite copied to PostgreSQL answers status, report and deliver --status exactly as the original, with \
        the same dashboard views; the next run on the copy checks exactly the receipts the original's would, \
        and the copy copied back to SQLite answers the same again
        """)
    func sqliteToPostgresAndBack() async throws {
        try await Self.withSetup { directory, state, environment in
            let sqlite = directory + "/source.sqlite"
            try await Self.populate(sqlite, directory: directory, environment: environment)
            let postgres = try await Self.postgres(directory, "copy")
            defer { postgres.drop() }

            let copied = try await CLI.run(
                ["copy-database", sqlite, postgres.url, "--batch-size", "7"], environment: environment)
            #expect(copied.status == 0, "\(copied.stdout)\n\(copied.stderr)")
            #expect(copied.stdout.contains("receipts 22"), "\(copied.stdout)")
            #expect(copied.stdout.contains("Applied") || copied.stdout.contains("applied"), "\(copied.stdout)")

            let original = try await Self.answers(sqlite, environment: environment)
            let onPostgres = try await Self.answers(postgres.url, environment: environment)
            for (name, answer) in original {
                #expect(onPostgres[name] == answer, "\(name) differs after the copy to PostgreSQL")
            }
            #expect(original["report json"]?.contains("\"changes\"") == true)
            #expect(
                original["deliver --status"]?.contains("\"pending\"") == true, "\(original["deliver --status"] ?? "")")
            #expect(try await Self.views(postgres.url) == Self.views(sqlite))

            // Back to SQLite: the same answers again.
            let back = directory + "/back.sqlite"
            let returned = try await CLI.run(["copy-database", postgres.url, back], environment: environment)
            #expect(returned.status == 0, "\(returned.stdout)\n\(returned.stderr)")
            let onBack = try await Self.answers(back, environment: environment)
            for (name, answer) in original {
                #expect(onBack[name] == answer, "\(name) differs after the copy back to SQLite")
            }

            // The next run: the copy checks exactly what the original checks (the receipts the first
            // run left due), no more, and both end in the same states.
            var checked: [String: (requests: Int, report: [String: Any])] = [:]
            for (name, database) in [("postgres", postgres.url), ("sqlite", sqlite), ("back", back)] {
                let before = state.stats.requests
                let run = try await CLI.run(
                    [
                        "run", "--database", database, "--max-attempts", "1", "--webhook-seconds", "0", "--report",
                        directory + "/\(name).json",
                    ], environment: environment)
                #expect([0, 3].contains(run.status), "\(name): \(run.stdout)\n\(run.stderr)")
                checked[name] = (
                    state.stats.requests - before, try ServerAPIMigrationTests.json(directory + "/\(name).json")
                )
            }
            let expected = try #require(checked["sqlite"])
            let counts = expected.report["counts"] as? [String: Any] ?? [:]
            #expect((counts["checked"] as? Int ?? 0) > 0, "the first run left nothing due: \(counts)")
            for name in ["postgres", "back"] {
                let copy = try #require(checked[name])
                #expect(
                    copy.requests == expected.requests,
                    "\(name) asked Apple \(copy.requests) times, the original \(expected.requests)")
                let copyCounts = copy.report["counts"] as? [String: Any] ?? [:]
                for key in ["checked", "changed", "unchanged", "failed", "due_at_start"] {
                    #expect("\(copyCounts[key] ?? "nil")" == "\(counts[key] ?? "nil")", "\(name) \(key)")
                }
                #expect(
                    try StoreKit2ImportTests.changes(directory + "/\(name).json")
                        == StoreKit2ImportTests.changes(directory + "/sqlite.json"))
            }
            let finalStatus = try await Self.statusWithoutCheckTimes(sqlite, environment: environment)
            #expect(try await Self.statusWithoutCheckTimes(postgres.url, environment: environment) == finalStatus)
            #expect(try await Self.statusWithoutCheckTimes(back, environment: environment) == finalStatus)
        }
    }

    @Test(
        """
        A target that holds receipts is refused with exit 78 naming it (password redacted) and the fix, and is \
        left unchanged; so is a source that is not migrated
        """)
    func refusals() async throws {
        try await Self.withSetup { directory, _, environment in
            let sqlite = directory + "/source.sqlite"
            try await Self.populate(sqlite, directory: directory, environment: environment)
            let postgres = try await Self.postgres(directory, "occupied")
            defer { postgres.drop() }
            let other = directory + "/other.sqlite"
            let line = #"{"user_id": "already-here", "latest_receipt": "QUJD"}"# + "\n"
            for target in [postgres.url, other] {
                #expect(try await CLI.run(["migrate", "--database", target]).status == 0)
                #expect(try await CLI.run(["import", "-", "--database", target], stdin: line).status == 0)
                let before = try await Self.answers(target, environment: environment, reports: false)
                // A password in the URL must never be printed.
                let shown = target.replacingOccurrences(of: "postgres@", with: "postgres:hunter2-secret@")
                let refused = try await CLI.run(["copy-database", sqlite, shown], environment: environment)
                #expect(refused.status == 78, "\(refused.stdout)\n\(refused.stderr)")
                #expect(refused.stderr.contains("already holds rows in receipts"), "\(refused.stderr)")
                #expect(refused.stderr.contains("empty database"), "\(refused.stderr)")
                #expect(!refused.stderr.contains("hunter2-secret") && !refused.stdout.contains("hunter2-secret"))
                if target == postgres.url {
                    #expect(refused.stderr.contains("postgres:***@"), "\(refused.stderr)")
                } else {
                    #expect(refused.stderr.contains(other), "\(refused.stderr)")
                }
                #expect(try await Self.answers(target, environment: environment, reports: false) == before)
            }

            // A source behind this build's schema: nothing is written to the target.
            let old = directory + "/old.sqlite"
            #expect(try await CLI.run(["migrate", "--database", old]).status == 0)
            _ = try await SeveralAppsTests.strings(
                "DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations) RETURNING 'x' AS value", backend: "sqlite",
                database: old)
            let fresh = directory + "/fresh.sqlite"
            let behind = try await CLI.run(["copy-database", old, fresh], environment: environment)
            #expect(behind.status == 78, "\(behind.stderr)")
            #expect(behind.stderr.contains("run `renewal migrate` on the source"), "\(behind.stderr)")
            let missing = try await CLI.run(["copy-database", directory + "/nothing.sqlite", fresh])
            #expect(missing.status == 78 && missing.stderr.contains("does not exist"), "\(missing.stderr)")
        }
    }
}
