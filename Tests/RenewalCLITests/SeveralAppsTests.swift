import AppStoreSimulator
import Foundation
import Logging
import RenewalPostgres
import RenewalSQLite

@testable import RenewalSQL
@testable import RenewalStorage
import Testing

/// Several apps in one database (`--apps` / `RENEWAL_APPS_FILE`), through the built binary against
/// the in-process simulator, which holds a different app-specific shared secret for each app and
/// answers 21004 to any other.
@Suite("Several apps in one database (real binary)")
struct SeveralAppsTests {
    static let phone = "com.example.app"
    static let mac = "com.example.mac"
    static let phoneProduct = "com.example.pro.monthly"
    static let macProduct = "com.example.mac.yearly"
    static let secrets = [phone: "phone-app-secret", mac: "mac-app-secret"]

    /// One customer: the user id, the app, the receipt, and whether the import line names the app.
    struct Customer {
        var userID: String
        var app: String
        var receipt: SimulatedReceipt
        var namesApp: Bool
    }

    static func customers(phone phoneCount: Int, mac macCount: Int, unnamed: Int) -> [Customer] {
        let start = Date().addingTimeInterval(-3 * 86_400)
        func make(_ app: String, _ product: String, _ count: Int) -> [Customer] {
            (0..<count).map { n in
                let prefix = app == phone ? "phone" : "mac"
                return Customer(
                    userID: "\(prefix)-user-\(n)", app: app,
                    receipt: SimulatedReceipt(
                        account: "\(prefix)-\(n)-\(UUID().uuidString.prefix(8))", scenario: .renewal, start: start,
                        productID: product, bundle: app == phone ? nil : app),
                    namesApp: n >= unnamed)
            }
        }
        return make(phone, phoneProduct, phoneCount) + make(mac, macProduct, macCount)
    }

    static func importLines(_ customers: [Customer]) -> String {
        customers.map { customer in
            let app = customer.namesApp ? #", "bundle_id": "\#(customer.app)""# : ""
            return #"{"user_id": "\#(customer.userID)", "latest_receipt": "\#(customer.receipt.encoded)"\#(app)}"#
        }.joined(separator: "\n") + "\n"
    }

    /// Writes each app's secret to its own file and the apps file naming them (`secrets` overrides
    /// what the file holds for an app); returns the apps file's path.
    static func writeAppsFile(in directory: String, secrets given: [String: String] = secrets) throws -> String {
        var apps: [[String: Any]] = []
        for (app, product) in [(phone, phoneProduct), (mac, macProduct)] {
            let file = directory + "/\(app).secret"
            try (given[app] ?? "").write(toFile: file, atomically: true, encoding: .utf8)
            apps.append(["bundle_id": app, "shared_secret_file": file, "products": [product]])
        }
        let path = directory + "/apps.json"
        try JSONSerialization.data(withJSONObject: ["apps": apps]).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A fresh database of `backend`, the simulator holding each app's own secret, and the
    /// environment pointing the binary at both (without an apps file).
    static func withSetup(
        _ backend: String,
        _ body: (_ directory: String, _ database: String, SimulatorState, _ environment: [String: String]) async throws
            -> Void
    ) async throws {
        try await withSimulator(
            backend,
            configure: { configuration, _ in
                configuration.appSecrets = secrets
                return [:]
            }, body)
    }

    /// A fresh directory and database of `backend`, and the in-process simulator as `configure` sets it
    /// up (it may write files into the directory and returns variables for the binary), with the
    /// environment pointing the binary at all of its endpoints.
    static func withSimulator(
        _ backend: String,
        configure: (inout SimulatorConfiguration, _ directory: String) throws -> [String: String],
        _ body: (_ directory: String, _ database: String, SimulatorState, _ environment: [String: String]) async throws
            -> Void
    ) async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await StoreKit2ImportTests.database(backend, directory: directory, name: "apps")
        defer { database.drop() }
        let state = SimulatorState()
        var configuration = SimulatorConfiguration(state: state)
        let variables = try configure(&configuration, directory)
        let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })
        try await withAppStoreSimulator(configuration: configuration, logger: quiet) { endpoints in
            let environment = variables.merging([
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
                "APPSTORE_SERVER_API_URL": endpoints.serverAPIURL,
                "APPSTORE_SANDBOX_SERVER_API_URL": endpoints.sandboxServerAPIURL,
            ]) { given, _ in given }
            try await body(directory, database.url, state, environment)
        }
    }

    /// Writes `lines` to `directory/lines.jsonl`, migrates `database` and imports them.
    static func migrateAndImport(_ lines: String, directory: String, database: String) async throws {
        try lines.write(toFile: directory + "/lines.jsonl", atomically: true, encoding: .utf8)
        #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
        let imported = try await CLI.run(["import", directory + "/lines.jsonl", "--database", database])
        #expect(imported.status == 0, "\(imported.stderr)")
    }

    /// `status --json` as user id to (bundle_id, state, last_failure) of its rows.
    static func status(_ database: String, environment: [String: String]) async throws -> [String: [String]] {
        let rows = try await CLI.statusRows(database, environment: environment)
        var byUser: [String: [String]] = [:]
        for row in rows {
            let fields = [
                row["bundle_id"] as? String ?? "nil", row["state"] as? String ?? "nil",
                row["last_failure"] as? String ?? "nil",
            ]
            byUser[row["user_id"] as? String ?? "?", default: []].append(fields.joined(separator: " "))
        }
        return byUser
    }

    static var backends: [String] { StoreKit2ImportTests.backends }

    @Test(
        """
        Two apps with different secrets and products in one database: one run checks both with the right secret \
        each, rows imported without bundle_id are pinned on the first answer, reports and status name the app
        """,
        arguments: backends)
    func twoAppsOneRun(_ backend: String) async throws {
        try await Self.withSetup(backend) { directory, database, state, base in
            var environment = base
            environment["RENEWAL_APPS_FILE"] = try Self.writeAppsFile(in: directory)
            let customers = Self.customers(phone: 7, mac: 7, unnamed: 3)
            try await SeveralAppsTests.migrateAndImport(
                Self.importLines(customers), directory: directory, database: database)

            let run = try await CLI.run(
                [
                    "run", "--database", database, "--report", directory + "/run.json", "--metrics-textfile",
                    directory + "/metrics.prom",
                ], environment: environment)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            // The receipt counters by app, bounded by the apps file.
            let metrics = try String(contentsOfFile: directory + "/metrics.prom", encoding: .utf8)
            for app in [Self.phone, Self.mac] {
                #expect(
                    metrics.contains(#"renewal_receipts_checked_total{command="run",app="\#(app)"} 7"#), "\(metrics)")
            }
            #expect(!metrics.contains(#"app="unknown""#))
            // Each of the 14 receipts once with its own app's secret; the 3 Mac receipts of unknown app
            // were first tried with the iPhone app's secret (the file's first), which Apple refused.
            #expect(state.stats.requests == 14 + 3)
            #expect(!run.stderr.contains("phone-app-secret") && !run.stderr.contains("mac-app-secret"))

            let appOf = Dictionary(uniqueKeysWithValues: customers.map { ($0.userID, $0.app) })
            let report = try ServerAPIMigrationTests.json(directory + "/run.json")
            let changes = try #require(report["changes"] as? [[String: Any]])
            #expect(Set(changes.compactMap { $0["user_id"] as? String }) == Set(appOf.keys))
            for change in changes {
                let user = change["user_id"] as? String ?? ""
                #expect(change["bundle_id"] as? String == appOf[user], "\(change)")
            }
            let status = try await Self.status(database, environment: environment)
            for customer in customers {
                #expect(status[customer.userID] == ["\(customer.app) active nil"], "\(customer.userID)")
            }

            // The dashboard views split by app, and agree with the report.
            let changesByApp = Dictionary(grouping: changes) { $0["bundle_id"] as? String ?? "" }.mapValues(\.count)
            for (view, column) in [
                ("entitlements_by_product", "subscribers"), ("changes_per_day", "changes"),
                ("receipts_by_source", "receipts"),
            ] {
                let sums = try await Self.sumByApp(view: view, column: column, backend: backend, database: database)
                let expected = view == "changes_per_day" ? changesByApp : [Self.phone: 7, Self.mac: 7]
                #expect(sums == expected, "\(view): \(sums)")
            }
            // report --app: only that app's changes.
            let macReport = try await CLI.run(["report", "--app", Self.mac, "--format", "json", "--database", database])
            #expect(macReport.status == 0, "\(macReport.stderr)")
            let macJSON = try #require(
                try JSONSerialization.jsonObject(with: Data(macReport.stdout.utf8)) as? [String: Any])
            let macChanges = macJSON["changes"] as? [[String: Any]] ?? []
            #expect(
                macChanges.count == changesByApp[Self.mac]
                    && macChanges.allSatisfy { $0["bundle_id"] as? String == Self.mac })

            // Pinned now: a backfill asks each receipt once, with its own app's secret only.
            let before = state.stats.requests
            let backfill = try await CLI.run(["backfill", "--all", "--database", database], environment: environment)
            #expect(backfill.status == 0, "\(backfill.stdout)\n\(backfill.stderr)")
            #expect(state.stats.requests - before == 14)
            // backfill --app takes that app's receipts only.
            let macOnly = try await CLI.run(
                ["backfill", "--app", Self.mac, "--database", database], environment: environment)
            #expect(macOnly.status == 0, "\(macOnly.stdout)\n\(macOnly.stderr)")
            #expect(state.stats.requests - before == 14 + 7)
        }
    }

    @Test(
        """
        A rejected secret for one app stops that app's rows only: the other app's run completes, the stopped \
        app's rows stay exactly as they were, and the run exits 5 naming the app
        """,
        arguments: backends)
    func wrongSecretStopsOneApp(_ backend: String) async throws {
        try await Self.withSetup(backend) { directory, database, state, base in
            var environment = base
            environment["RENEWAL_APPS_FILE"] = try Self.writeAppsFile(
                in: directory, secrets: [Self.phone: Self.secrets[Self.phone] ?? "", Self.mac: "an-old-mac-secret"])
            // Every Mac row names its app; two iPhone rows do not.
            let customers = Self.customers(phone: 6, mac: 5, unnamed: 0).map { customer in
                var customer = customer
                if customer.app == Self.phone, customer.userID.hasSuffix("-0") || customer.userID.hasSuffix("-1") {
                    customer.namesApp = false
                }
                return customer
            }
            try await SeveralAppsTests.migrateAndImport(
                Self.importLines(customers), directory: directory, database: database)

            let run = try await CLI.run(
                ["run", "--database", database, "--report", directory + "/run.json", "--concurrency", "2"],
                environment: environment)
            #expect(run.status == 5, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stderr.contains("com.example.mac (shared_secret_rejected)"), "\(run.stderr)")
            #expect(
                run.stdout.contains("completed_apps_stopped") && run.stdout.contains("apps stopped com.example.mac"))
            #expect(!run.stderr.contains("an-old-mac-secret"))
            let report = try ServerAPIMigrationTests.json(directory + "/run.json")
            #expect(report["status"] as? String == "completed_apps_stopped")
            let counts = report["counts"] as? [String: Any] ?? report
            #expect(counts["apps_stopped"] as? [String: String] == [Self.mac: "shared_secret_rejected"], "\(report)")
            let changes = try #require(report["changes"] as? [[String: Any]])
            #expect(Set(changes.compactMap { $0["bundle_id"] as? String }) == [Self.phone])

            let status = try await Self.status(database, environment: environment)
            for customer in customers where customer.app == Self.phone {
                #expect(status[customer.userID] == ["\(Self.phone) active nil"], "\(customer.userID)")
            }
            for customer in customers where customer.app == Self.mac {
                // Untouched: not verified, no failure recorded against the customer.
                #expect(status[customer.userID] == ["\(Self.mac) unverified nil"], "\(customer.userID)")
            }
            // check names the app whose secret Apple rejects, trying each with one of its own receipts.
            let check = try await CLI.run(["check", "--database", database], environment: environment)
            #expect(check.status == 78, "\(check.stdout)\n\(check.stderr)")
            #expect(
                check.stderr.contains("com.example.mac: Apple rejected the shared secret (21004)"), "\(check.stderr)")
            #expect(check.stdout.contains("app com.example.app:\nshared secret: read from its file"), "\(check.stdout)")
            #expect(!check.stderr.contains("an-old-mac-secret") && !check.stdout.contains("an-old-mac-secret"))

            // With the Mac app's secret fixed, check passes and the next run checks its rows.
            environment["RENEWAL_APPS_FILE"] = try Self.writeAppsFile(in: directory)
            let fixedCheck = try await CLI.run(["check", "--database", database], environment: environment)
            #expect(fixedCheck.status == 0, "\(fixedCheck.stdout)\n\(fixedCheck.stderr)")
            #expect(fixedCheck.stdout.components(separatedBy: "shared secret: accepted by Apple").count == 3)
            let fixed = try await CLI.run(["run", "--database", database], environment: environment)
            #expect(fixed.status == 0, "\(fixed.stdout)\n\(fixed.stderr)")
            let after = try await Self.status(database, environment: environment)
            for customer in customers {
                #expect(after[customer.userID] == ["\(customer.app) active nil"], "\(customer.userID)")
            }
            _ = state
        }
    }

    @Test(
        """
        Each app has its own circuit breaker: Apple failing for one app's receipts stops that app \
        (apple_unavailable, exit 5) and the other app's receipts are still checked; failing for every app \
        aborts the run (exit 4)
        """)
    func breakerPerApp() async throws {
        try await Self.withSetup("sqlite") { directory, database, state, base in
            var environment = base
            environment["RENEWAL_APPS_FILE"] = try Self.writeAppsFile(in: directory)
            // The Mac rows first in the due order: a breaker shared by both apps would stop the run
            // before any iPhone row was asked.
            let customers = Self.customers(phone: 4, mac: 6, unnamed: 0)
            let ordered = customers.filter { $0.app == Self.mac } + customers.filter { $0.app == Self.phone }
            for customer in ordered where customer.app == Self.mac {
                state.script(
                    account: customer.receipt.account,
                    SimulatorState.ScriptedAnswer(httpStatus: 503, contentType: "text/html", body: "<html>busy</html>"))
            }
            try await SeveralAppsTests.migrateAndImport(
                Self.importLines(ordered), directory: directory, database: database)
            let arguments = [
                "run", "--database", database, "--concurrency", "1", "--max-attempts", "1", "--breaker-threshold", "3",
                "--report", directory + "/run.json",
            ]
            let run = try await CLI.run(arguments, environment: environment)
            #expect(run.status == 5, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stderr.contains("com.example.mac (apple_unavailable)"), "\(run.stderr)")
            let report = try ServerAPIMigrationTests.json(directory + "/run.json")
            let counts = report["counts"] as? [String: Any] ?? [:]
            #expect(counts["apps_stopped"] as? [String: String] == [Self.mac: "apple_unavailable"], "\(counts)")
            // The three outages that opened the Mac app's breaker are recorded; its other rows untouched.
            let failures = report["failures"] as? [[String: Any]] ?? []
            #expect(
                failures.count == 3 && failures.allSatisfy { $0["bundle_id"] as? String == Self.mac }, "\(failures)")
            let status = try await Self.status(database, environment: environment)
            for customer in ordered where customer.app == Self.phone {
                #expect(status[customer.userID] == ["\(Self.phone) active nil"], "\(customer.userID)")
            }
            for customer in ordered where customer.app == Self.mac {
                #expect(
                    status[customer.userID]?.first?.hasPrefix("\(Self.mac) unverified") == true, "\(customer.userID)")
            }

            // Apple failing for every app: the run aborts as before.
            for customer in ordered where customer.app == Self.phone {
                state.script(
                    account: customer.receipt.account,
                    SimulatorState.ScriptedAnswer(httpStatus: 503, contentType: "text/html", body: "<html>busy</html>"))
            }
            let everyone = try await CLI.run(
                ["backfill", "--all"] + arguments.dropFirst().dropLast(2), environment: environment)
            #expect(everyone.status == 4, "\(everyone.stdout)\n\(everyone.stderr)")
        }
    }

    @Test("every app's secret rejected: the run aborts as with one app (exit 78) and writes nothing")
    func everyAppRejected() async throws {
        try await Self.withSetup("sqlite") { directory, database, state, base in
            var environment = base
            environment["RENEWAL_APPS_FILE"] = try Self.writeAppsFile(
                in: directory, secrets: [Self.phone: "wrong-1", Self.mac: "wrong-2"])
            let customers = Self.customers(phone: 2, mac: 2, unnamed: 0)
            try await SeveralAppsTests.migrateAndImport(
                Self.importLines(customers), directory: directory, database: database)
            let run = try await CLI.run(
                ["run", "--database", database, "--concurrency", "1"], environment: environment)
            #expect(run.status == 78, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stderr.contains("every app in the apps file"), "\(run.stderr)")
            let status = try await Self.status(database, environment: environment)
            #expect(status.values.allSatisfy { $0.allSatisfy { $0.hasSuffix(" unverified nil") } }, "\(status)")
            _ = state
        }
    }

    @Test(
        """
        A line giving a user's receipt of another app than the user's stored one is refused, named with its line \
        and the fix, and changes nothing
        """,
        arguments: backends)
    func oneReceiptPerUser(_ backend: String) async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await StoreKit2ImportTests.database(backend, directory: directory, name: "users")
        defer { database.drop() }
        let customers = Self.customers(phone: 1, mac: 1, unnamed: 0)
        let phoneLine = Self.importLines([customers[0]])
        var macCustomer = customers[1]
        macCustomer.userID = customers[0].userID
        #expect(try await CLI.run(["migrate", "--database", database.url]).status == 0)
        #expect(try await CLI.run(["import", "-", "--database", database.url], stdin: phoneLine).status == 0)
        let second = try await CLI.run(
            ["import", "-", "--database", database.url], stdin: phoneLine + Self.importLines([macCustomer]))
        #expect(second.status == 3, "\(second.stderr)")
        #expect(
            second.stderr.contains("line 2: user \(macCustomer.userID) already has a receipt of another app"),
            "\(second.stderr)")
        #expect(second.stdout.contains("1 unchanged, 1 rejected"), "\(second.stdout)")
        let status = try await Self.status(database.url, environment: [:])
        #expect(status[macCustomer.userID] == ["\(Self.phone) unverified nil"])
    }

    @Test(
        """
        A bad apps file is a configuration error naming the entry and the fix; a secret written into the file \
        is refused and never printed
        """)
    func badAppsFile() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try await CLI.run(["migrate", "--database", directory + "/db.sqlite"]).status == 0)
        let cases: [(String, String)] = [
            (#"{"apps": [{"bundle_id": "com.example.app", "shared_secret": "inline-secret-123"}]}"#, "own file"),
            (#"{"apps": [{"bundle_id": "com.example.app"}]}"#, "has no credentials"),
            (#"{"apps": [{"bundle_id": "com.example.app", "key_id": "K"}]}"#, "issuer_id, private_key_file"),
            (#"{"apps": []}"#, "lists no app"),
            (#"{"apps": [{"bundle_id": "com.example.app", "shared_secret_file": "/nonexistent"}]}"#, "/nonexistent"),
            ("not json", "\"apps\" array"),
        ]
        for (text, expected) in cases {
            try text.write(toFile: directory + "/apps.json", atomically: true, encoding: .utf8)
            let result = try await CLI.run(
                ["run", "--database", directory + "/db.sqlite", "--apps", directory + "/apps.json"])
            #expect(result.status == 78, "\(text): \(result.stderr)")
            #expect(result.stderr.contains(expected), "\(text): \(result.stderr)")
            #expect(!result.stderr.contains("inline-secret-123"))
        }
    }

    @Test(
        """
        A single-app database of schema 9 (before several apps) migrates and runs unchanged with the one-app \
        settings; its rows learn their app from Apple's answer
        """,
        arguments: backends)
    func migratesFromSchemaNine(_ backend: String) async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await StoreKit2ImportTests.database(backend, directory: directory, name: "old")
        defer { database.drop() }
        let receipt = SimulatedReceipt(
            account: "old-\(UUID().uuidString.prefix(8))", scenario: .renewal,
            start: Date().addingTimeInterval(-3 * 86_400))
        // The database as the previous release left it: schema 9 and a row its import wrote.
        let store: any SubscriptionStore
        if backend == "postgres" {
            let postgres = try PostgresSubscriptionStore.open(url: database.url)
            #expect(try await postgres.migrate(through: 9) == Array(1...9))
            try await postgres.database.withConnection { try Self.insertOldRow(receipt, on: $0) }
            store = postgres
        } else {
            let sqlite = try SQLiteSubscriptionStore.open(path: database.url, create: true)
            #expect(try await sqlite.migrate(through: 9) == Array(1...9))
            try await sqlite.database.withConnection { try Self.insertOldRow(receipt, on: $0) }
            store = sqlite
        }
        _ = store
        let old = try await CLI.run(["status", "--database", database.url])
        #expect(old.status == 78 && old.stderr.contains("renewal migrate"), "\(old.stderr)")

        try await CLI.withDirectoryAndSimulator(secret: "old-secret") { _, _, _, endpoints in
            let environment = [
                "APPSTORE_SHARED_SECRET": "old-secret", "APPSTORE_BUNDLE_ID": SimulatedReceipt.bundleID,
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
            ]
            let migrated = try await CLI.run(["migrate", "--database", database.url])
            #expect(migrated.status == 0, "\(migrated.stderr)")
            let run = try await CLI.run(
                ["run", "--database", database.url, "--report", directory + "/run.json"], environment: environment)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let status = try await Self.status(database.url, environment: environment)
            #expect(status["old-user"] == ["\(SimulatedReceipt.bundleID) active nil"])
            let report = try ServerAPIMigrationTests.json(directory + "/run.json")
            let changes = report["changes"] as? [[String: Any]] ?? []
            #expect(!changes.isEmpty && changes.allSatisfy { $0["bundle_id"] as? String == SimulatedReceipt.bundleID })
        }
    }

    /// One text column of every row `sql` returns (NULL as "NULL").
    static func strings(_ sql: String, backend: String, database: String) async throws -> [String] {
        let read: @Sendable (any SQLConnection) throws -> [String] = { connection in
            try connection.execute(sql, []).map { row in try row.optionalText("value") ?? "NULL" }
        }
        if backend == "postgres" {
            return try await PostgresSubscriptionStore.open(url: database).database.withConnection(read)
        }
        return try await SQLiteSubscriptionStore.open(path: database, create: false).database.withConnection(read)
    }

    /// `SUM(column)` of a dashboard view by its `bundle_id`.
    static func sumByApp(view: String, column: String, backend: String, database: String) async throws -> [String: Int]
    {
        let sql = "SELECT bundle_id, SUM(\(column)) AS n FROM \(view) GROUP BY bundle_id"
        let read: @Sendable (any SQLConnection) throws -> [String: Int] = { connection in
            var sums: [String: Int] = [:]
            for row in try connection.execute(sql, []) {
                sums[try row.optionalText("bundle_id") ?? "NULL"] = try row.int("n")
            }
            return sums
        }
        if backend == "postgres" {
            return try await PostgresSubscriptionStore.open(url: database).database.withConnection(read)
        }
        return try await SQLiteSubscriptionStore.open(path: database, create: false).database.withConnection(read)
    }

    /// A receipt row as schema 9's `import` wrote it.
    static func insertOldRow(_ receipt: SimulatedReceipt, on connection: any SQLConnection) throws {
        _ = try connection.execute(
            """
            INSERT INTO receipts (user_id, latest_receipt, status, next_check_at, consecutive_failures,
                consecutive_malformed, created_at, updated_at)
            VALUES ($1, $2, 'unverified', $3, 0, 0, $3, $3)
            """,
            [.text("old-user"), .text(receipt.encoded), .int64(Int64(Date().timeIntervalSince1970 * 1000))])
    }
}
