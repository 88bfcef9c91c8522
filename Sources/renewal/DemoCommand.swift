import AppStoreSimulator
import ArgumentParser
import Foundation
import Logging
import RenewalAppleAPI
import RenewalAppStore
import RenewalCore
import RenewalJob
import RenewalReports
import RenewalServerAPI
import RenewalSQL
import RenewalSQLite
import RenewalStorage

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the real job on a sample SQLite database against the built-in App Store simulator.",
        discussion: """
            Creates a SQLite database with sample customers covering renewal, voluntary expiry, billing \
            retry, grace period, recovery, refund, upgrade, sandbox, family sharing, trial, iOS 6 receipts, \
            21010, a transient 21005, an HTML outage, truncated JSON, a slow answer and a shared Apple ID; \
            starts the simulator on a free loopback port; runs the job for real on day 0, day 11 and day 15 \
            of the simulator's clock, then through the App Store Server API and its change feed (a refund on \
            day 16 caught by the next run, a refund request answered with the customer's consent, a seat \
            refund that revokes nobody), then with a second app (a Mac app with its own shared secret) in \
            the same database, then extends renewal dates after an outage (one subscriber, and a mass \
            extension of a product in one storefront, read back through the feed), adopts a purchase that never \
            reached the server from the feed and claims it for the customer by her order ID (lookup, claim); \
            prints the changes, then the analytics of those days from the transaction \
            ledger (prices in four currencies, yearly, weekly and introductory-price plans) with their HTML \
            page, where the reports and the database are, and last how MRR moved over those days (new, \
            expansion, contraction, churned and reactivation MRR, and the net).
            """)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Directory for the database and reports. Default: a new temporary directory.", valueName: "dir"))
    var directory: String?

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        try await ExitMapping.run {
            let logger = logging.makeLogger(defaultLevel: .error)
            let directory = try self.directory ?? Self.makeTemporaryDirectory()
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let databasePath = (directory as NSString).appendingPathComponent("renewal.sqlite")
            guard !FileManager.default.fileExists(atPath: databasePath) else {
                throw ValidationError("\(databasePath) already exists; give --directory an empty or new directory.")
            }
            let state = SimulatorState(now: Date())
            let secret = "demo-shared-secret"
            var simulator = SimulatorConfiguration(
                sharedSecret: secret, latency: .milliseconds(20), slowDelay: .seconds(3), state: state)
            // The second app's own (app-specific) shared secret; the account's primary one works for both.
            simulator.appSecrets = [DemoData.macApp: "demo-mac-app-secret"]
            try await withAppStoreSimulator(configuration: simulator, logger: logger) { endpoints in
                let store = try SQLiteSubscriptionStore.open(path: databasePath, create: true)
                _ = try await store.migrate()
                let customers = DemoData.customers(at: state.now)
                // Apple knows every transaction it issued: the Server API can look these up.
                state.register(customers.map(\.receipt))
                _ = try await store.importReceipts(
                    try await DemoData.imports(customers, chain: simulator.serverAPI?.chain), now: state.now)
                let output = DemoOutput()
                output.header(endpoints: endpoints, databasePath: databasePath, customers: customers)
                let script = DemoScript(
                    store: store, state: state, output: output, directory: directory, logger: logger,
                    endpoints: endpoints, serverAPI: simulator.serverAPI)
                let client = AppStoreClient.Configuration(
                    productionURL: endpoints.productionURL, sandboxURL: endpoints.sandboxURL, sharedSecret: secret,
                    requestTimeout: .milliseconds(1500), maxAttempts: 3, retryBaseDelay: .milliseconds(50))
                let dayZero = state.now
                try await AppStoreClient.withAppStoreClient(configuration: client) { client in
                    try await script.verifyReceiptRuns(client)
                    try await script.serverAPIRuns(client)
                }
                let analytics = try await script.analytics(since: dayZero)
                // The HTML report of the runs: charts and tables, one file that opens with no network.
                let htmlPath = (directory as NSString).appendingPathComponent("report.html")
                let html = try ReportOutput(path: htmlPath)
                try await StoredReport(store: store).render(.range(since: nil, until: nil), format: .html, to: html)
                try await html.finish()
                output.footer(directory: directory, databasePath: databasePath, htmlPath: htmlPath)
                // The demo ends with how MRR moved over its days.
                output.movement(analytics)
            }
        }
    }

    private static func makeTemporaryDirectory() throws -> String {
        var template = Array(
            (NSTemporaryDirectory() as NSString).appendingPathComponent("renewal-demo-XXXXXX").utf8CString)
        guard let path = mkdtemp(&template) else {
            throw ConfigurationError("Cannot create a temporary directory; pass --directory DIR.")
        }
        return String(cString: path)
    }
}

/// The demo's runs after the import, each on the simulator's clock and printed as it ends.
struct DemoScript {
    let store: SQLiteSubscriptionStore
    let state: SimulatorState
    let output: DemoOutput
    let directory: String
    let logger: Logger
    let endpoints: SimulatorEndpoints
    let serverAPI: SimulatedServerAPI?

    /// One run, `advanceDays` after the last, printed.
    func run(
        _ number: Int, _ title: String, advanceDays: Double, command: RenewalRun.Command = .run,
        verifier: any ReceiptVerifier, feed: (any NotificationFeed)? = nil, history: (any TransactionHistory)? = nil,
        operatorActions: (any OperatorActions)? = nil, apps: AppCatalogue? = nil
    ) async throws -> RenewalOutcome {
        state.advance(by: advanceDays * 86_400)
        var configuration = RenewalRun.Configuration(command: command)
        configuration.concurrency = 8
        configuration.reportPath = (directory as NSString).appendingPathComponent("report-run-\(number).json")
        let state = self.state
        var dependencies = RenewalRun.Dependencies(store: store, verifier: verifier, logger: logger, now: { state.now })
        dependencies.feed = feed
        dependencies.history = history
        dependencies.operatorActions = operatorActions
        dependencies.apps = apps
        let outcome = try await RenewalRun(configuration: configuration, dependencies: dependencies).run()
        try output.run(number: number, title: title, outcome: outcome)
        return outcome
    }

    /// Runs 1 to 4: verifyReceipt over fifteen days.
    func verifyReceiptRuns(_ client: AppStoreClient) async throws {
        let steps: [(title: String, advanceDays: Double)] = [
            ("Day 0: first verification of every imported receipt", 0),
            ("Day 11: Apple renewed, expired, refunded, retried billing", 11),
            ("Day 15: billing recovered, grace period continues", 4),
            ("Day 15 again: an immediate second run has nothing due", 0),
        ]
        for (index, step) in steps.enumerated() {
            _ = try await run(index + 1, step.title, advanceDays: step.advanceDays, verifier: client)
        }
    }

    /// Runs 5 to 8: the same database moves to the App Store Server API row by row, then reads
    /// Apple's change feed, then a second app joins.
    func serverAPIRuns(_ client: AppStoreClient) async throws {
        guard let identity = serverAPI else { return }
        let configuration = ServerAPIClient.Configuration(
            keyID: identity.keyID, issuerID: identity.issuerID, bundleID: SimulatedReceipt.bundleID,
            privateKey: identity.apiKey, productionURL: endpoints.serverAPIURL,
            sandboxURL: endpoints.sandboxServerAPIURL, rootCertificates: [identity.chain.root],
            requestTimeout: .milliseconds(1500), maxAttempts: 3, retryBaseDelay: .milliseconds(50))
        try await ServerAPIClient.withServerAPIClient(configuration: configuration) { serverAPIClient in
            let router = SourceRouter(mode: .auto, verifyReceipt: client, serverAPI: serverAPIClient)
            let migration = try await run(
                5, "Day 15: backfill --all through the App Store Server API (--source auto)",
                advanceDays: 0, command: .backfill(BackfillSelector(all: true)), verifier: router)
            output.migration(outcome: migration, cacheHits: serverAPIClient.verifier.cacheStatistics.hits)
            // Runs 6 and 7: scheduled runs that read Apple's change feed first.
            _ = try await run(
                6, "Day 15: run reads Apple's change feed (Notification History) for the first time",
                advanceDays: 0, verifier: router, feed: serverAPIClient, history: serverAPIClient,
                operatorActions: serverAPIClient)
            let refunds = try await run(
                7, "Day 16: a refund mid-period, caught through the feed by the next run",
                advanceDays: 1.5, verifier: router, feed: serverAPIClient, history: serverAPIClient,
                operatorActions: serverAPIClient)
            output.operatorActions(refunds, state: state)
            try await secondAppRun(client, router: router, serverAPI: serverAPIClient)
        }
    }

    /// After run 8, an outage: one subscriber's renewal date extended, and every yearly subscriber in France
    /// by one request Apple carries out over two hours; run 9 reads Apple's answers through the feed.
    private func extensions(router: SourceRouter, serverAPI: ServerAPIClient) async throws {
        state.advance(by: 3_600)
        let now: @Sendable () -> Date = { [state] in state.now }
        let extensions = RenewalExtensions(store: store, extenders: [nil: serverAPI], logger: logger, now: now)
        let lines = try await extensions.run(
            RenewalExtensions.Request(intent: "outage-day-24", days: 3, reason: 3, userIDs: ["alice", "ivan"]),
            dryRun: false)
        let yearly = RenewalExtensions.MassRequest(
            intent: "outage-day-24", days: 3, reason: 3, productID: "com.example.pro.yearly", storefronts: ["FRA"])
        let accepted = try await extensions.runMass(yearly)
        output.extensions(lines, mass: accepted)
        let lost = losePurchase()
        let outcome = try await run(
            9,
            "Day 24, three hours on: Apple's RENEWAL_EXTENDED, the mass extension's summary and vera's lost "
                + "purchase, through the feed",
            advanceDays: 0.125, verifier: router, feed: serverAPI, history: serverAPI, operatorActions: serverAPI)
        output.afterExtensions(outcome, mass: try await extensions.runMass(yearly))
        if let lost { try await lookUpAndClaim(lost, serverAPI: serverAPI) }
    }

    /// The analytics of the demo's days from the ledger the runs wrote: the daily series refreshed, the
    /// figures printed, and the HTML page written (`renewal analytics --refresh-daily`, then `--html`).
    /// Returns the report, whose MRR movement the demo prints last.
    func analytics(since dayZero: Date) async throws -> AnalyticsReport {
        let rates = ExchangeRates(reportingCurrency: "USD", rates: DemoData.rates)
        let work = AnalyticsWork(store: store, app: nil, catalogue: ProductCatalogue(), rates: rates)
        _ = try await work.refresh(from: dayZero, through: state.now)
        let report = try await work.report(since: dayZero, until: state.now)
        let path = (directory as NSString).appendingPathComponent("analytics.html")
        try await work.writePage(report, to: path, flag: "analytics page")
        output.analytics(report, rates: DemoData.rates, path: path)
        return report
    }

    /// Run 8: a second app joins the database; one run checks both, each with its own secret. Then the
    /// extensions and run 9.
    private func secondAppRun(_ client: AppStoreClient, router: SourceRouter, serverAPI: ServerAPIClient)
        async throws
    {
        let macCustomers = DemoData.macCustomers(at: state.now)
        state.register(macCustomers.map(\.receipt))
        _ = try await store.importReceipts(DemoData.macImports(macCustomers), now: state.now)
        output.secondApp(macCustomers)
        var macClient = client.configuration
        macClient.sharedSecret = "demo-mac-app-secret"
        try await AppStoreClient.withAppStoreClient(configuration: macClient) { macClient in
            let apps = AppCatalogue(apps: [
                AppCatalogue.App(
                    identity: AppIdentity(bundleID: SimulatedReceipt.bundleID, configuredIn: "the apps file"),
                    verifier: router),
                AppCatalogue.App(
                    identity: AppIdentity(bundleID: DemoData.macApp, configuredIn: "the apps file"),
                    verifier: SourceRouter(mode: .auto, verifyReceipt: macClient, serverAPI: nil)),
            ])
            let outcome = try await run(
                8, "Day 24: two apps in one database (--apps), each checked with its own secret",
                advanceDays: 7.5, verifier: apps, apps: apps)
            try output.byApp(outcome)
        }
        try await extensions(router: router, serverAPI: serverAPI)
    }
}
