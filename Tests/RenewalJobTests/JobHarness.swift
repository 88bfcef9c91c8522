import AppStoreSimulator
import Foundation
import InMemoryLogging
import Logging
import RenewalAppleAPI
import RenewalAppStore
import RenewalCore
import RenewalJob
import RenewalPostgres
import RenewalServerAPI
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

/// A storage backend a job test runs on.
enum Backend: String, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    var description: String { rawValue }

    /// SQLite always; PostgreSQL when `RENEWAL_TEST_POSTGRES_URL` names a server (CI starts one).
    static var available: [Backend] {
        PostgresWorkersHarness.baseURL == nil ? [.sqlite] : [.sqlite, .postgres]
    }
}

/// A real database (a SQLite file, or a fresh schema on a real PostgreSQL server), the App Store
/// simulator on a real loopback port, and the real client.
struct JobHarness {
    static let secret = "test-shared-secret-4f1a"

    let store: any SubscriptionStore
    let state: SimulatorState
    let endpoints: SimulatorEndpoints
    let client: AppStoreClient
    let logs: InMemoryLogHandler
    let directory: String
    /// The simulator's Server API identity: its API key and the root its JWS chain to.
    let serverAPI: SimulatedServerAPI
    /// The PostgreSQL schema's URL, for opening the connections of other workers; nil on SQLite.
    var postgresURL: String?

    var logger: Logger {
        let handler = logs
        var logger = Logger(label: "renewal", factory: { _ in handler })
        logger.logLevel = .debug
        return logger
    }

    /// Runs `body` with a fresh database, simulator and client; cleans up afterwards.
    static func with(
        _ backend: Backend = .sqlite, clientSecret: String = JobHarness.secret, maxAttempts: Int = 2,
        _ body: (JobHarness) async throws -> Void
    ) async throws {
        let directory = NSTemporaryDirectory() + "renewal-job-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        switch backend {
        case .sqlite:
            let store = try SQLiteSubscriptionStore.open(path: directory + "/renewal.sqlite", create: true)
            try await with(
                store: store, directory: directory, clientSecret: clientSecret, maxAttempts: maxAttempts, body)
        case .postgres:
            let base = try #require(PostgresWorkersHarness.baseURL)
            let schema = "renewal_job_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
            let admin = try PostgresDatabase(url: base)
            // The name is ours (hex digits), so splicing it is safe; identifiers cannot be bound.
            _ = try await admin.withConnection { try $0.execute("CREATE SCHEMA \(schema)", []) }
            do {
                let store = try PostgresSubscriptionStore.open(url: url)
                try await with(
                    store: store, directory: directory, clientSecret: clientSecret, maxAttempts: maxAttempts
                ) { harness in
                    var harness = harness
                    harness.postgresURL = url
                    try await body(harness)
                }
            } catch {
                _ = try? await admin.withConnection { try $0.execute("DROP SCHEMA \(schema) CASCADE", []) }
                throw error
            }
            _ = try await admin.withConnection { try $0.execute("DROP SCHEMA \(schema) CASCADE", []) }
        }
    }

    private static func with(
        store: any SubscriptionStore, directory: String, clientSecret: String, maxAttempts: Int,
        _ body: (JobHarness) async throws -> Void
    ) async throws {
        _ = try await store.migrate()
        let state = SimulatorState(now: Date(timeIntervalSince1970: 1_790_000_000))
        let configuration = SimulatorConfiguration(sharedSecret: secret, slowDelay: .seconds(8), state: state)
        let quiet = Logger(label: "simulator", factory: { _ in SwiftLogNoOpLogHandler() })
        try await withAppStoreSimulator(configuration: configuration, logger: quiet) { endpoints in
            let clientConfiguration = AppStoreClient.Configuration(
                productionURL: endpoints.productionURL, sandboxURL: endpoints.sandboxURL, sharedSecret: clientSecret,
                requestTimeout: .seconds(30), maxAttempts: maxAttempts, retryBaseDelay: .milliseconds(1),
                retryMaxDelay: .milliseconds(5))
            try await AppStoreClient.withAppStoreClient(configuration: clientConfiguration) { client in
                try await body(
                    JobHarness(
                        store: store, state: state, endpoints: endpoints, client: client, logs: InMemoryLogHandler(),
                        directory: directory, serverAPI: try #require(configuration.serverAPI)))
            }
        }
    }

    /// A Server API client for the simulator, trusting only its root.
    func withServerAPIClient<T>(
        rates: RequestRates = RequestRates(production: 1_000, sandbox: 1_000), maxAttempts: Int = 2,
        _ body: (ServerAPIClient) async throws -> T
    ) async throws -> T {
        let configuration = ServerAPIClient.Configuration(
            keyID: serverAPI.keyID, issuerID: serverAPI.issuerID, bundleID: SimulatedReceipt.bundleID,
            privateKey: serverAPI.apiKey,
            productionURL: endpoints.serverAPIURL, sandboxURL: endpoints.sandboxServerAPIURL,
            rootCertificates: [serverAPI.chain.root],
            requestTimeout: .seconds(30), maxAttempts: maxAttempts, retryBaseDelay: .milliseconds(1),
            retryMaxDelay: .milliseconds(5))
        return try await ServerAPIClient.withServerAPIClient(
            configuration: configuration, budget: LocalRequestBudget(rates: rates), body)
    }

    /// A run over `store` (default the harness's) asking `verifier`, on the simulator's clock (`clock`:
    /// another, e.g. one that moves on in real time).
    func run(
        _ command: RenewalRun.Command = .run, store: (any SubscriptionStore)? = nil, verifier: any ReceiptVerifier,
        clock: RunClock? = nil, configure: (inout RunSetup) -> Void = { _ in }
    ) async throws -> RenewalOutcome {
        let state = self.state
        let now = clock ?? RunClock { state.now }
        var setup = RunSetup(
            configuration: RenewalRun.Configuration(command: command),
            dependencies: RenewalRun.Dependencies(
                store: store ?? self.store, verifier: verifier, logger: logger, now: now.now))
        setup.concurrency = 4
        configure(&setup)
        return try await RenewalRun(configuration: setup.configuration, dependencies: setup.dependencies).run()
    }

    func receipt(_ account: String, _ scenario: Scenario, daysAgo: Double = 10, periodDays: Double = 30)
        -> SimulatedReceipt
    {
        SimulatedReceipt(
            account: account, scenario: scenario, start: state.now.addingTimeInterval(-daysAgo * 86_400),
            period: periodDays * 86_400)
    }

    func importReceipts(_ receipts: [(user: String, receipt: SimulatedReceipt)]) async throws {
        // Apple knows every transaction it issued: the simulator's Server API can look these up.
        state.register(receipts.map(\.receipt))
        _ = try await store.importReceipts(
            receipts.map {
                ReceiptImport(userID: $0.user, latestReceipt: $0.receipt.encoded, productID: $0.receipt.productID)
            },
            now: state.now)
    }

    func run(_ command: RenewalRun.Command = .run, configure: (inout RunSetup) -> Void = { _ in })
        async throws -> RenewalOutcome
    {
        try await run(command, verifier: client, configure: configure)
    }

    func status(user: String? = nil) async throws -> [StatusRow] {
        var rows: [StatusRow] = []
        var cursor: StatusCursor?
        while true {
            let page = try await store.statusPage(userID: user, after: cursor, limit: 100)
            rows += page
            guard page.count == 100, let last = page.last else { return rows }
            cursor = last.cursor
        }
    }

    /// Every stored receipt (a backfill selection read without leases: writes nothing).
    func receipts() async throws -> [StoredReceipt] {
        var all: [StoredReceipt] = []
        var cursor: ReceiptCursor?
        while true {
            let page = try await store.nextBatch(
                .backfill(BackfillSelector(all: true)), after: cursor, limit: 100, lease: nil)
            all += page
            guard let last = page.last else { return all }
            cursor = last.cursor
        }
    }

    func report(_ outcome: RenewalOutcome) throws -> [String: Any] {
        let path = try #require(outcome.reportPath)
        let data = try #require(FileManager.default.contents(atPath: path))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

/// A clock for a harness run other than the simulator's fixed one.
struct RunClock: Sendable {
    let now: @Sendable () -> Date

    /// Starts at `origin` and moves on in real time, as production clocks do while a run goes.
    static func ticking(from origin: Date) -> RunClock {
        let realStart = Date()
        return RunClock { origin.addingTimeInterval(Date().timeIntervalSince(realStart)) }
    }
}

/// A run's configuration and its services, set up together by a test: `$0.concurrency` reaches the
/// configuration, `$0.feed` (and the other services) the dependencies.
@dynamicMemberLookup
struct RunSetup {
    var configuration: RenewalRun.Configuration
    var dependencies: RenewalRun.Dependencies

    subscript<Value>(dynamicMember path: WritableKeyPath<RenewalRun.Configuration, Value>) -> Value {
        get { configuration[keyPath: path] }
        set { configuration[keyPath: path] = newValue }
    }

    subscript<Value>(dynamicMember path: WritableKeyPath<RenewalRun.Dependencies, Value>) -> Value {
        get { dependencies[keyPath: path] }
        set { dependencies[keyPath: path] = newValue }
    }
}
