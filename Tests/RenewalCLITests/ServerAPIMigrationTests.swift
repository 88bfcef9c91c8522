import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RenewalServerAPI
import Testing

/// The built binary moving a database of receipt-only rows to the App Store Server API, against the
/// in-process simulator's Server API (its own chain and API key, exported to files as an operator
/// would configure them).
@Suite("Migrating stored receipts to the App Store Server API (real binary)")
struct ServerAPIMigrationTests {
    static let secret = "cli-server-api-secret"

    /// The simulator's key and root written to files, and the environment naming them.
    static func environment(
        _ configuration: SimulatorConfiguration, _ endpoints: SimulatorEndpoints, directory: String
    ) throws -> [String: String] {
        let serverAPI = try #require(configuration.serverAPI)
        try serverAPI.privateKeyPEM.write(toFile: directory + "/AuthKey.p8", atomically: true, encoding: .utf8)
        try serverAPI.chain.rootPEM().write(toFile: directory + "/root.pem", atomically: true, encoding: .utf8)
        return [
            "APPSTORE_SHARED_SECRET": secret, "APPSTORE_KEY_ID": serverAPI.keyID,
            "APPSTORE_ISSUER_ID": serverAPI.issuerID,
            "APPSTORE_BUNDLE_ID": SimulatedReceipt.bundleID, "APPSTORE_PRIVATE_KEY_FILE": directory + "/AuthKey.p8",
            "APPSTORE_ROOT_CERTIFICATES": directory + "/root.pem", "APPSTORE_SERVER_API_URL": endpoints.serverAPIURL,
            "APPSTORE_SANDBOX_SERVER_API_URL": endpoints.sandboxServerAPIURL,
            "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
            "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
        ]
    }

    /// A fresh directory with a SQLite path, and the in-process simulator, for `body`.
    static func withSQLiteAndSimulator(
        _ body: (String, String, SimulatorState, SimulatorConfiguration, SimulatorEndpoints) async throws -> Void
    ) async throws {
        try await CLI.withDirectoryAndSimulator(secret: secret) { directory, state, configuration, endpoints in
            try await body(directory, directory + "/renewal.sqlite", state, configuration, endpoints)
        }
    }

    static func importLines(_ receipts: [(String, SimulatedReceipt)]) -> String {
        receipts.map { #"{"user_id": "\#($0.0)", "latest_receipt": "\#($0.1.encoded)"}"# }.joined(separator: "\n")
            + "\n"
    }

    /// A GET (or POST of `post`) to the simulator's control routes, decoded as a JSON object.
    static func http(_ url: String, post: String? = nil) async throws -> [String: Any] {
        try await HTTPClient.withHTTPClient { client in
            var request = HTTPClientRequest(url: url)
            if let post {
                request.method = .POST
                request.body = .bytes(ByteBuffer(string: post))
            }
            let response = try await client.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 16 << 20)
            return try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
        }
    }

    static func json(_ path: String) throws -> [String: Any] {
        let data = try #require(FileManager.default.contents(atPath: path), "no file at \(path)")
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test(
        """
        SQLite: receipt-only rows are read for their transaction ids, confirmed through the Server API and \
        checked there from then on; rows Apple's Server API does not know stay on verifyReceipt
        """
    )
    func migratesSQLite() async throws {
        try await Self.withSQLiteAndSimulator { directory, database, state, configuration, endpoints in
            let scenarios: [Scenario] = [
                .renewal, .billingRetry, .gracePeriod, .refund, .upgrade, .familyShared, .sandbox,
                .multipleSubscriptions, .voluntaryExpiry, .trial,
            ]
            var receipts: [(String, SimulatedReceipt)] = (0..<120).map { n in
                let scenario = scenarios[n % scenarios.count]
                return (
                    "user-\(n)",
                    SimulatedReceipt(
                        account: "m-\(n)", scenario: scenario,
                        start: state.now.addingTimeInterval(-Double(5 + n % 50) * 86_400))
                )
            }
            let unknown = (0..<3).map {
                (
                    "gone-\($0)",
                    SimulatedReceipt(
                        account: "gone-\($0)", scenario: .accountNotFound,
                        start: state.now.addingTimeInterval(-20 * 86_400))
                )
            }
            receipts += unknown
            state.register(receipts.map(\.1))
            let environment = try Self.environment(configuration, endpoints, directory: directory)

            #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            let imported = try await CLI.run(
                ["import", "-", "--database", database], stdin: Self.importLines(receipts))
            #expect(imported.status == 0, "\(imported.stderr)")

            // When the job runs with Server API credentials and the default budget
            let started = Date()
            let first = try await CLI.run(
                ["run", "--database", database, "--report", directory + "/first.json", "--concurrency", "16"],
                environment: environment)
            let seconds = Date().timeIntervalSince(started)
            #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
            #expect(first.stdout.contains("migrated \(receipts.count - unknown.count)"), "\(first.stdout)")

            // Then every subscription row moved, each through its own transaction id, with changes named by source
            let report = try Self.json(directory + "/first.json")
            let counts = try #require(report["counts"] as? [String: Any])
            #expect(counts["migrated"] as? Int == receipts.count - unknown.count)
            let changes = try #require(report["changes"] as? [[String: Any]])
            let serverAPIChanges = changes.filter { $0["source"] as? String == "server_api" }
            #expect(
                serverAPIChanges.count == changes.count - unknown.count,
                "every change but the 21010 invalidations came from the Server API")
            let apiStats = state.serverAPIStats
            #expect(
                state.stats.requests == unknown.count,
                "verifyReceipt was asked only about the rows the Server API does not know")
            #expect(apiStats.unauthorized == 0 && apiStats.rateLimited == 0)

            // And status --json and the view show each row's source
            let status = try await CLI.run(["status", "--json", "--database", database])
            let rows = try #require(
                try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
            #expect(rows.filter { $0["source"] as? String == "server_api" }.count >= receipts.count - unknown.count)
            #expect(rows.filter { $0["source"] as? String == "verify_receipt" }.count == unknown.count)

            // And a second pass asks only the Server API, migrates nothing more and changes nothing
            let requestsBefore = (state.stats.requests, apiStats.requests)
            let second = try await CLI.run(
                ["backfill", "--all", "--database", database, "--report", directory + "/second.json"],
                environment: environment)
            #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
            let secondCounts = try #require(try Self.json(directory + "/second.json")["counts"] as? [String: Any])
            #expect(secondCounts["migrated"] as? Int == 0)
            #expect(secondCounts["changed"] as? Int == 0)
            #expect(
                state.stats.requests - requestsBefore.0 == unknown.count,
                "only the rows that stayed on verifyReceipt asked it again")
            let sandboxRows = receipts.filter { $0.1.scenario == .sandbox }.count
            let perReceipt = Double(apiStats.requests) / Double(receipts.count)
            print(
                String(
                    format:
                        """
                        figures[server api migration]: %d rows migrated in %.2f s at the default budget (45/s \
                        production, 10/s sandbox, spaced at 80%%) = %.1f rows/s; %d Server API requests for %d \
                        receipts = %.2f per receipt (%d sandbox rows need 2, %d unknown rows 2 + 1 verifyReceipt)
                        """,
                    receipts.count - unknown.count, seconds, Double(receipts.count - unknown.count) / seconds,
                    apiStats.requests, receipts.count,
                    perReceipt, sandboxRows, unknown.count))
        }
    }

    @Test("A wrong API key: 401 from production and sandbox stops the run with exit 78 and changes nothing")
    func wrongKeyIsConfigurationError() async throws {
        try await Self.withSQLiteAndSimulator { directory, database, state, configuration, endpoints in
            let receipts = (0..<5).map {
                (
                    "user-\($0)",
                    SimulatedReceipt(
                        account: "k-\($0)", scenario: .renewal, start: state.now.addingTimeInterval(-3 * 86_400))
                )
            }
            state.register(receipts.map(\.1))
            var environment = try Self.environment(configuration, endpoints, directory: directory)
            let otherKey = try SimulatedServerAPI.generate().privateKeyPEM
            try otherKey.write(toFile: directory + "/other.p8", atomically: true, encoding: .utf8)
            environment["APPSTORE_PRIVATE_KEY_FILE"] = directory + "/other.p8"
            #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            #expect(
                try await CLI.run(["import", "-", "--database", database], stdin: Self.importLines(receipts)).status
                    == 0)

            let run = try await CLI.run(
                ["run", "--database", database, "--source", "server-api"], environment: environment)
            #expect(run.status == 78, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stderr.contains("APPSTORE_PRIVATE_KEY_FILE"), "\(run.stderr)")
            #expect(!run.stderr.contains("PRIVATE KEY-----"), "the key itself is never printed")
            #expect(state.serverAPIStats.unauthorized == 2, "one request to each environment, then the run stopped")
            let status = try await CLI.run(["status", "--json", "--database", database])
            let rows = try #require(
                try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
            #expect(rows.allSatisfy { $0["state"] as? String == "unverified" }, "\(status.stdout)")

            // A key file that is not a key is named before any request
            try "not a key".write(toFile: directory + "/bad.p8", atomically: true, encoding: .utf8)
            environment["APPSTORE_PRIVATE_KEY_FILE"] = directory + "/bad.p8"
            let bad = try await CLI.run(["run", "--database", database], environment: environment)
            #expect(bad.status == 78, "\(bad.stderr)")
            #expect(bad.stderr.contains(directory + "/bad.p8") && bad.stderr.contains(".p8"), "\(bad.stderr)")
        }
    }

    @Test(
        """
        Three PostgreSQL workers share one request budget: the simulator never sees more requests in a second \
        than the budget
        """,
        .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
    func fleetBudgetOnPostgres() async throws {
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath, "psql is needed to create the test schema")
        let schema = "renewal_budget_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await PostgresKillTests.sqlOffPool("CREATE SCHEMA \(schema)", url: base, psql: psql)
        defer { _ = try? PostgresKillTests.sql("DROP SCHEMA \(schema) CASCADE", url: base, psql: psql) }
        let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let budget = 20
        let count = 150

        // The simulator runs as its own process here: arrivals are stamped by a process the test
        // runner's other suites do not stall, so a burst it records is a burst the workers sent.
        let receipts = (0..<count).map {
            (
                "user-\($0)",
                SimulatedReceipt(account: "b-\($0)", scenario: .renewal, start: Date().addingTimeInterval(-3 * 86_400))
            )
        }
        try Self.importLines(receipts).write(toFile: directory + "/lines.jsonl", atomically: true, encoding: .utf8)
        let simulator = try await SimulatorProcess.start(
            directory: directory, register: directory + "/lines.jsonl",
            environment: ["APPSTORE_SHARED_SECRET": Self.secret])
        defer { simulator.stop() }
        var environment = simulator.exported
        environment["APPSTORE_SHARED_SECRET"] = Self.secret
        let control = simulator.controlURL

        // Apple's own limit, simulated at the budget: any burst over it would be answered 429.
        _ = try await Self.http(control + "/server-api/rate-limit", post: #"{"per_second": \#(budget)}"#)
        #expect(try await CLI.run(["migrate", "--database", url]).status == 0)
        #expect(try await CLI.run(["import", directory + "/lines.jsonl", "--database", url]).status == 0)

        let arguments = [
            "run", "--database", url, "--concurrency", "16", "--server-api-rate", "\(budget)", "--source", "server-api",
        ]
        let started = Date()
        let workers = try (0..<3).map {
            try PostgresKillTests.start(arguments, environment: environment, log: directory + "/worker-\($0).log")
        }
        var reasons: [Process.TerminationReason] = []
        for worker in workers { reasons.append(await PostgresKillTests.waitForExit(worker)) }
        let seconds = Date().timeIntervalSince(started)
        let logs = (0..<3).map { (try? String(contentsOfFile: directory + "/worker-\($0).log", encoding: .utf8)) ?? "" }
        for (index, worker) in workers.enumerated() {
            #expect(reasons[index] == .exit && worker.terminationStatus == 0, "worker \(index): \(logs[index])")
        }

        let arrivals = try #require(try await Self.http(control + "/server-api/arrivals")["arrivals_ms"] as? [Int64])
            .sorted()
        let stats = try await Self.http(control + "/server-api/stats")
        // One status request per receipt, then, after the due work, one Get Transaction History request per
        // subscription (each has one period): the workers claim them, so none is asked twice.
        #expect(arrivals.count == 2 * count, "two requests per receipt: \(arrivals.count)")
        #expect(stats["history"] as? Int == count, "each history asked once: \(stats)")
        let busiest = SimulatorProcess.busiestSecond(arrivals)
        let warnings = logs.flatMap { $0.split(separator: "\n") }.filter {
            $0.contains("warning") || $0.contains("error")
        }
        #expect(
            busiest <= budget,
            "busiest second held \(busiest) requests; the budget is \(budget); worker warnings: \(warnings.prefix(5))")
        #expect(stats["rateLimited"] as? Int == 0, "\(stats)")
        let verified = try await PostgresKillTests.sqlOffPool(
            "SELECT count(*) FROM \(schema).receipts WHERE source = 'server_api'", url: base, psql: psql)
        #expect(verified == "\(count)")
        let perWorker = try await PostgresKillTests.sqlOffPool(
            "SELECT string_agg(checked::text, ',' ORDER BY checked) FROM \(schema).runs", url: base, psql: psql)
        print(
            String(
                format:
                    """
                    figures[server api fleet budget]: 3 workers, %d receipts, budget %d/s: %.2f s (floor %.2f s), \
                    busiest second %d requests, checked per worker %@
                    """,
                count, budget, seconds, Double(2 * count - 1) / (Double(budget) * RequestRates.headroom), busiest, perWorker
            ))
    }
}

/// The `appstore-simulator` executable as a process of its own, for tests that time requests: its
/// arrival times are stamped by a process the test runner's other suites do not stall, so a burst
/// it records is a burst the workers sent.
struct SimulatorProcess {
    let process: Process
    /// The `APPSTORE_*` variables it exported for `renewal` (server-api.env).
    let exported: [String: String]

    /// The base of its control routes.
    var controlURL: String { (exported["APPSTORE_SERVER_API_URL"] ?? "") + "/_simulator" }

    /// Starts `serve` on a free port with 30 ms of latency, the receipts of `register` known to its
    /// Server API, its credentials exported under `directory/credentials`; waits until it listens.
    static func start(
        directory: String, register: String, arguments: [String] = [], environment: [String: String] = [:]
    ) async throws -> SimulatorProcess {
        let process = Process()
        process.executableURL = CLI.binary.deletingLastPathComponent().appendingPathComponent("appstore-simulator")
        process.arguments =
            [
                "serve", "--port", "0", "--latency-ms", "30", "--export-dir", directory + "/credentials", "--register",
                register,
            ] + arguments
        process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { _, path in path }
        let logPath = directory + "/simulator.log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        let ready = await poll(timeout: 30) {
            ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").contains("credentials: " + directory)
        }
        guard ready else {
            process.terminate()
            process.waitUntilExit()
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw SimulatorProcessError(description: "the simulator did not start: \(text)")
        }
        var exported: [String: String] = [:]
        for line in try String(contentsOfFile: directory + "/credentials/server-api.env", encoding: .utf8).split(
            separator: "\n")
        {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { exported[parts[0]] = parts[1] }
        }
        return SimulatorProcess(process: process, exported: exported)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }

    /// The most requests of `arrivals` (UNIX ms) that fall in any one second.
    static func busiestSecond(_ arrivals: [Int64]) -> Int {
        let sorted = arrivals.sorted()
        var busiest = 0
        var low = 0
        for high in sorted.indices {
            while sorted[high] - sorted[low] >= 1_000 { low += 1 }
            busiest = max(busiest, high - low + 1)
        }
        return busiest
    }
}

struct SimulatorProcessError: Error, CustomStringConvertible {
    var description: String
}
