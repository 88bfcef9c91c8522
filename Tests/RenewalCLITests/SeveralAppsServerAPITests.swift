import AppStoreSimulator
import Crypto
import Foundation
import Logging
import RenewalCore
import RenewalServerAPI
import Testing

/// Several apps on the App Store Server API: each app's own key and bundle in its token, a refused
/// key stopping its app only, and each app's own rate budget shared by a fleet of workers.
@Suite("Several apps on the App Store Server API (real binary)")
struct SeveralAppsServerAPITests {
    static let phone = SeveralAppsTests.phone
    static let mac = SeveralAppsTests.mac

    /// The in-process simulator answering for both apps, the iPhone app's key and a second key for
    /// the Mac app, and an apps file naming each app's key (`macKeyAccepted` false: the Mac app's
    /// key is one the simulator does not know, as after a revoked key).
    static func withApps(
        _ backend: String, macKeyAccepted: Bool,
        _ body: (_ directory: String, _ database: String, SimulatorState, _ environment: [String: String]) async throws
            -> Void
    ) async throws {
        try await SeveralAppsTests.withSimulator(
            backend,
            configure: { configuration, directory in
                var serverAPI = try #require(configuration.serverAPI)
                let macKey = P256.Signing.PrivateKey()
                if macKeyAccepted { serverAPI.otherKeys["SIMKEY0002"] = macKey.publicKey }
                serverAPI.bundleIDs = [phone, mac]
                configuration.serverAPI = serverAPI
                try serverAPI.privateKeyPEM.write(toFile: directory + "/phone.p8", atomically: true, encoding: .utf8)
                try macKey.pemRepresentation.write(toFile: directory + "/mac.p8", atomically: true, encoding: .utf8)
                try serverAPI.chain.rootPEM().write(toFile: directory + "/root.pem", atomically: true, encoding: .utf8)
                let apps: [[String: Any]] = [
                    [
                        "bundle_id": phone, "key_id": serverAPI.keyID, "issuer_id": serverAPI.issuerID,
                        "private_key_file": directory + "/phone.p8",
                    ],
                    [
                        "bundle_id": mac, "key_id": "SIMKEY0002", "issuer_id": serverAPI.issuerID,
                        "private_key_file": directory + "/mac.p8",
                    ],
                ]
                try JSONSerialization.data(withJSONObject: ["apps": apps]).write(
                    to: URL(fileURLWithPath: directory + "/apps.json"))
                return [
                    "RENEWAL_APPS_FILE": directory + "/apps.json",
                    "APPSTORE_ROOT_CERTIFICATES": directory + "/root.pem",
                ]
            }, body)
    }

    /// StoreKit 2 rows (a transaction id, no receipt) of both apps, registered with the simulator;
    /// rows whose number is below `unnamed` do not name their app.
    static func storeKit2Rows(_ state: SimulatorState, perApp: Int, unnamed: Int) -> (
        lines: String, appOf: [String: String]
    ) {
        var lines: [String] = []
        var appOf: [String: String] = [:]
        for app in [phone, mac] {
            let prefix = app == phone ? "phone" : "mac"
            for n in 0..<perApp {
                let receipt = SimulatedReceipt(
                    account: "\(prefix)-sk2-\(n)-\(UUID().uuidString.prefix(8))", scenario: .renewal,
                    start: Date().addingTimeInterval(-3 * 86_400),
                    productID: app == phone ? SeveralAppsTests.phoneProduct : SeveralAppsTests.macProduct,
                    bundle: app == phone ? nil : app)
                state.register([receipt])
                let user = "\(prefix)-sk2-user-\(n)"
                appOf[user] = app
                let named = n >= unnamed ? #", "bundle_id": "\#(app)""# : ""
                lines.append(
                    #"{"user_id": "\#(user)", "original_transaction_id": "\#(receipt.originalTransactionID)"\#(named)}"#
                )
            }
        }
        return (lines.joined(separator: "\n") + "\n", appOf)
    }

    @Test(
        """
        Each app is asked with its own key and bundle; a transaction id of unknown app is tried with each app's \
        key until one knows it, and pinned
        """,
        arguments: SeveralAppsTests.backends)
    func eachAppItsOwnKey(_ backend: String) async throws {
        try await Self.withApps(backend, macKeyAccepted: true) { directory, database, state, environment in
            let (lines, appOf) = Self.storeKit2Rows(state, perApp: 5, unnamed: 2)
            try await SeveralAppsTests.migrateAndImport(lines, directory: directory, database: database)
            let run = try await CLI.run(["run", "--database", database], environment: environment)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let status = try await SeveralAppsTests.status(database, environment: environment)
            for (user, app) in appOf {
                #expect(status[user] == ["\(app) active nil"], "\(user): \(status[user] ?? [])")
            }
            // The two Mac rows of unknown app were first asked with the iPhone app's key: Apple's 404 in
            // both environments, then found with the Mac app's.
            let stats = state.serverAPIStats
            #expect(stats.unauthorized == 0 && stats.notFound == 2 * 2, "\(stats)")
        }
    }

    @Test(
        """
        Apple's change feed is read per app, each with its own key and cursor: a refund mid-period in the Mac app \
        reaches the database through the Mac app's feed, and the iPhone app's feed never lists it
        """,
        arguments: SeveralAppsTests.backends)
    func feedPerApp(_ backend: String) async throws {
        try await Self.withApps(backend, macKeyAccepted: true) { directory, database, state, environment in
            var (lines, _) = Self.storeKit2Rows(state, perApp: 2, unnamed: 0)
            // Renewed once (day 30), refunded on day 45: a day after the first run, mid-period.
            let refund = SimulatedReceipt(
                account: "mac-refund-\(UUID().uuidString.prefix(8))", scenario: .refund,
                start: state.now.addingTimeInterval(-44 * 86_400), productID: SeveralAppsTests.macProduct,
                bundle: Self.mac)
            state.register([refund])
            let refundID = refund.originalTransactionID
            lines +=
                #"{"user_id": "mac-refund", "original_transaction_id": "\#(refundID)", "bundle_id": "\#(Self.mac)"}"#
            try await SeveralAppsTests.migrateAndImport(lines, directory: directory, database: database)
            let first = try await CLI.run(
                ["run", "--database", database, "--now", Timestamp.string(state.now)], environment: environment)
            #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
            let cursors = try await SeveralAppsTests.strings(
                "SELECT environment AS value FROM feed_cursors ORDER BY environment", backend: backend,
                database: database)
            #expect(
                cursors == [
                    "com.example.app/Production", "com.example.app/Sandbox", "com.example.mac/Production",
                    "com.example.mac/Sandbox",
                ])

            state.advance(by: 1.5 * 86_400)
            let second = try await CLI.run(
                [
                    "run", "--database", database, "--now", Timestamp.string(state.now), "--report",
                    directory + "/second.json",
                ], environment: environment)
            #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
            let report = try ServerAPIMigrationTests.json(directory + "/second.json")
            let changes = report["changes"] as? [[String: Any]] ?? []
            #expect(
                changes.contains {
                    $0["user_id"] as? String == "mac-refund" && $0["kind"] as? String == "refunded"
                        && $0["bundle_id"] as? String == Self.mac
                }, "\(changes)")
            let listedBy = try await SeveralAppsTests.strings(
                "SELECT bundle_id AS value FROM feed_notifications WHERE original_transaction_id = '\(refundID)'",
                backend: backend, database: database)
            #expect(!listedBy.isEmpty && listedBy.allSatisfy { $0 == Self.mac }, "\(listedBy)")
        }
    }

    @Test(
        """
        A refused API key (401 in production and sandbox) stops its app only: the other app's rows are checked, \
        the stopped app's stay as they were, exit 5 with credentials_rejected
        """,
        arguments: SeveralAppsTests.backends)
    func refusedKeyStopsOneApp(_ backend: String) async throws {
        try await Self.withApps(backend, macKeyAccepted: false) { directory, database, state, environment in
            let (lines, appOf) = Self.storeKit2Rows(state, perApp: 4, unnamed: 0)
            try await SeveralAppsTests.migrateAndImport(lines, directory: directory, database: database)
            let run = try await CLI.run(
                ["run", "--database", database, "--report", directory + "/run.json", "--concurrency", "2"],
                environment: environment)
            #expect(run.status == 5, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stderr.contains("com.example.mac (credentials_rejected)"), "\(run.stderr)")
            let status = try await SeveralAppsTests.status(database, environment: environment)
            for (user, app) in appOf {
                let expected = app == Self.phone ? "\(app) active nil" : "\(app) unverified nil"
                #expect(status[user] == [expected], "\(user): \(status[user] ?? [])")
            }
        }
    }

    @Test(
        """
        Three PostgreSQL workers checking two apps keep each app's own request budget: no app's second holds \
        more than its budget, no 429, and the budget is kept under each app's key
        """,
        .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
    func perAppBudgetsWithThreeWorkers() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await StoreKit2ImportTests.database("postgres", directory: directory, name: "budget")
        defer { database.drop() }
        let url = database.url
        let budget = 15
        let perApp = 60

        let start = Date().addingTimeInterval(-3 * 86_400)
        var lines: [String] = []
        for app in [Self.phone, Self.mac] {
            for n in 0..<perApp {
                let receipt = SimulatedReceipt(
                    account: "\(app)-budget-\(n)", scenario: .renewal, start: start,
                    bundle: app == Self.phone ? nil : app)
                lines.append(
                    #"{"user_id": "\#(app)-\#(n)", "latest_receipt": "\#(receipt.encoded)", "bundle_id": "\#(app)"}"#)
            }
        }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: directory + "/lines.jsonl", atomically: true, encoding: .utf8)
        let simulator = try await SimulatorProcess.start(
            directory: directory, register: directory + "/lines.jsonl", arguments: ["--app", Self.mac])
        defer { simulator.stop() }
        let exported = simulator.exported
        // One team key for both apps.
        let apps: [[String: Any]] = [Self.phone, Self.mac].map {
            [
                "bundle_id": $0, "key_id": exported["APPSTORE_KEY_ID"] ?? "",
                "issuer_id": exported["APPSTORE_ISSUER_ID"] ?? "",
                "private_key_file": exported["APPSTORE_PRIVATE_KEY_FILE"] ?? "",
            ]
        }
        try JSONSerialization.data(withJSONObject: ["apps": apps]).write(
            to: URL(fileURLWithPath: directory + "/apps.json"))
        let environment = [
            "RENEWAL_APPS_FILE": directory + "/apps.json",
            "APPSTORE_ROOT_CERTIFICATES": exported["APPSTORE_ROOT_CERTIFICATES"] ?? "",
            "APPSTORE_SERVER_API_URL": exported["APPSTORE_SERVER_API_URL"] ?? "",
            "APPSTORE_SANDBOX_SERVER_API_URL": exported["APPSTORE_SANDBOX_SERVER_API_URL"] ?? "",
        ]
        let control = simulator.controlURL
        // Apple's limit per app, simulated at the budget: a burst over it would be answered 429.
        _ = try await ServerAPIMigrationTests.http(
            control + "/server-api/rate-limit", post: #"{"per_second": \#(budget)}"#)
        #expect(try await CLI.run(["migrate", "--database", url]).status == 0)
        #expect(try await CLI.run(["import", directory + "/lines.jsonl", "--database", url]).status == 0)

        let arguments = [
            "run", "--database", url, "--concurrency", "16", "--server-api-rate", "\(budget)", "--source", "server-api",
        ]
        let workers = try (0..<3).map {
            try PostgresKillTests.start(arguments, environment: environment, log: directory + "/worker-\($0).log")
        }
        var reasons: [Process.TerminationReason] = []
        for worker in workers { reasons.append(await PostgresKillTests.waitForExit(worker)) }
        for (index, worker) in workers.enumerated() {
            let log = (try? String(contentsOfFile: directory + "/worker-\(index).log", encoding: .utf8)) ?? ""
            #expect(reasons[index] == .exit && worker.terminationStatus == 0, "worker \(index): \(log)")
        }
        let answer = try await ServerAPIMigrationTests.http(control + "/server-api/arrivals")
        let byApp = try #require(answer["arrivals_by_app"] as? [String: [Int64]], "\(answer.keys)")
        for app in [Self.phone, Self.mac] {
            let arrivals = byApp[app] ?? []
            // A status request, then a Get Transaction History request after the due work, per receipt.
            #expect(arrivals.count == 2 * perApp, "\(app): two requests per receipt, got \(arrivals.count)")
            let busiest = SimulatorProcess.busiestSecond(arrivals)
            #expect(busiest <= budget, "\(app): busiest second held \(busiest) requests; the budget is \(budget)")
        }
        let stats = try await ServerAPIMigrationTests.http(control + "/server-api/stats")
        #expect(stats["rateLimited"] as? Int == 0, "\(stats)")
        let buckets = try await SeveralAppsTests.strings(
            "SELECT bucket AS value FROM api_request_budget ORDER BY bucket", backend: "postgres", database: url)
        let keys = buckets.joined(separator: ",")
        // Every budget is one app's (the change feed's reads of each app count against it too).
        #expect(buckets.allSatisfy { $0.hasPrefix(Self.phone + "/") || $0.hasPrefix(Self.mac + "/") }, "\(keys)")
        #expect(
            buckets.contains("com.example.app/subscriptions/production")
                && buckets.contains("com.example.mac/subscriptions/production"), "\(keys)")
    }
}
