import AppStoreSimulator
import ArgumentParser
import Foundation
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

@main
struct RenewalBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "renewal-bench",
        abstract: "Benchmarks of the job that need the job, a database and the simulator in one process.",
        subcommands: [MonthBenchmark.self, WebhookBenchmark.self])
}

/// A month of a subscriber population on the simulator's clock, with runs every `interval` minutes:
/// Apple requests per subscriber by endpoint, and how long each change Apple published took to
/// reach the database, with the change feed and with polling alone.
struct MonthBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "month",
        abstract: "Simulate a month of runs against the simulator; print requests and event-to-database delays.")

    @Option(help: "Subscribers in the population.")
    var subscribers = 1_000

    @Option(help: "Simulated days after the first run.")
    var days = 30.0

    @Option(help: "Minutes between runs.")
    var intervalMinutes = 30.0

    @Option(help: "feed, polling or both.")
    var mode = "both"

    @Option(help: "Seconds after its event before Apple lists a notification.")
    var notificationDelaySeconds = 120.0

    @Option(help: "Seed of the population.")
    var seed: UInt64 = 1

    @Option(
        help: """
            How the rows are imported: id (StoreKit 2 original_transaction_id), receipt (latest_receipt, \
            verified by verifyReceipt on day 0 like receipts whose transaction id the job cannot read, so the month \
            includes moving them to the Server API), or both.
            """)
    var importForm = "id"

    @Option(help: "Day of the month on which Notification History answers HTTP 5xx (0: no outage).")
    var outageDay = 0.0

    @Option(help: "Hours the feed outage lasts.")
    var outageHours = 6.0

    @Option(help: "Percent of the notifications Notification History lists twice.")
    var duplicatePercent = 5

    @Option(help: "Refunds Apple never made, signed by a chain nobody trusts, listed among the real notifications.")
    var forgedRefunds = 3

    @Option(help: "A PostgreSQL server to run on (a fresh schema each simulation); SQLite when absent.")
    var postgresURL: String?

    @Option(help: "Workers started together for each run (PostgreSQL; SQLite admits one run at a time).")
    var workers = 1

    @Flag(
        help: """
            Build the analytics summaries after the first run, so every run of the month keeps them: against \
            a run without, the cost of keeping them.
            """)
    var analyticsSummaries = false

    @Option(
        help: """
            PostgreSQL, with --analytics-summaries: once they are built, add the summary rows of this schema \
            of the same database (one holding the ten-million ledger's), so the month's upkeep, folds and daily \
            refreshes work on a table of that size.
            """)
    var summaryRowsFrom: String?

    @Option(
        help: """
            PostgreSQL: run in this schema of the server (one holding the ten-million ledger) instead of a fresh \
            one, and leave it as it is afterwards, the month's subscribers in it. Its summaries are not rebuilt: \
            with --analytics-summaries they must be current there (the month's writes keep them), without it \
            they must not be usable (no --rebuild, or built by other definitions), so that nothing keeps them.
            """)
    var inSchema: String?

    enum Mode: String, CaseIterable {
        case feed, polling
    }

    enum ImportForm: String, CaseIterable {
        case id, receipt
    }

    mutating func validate() throws {
        guard subscribers >= 1, days > 0, intervalMinutes >= 1 else {
            throw ValidationError("--subscribers, --days and --interval-minutes must be positive.")
        }
        guard mode == "both" || Mode(rawValue: mode) != nil else {
            throw ValidationError("--mode must be feed, polling or both.")
        }
        guard importForm == "both" || ImportForm(rawValue: importForm) != nil else {
            throw ValidationError("--import-form must be id, receipt or both.")
        }
        guard workers >= 1, workers == 1 || postgresURL != nil else {
            throw ValidationError("--workers above 1 needs --postgres-url: SQLite admits one run at a time.")
        }
        if let summaryRowsFrom {
            guard postgresURL != nil, analyticsSummaries, Self.isName(summaryRowsFrom) else {
                throw ValidationError(
                    "--summary-rows-from needs --postgres-url, --analytics-summaries and a schema name "
                        + "(letters, digits, _).")
            }
        }
        if let inSchema {
            guard postgresURL != nil, summaryRowsFrom == nil, Self.isName(inSchema) else {
                throw ValidationError(
                    "--in-schema needs --postgres-url, a schema name (letters, digits, _) and no --summary-rows-from.")
            }
        }
        guard outageDay >= 0, outageHours >= 0, forgedRefunds >= 0, (0...100).contains(duplicatePercent) else {
            throw ValidationError(
                "--outage-day, --outage-hours and --forged-refunds must be 0 or more, --duplicate-percent 0 to 100.")
        }
    }

    /// A schema name spliced into SQL: letters, digits and _ only.
    static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.allSatisfy { $0 == "_" || $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    func run() async throws {
        let modes = mode == "both" ? Mode.allCases : [Mode(rawValue: mode) ?? .feed]
        let forms = importForm == "both" ? ImportForm.allCases : [ImportForm(rawValue: importForm) ?? .id]
        let population = Population(subscribers: subscribers, seed: seed, origin: Self.origin)
        let outage =
            outageDay > 0
            ? "Notification History down (HTTP 503) for \(outageHours.formatted()) h from day \(outageDay.formatted())"
            : "no feed outage"
        print(
            """
            month benchmark: \(subscribers) subscribers (\(population.summary)), \(days.formatted()) days, \
            a run every \(intervalMinutes.formatted()) min, notifications listed \
            \(notificationDelaySeconds.formatted()) s after their event, \(duplicatePercent) % of them listed twice, \
            \(forgedRefunds) forged refunds, \(outage), \
            \(postgresURL == nil ? "SQLite" : "PostgreSQL") with \(workers) worker\(workers == 1 ? "" : "s"), seed \(seed), \
            analytics summaries \(analyticsSummaries ? "kept" : "not kept")\(inSchema.map { ", in schema \($0)" } ?? "")
            """)
        for form in forms {
            for mode in modes {
                let result = try await withStores { stores in
                    try await simulate(mode, form: form, population: population, stores: stores)
                }
                result.print(subscribers: subscribers, days: days)
            }
        }
    }

    /// A fresh database for one simulation: a SQLite file, or a schema of its own on the PostgreSQL
    /// server, with one store (its own connections, as a worker process has) per worker.
    func withStores(_ body: ([any BenchStore]) async throws -> MonthResult) async throws -> MonthResult {
        guard let base = postgresURL else {
            let directory = NSTemporaryDirectory() + "renewal-month-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            return try await body([try SQLiteSubscriptionStore.open(path: directory + "/renewal.sqlite", create: true)])
        }
        if let inSchema {
            // Checked in validate(): letters, digits and _ only.
            let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(inSchema)"
            let stores: [any BenchStore] = try (0..<workers).map { _ in try PostgresSubscriptionStore.open(url: url) }
            return try await body(stores)
        }
        let schema = "renewal_month_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try PostgresDatabase(url: base)
        // The name is ours (hex digits): splicing it is safe.
        _ = try await admin.withConnection { try $0.execute("CREATE SCHEMA \(schema)", []) }
        let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        let result: Result<MonthResult, any Error>
        do {
            let stores: [any BenchStore] = try (0..<workers).map { _ in try PostgresSubscriptionStore.open(url: url) }
            result = .success(try await body(stores))
        } catch {
            result = .failure(error)
        }
        _ = try? await admin.withConnection { try $0.execute("DROP SCHEMA \(schema) CASCADE", []) }
        return try result.get()
    }

    static let origin = Date(timeIntervalSince1970: 1_790_000_000)

    func simulate(_ mode: Mode, form: ImportForm, population: Population, stores: [any BenchStore]) async throws
        -> MonthResult
    {
        let store = stores[0]
        _ = try await store.migrate()
        let state = SimulatorState(now: Self.origin)
        state.notificationDelay = notificationDelaySeconds
        let secret = "month-benchmark-secret"
        let simulator = SimulatorConfiguration(sharedSecret: secret, state: state)
        guard let identity = simulator.serverAPI else { throw ValidationError("the simulator has no Server API") }
        let quiet = Logger(label: "renewal-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let receipts = population.receipts
        if inSchema != nil {
            let kept = try await store.analyticsSummaryState().map { $0.staleReason == nil } ?? false
            guard kept == analyticsSummaries else {
                throw ValidationError(
                    "--in-schema \(inSchema ?? ""): the summaries there are \(kept ? "" : "not ")current; "
                        + (kept
                            ? "without --analytics-summaries make them unusable first (their definition_version)."
                            : "with --analytics-summaries run renewal analytics --rebuild there first."))
            }
        }
        try await setUp(state, store: store, receipts: receipts, form: form)

        return try await withAppStoreSimulator(configuration: simulator, logger: quiet) { endpoints in
            let verifyReceipt = AppStoreClient.Configuration(
                productionURL: endpoints.productionURL, sandboxURL: endpoints.sandboxURL, sharedSecret: secret,
                requestTimeout: .seconds(30), maxAttempts: 2, retryBaseDelay: .milliseconds(1))
            let serverAPI = ServerAPIClient.Configuration(
                keyID: identity.keyID, issuerID: identity.issuerID, bundleID: SimulatedReceipt.bundleID,
                privateKey: identity.apiKey, productionURL: endpoints.serverAPIURL,
                sandboxURL: endpoints.sandboxServerAPIURL, rootCertificates: [identity.chain.root],
                requestTimeout: .seconds(30), maxAttempts: 2, retryBaseDelay: .milliseconds(1))
            return try await AppStoreClient.withAppStoreClient(configuration: verifyReceipt) { client in
                try await ServerAPIClient.withServerAPIClient(
                    configuration: serverAPI,
                    budget: LocalRequestBudget(rates: RequestRates(production: 100_000, sandbox: 100_000))
                ) { serverAPIClient in
                    let router = SourceRouter(mode: .auto, verifyReceipt: client, serverAPI: serverAPIClient)
                    // Receipts whose transaction id the job cannot read: verifyReceipt answers first.
                    let dayZero =
                        form == .receipt
                        ? SourceRouter(mode: .verifyReceipt, verifyReceipt: client, serverAPI: serverAPIClient) : router
                    func run(_ command: RenewalRun.Command, feed: Bool, verifier: SourceRouter) async throws
                        -> [RenewalOutcome]
                    {
                        try await Self.run(
                            command, workers: command == .run ? stores : [store], verifier: verifier,
                            feed: feed ? serverAPIClient : nil, now: { state.now }, logger: quiet)
                    }
                    // The first run verifies every imported receipt: the import's cost, not the month's.
                    _ = try await run(.run, feed: mode == .feed, verifier: dayZero)
                    if analyticsSummaries, inSchema == nil { _ = try await store.rebuildAnalyticsSummaries() }
                    if let summaryRowsFrom {
                        // The name was checked in validate(): letters, digits and _ only.
                        let columns = "shape, day, since_day, environment, bundle_id, row_key, count"
                        _ = try await store.rows(
                            """
                            INSERT INTO analytics_summary_rows (\(columns))
                            SELECT \(columns) FROM \(summaryRowsFrom).analytics_summary_rows
                            ON CONFLICT (shape, day, since_day, row_key)
                            DO UPDATE SET count = analytics_summary_rows.count + excluded.count
                            """, [])
                    }
                    let start = state.now
                    let before = Counters(state)
                    var result = MonthResult(mode: mode, form: form)
                    let runs = Int((days * 1_440 / intervalMinutes).rounded())
                    let outageStart = start.addingTimeInterval(outageDay * 86_400)
                    let outageEnd = outageStart.addingTimeInterval(outageHours * 3_600)
                    let clock = ContinuousClock()
                    let began = clock.now
                    for _ in 0..<runs {
                        state.advance(by: intervalMinutes * 60)
                        state.feedFault =
                            outageDay > 0 && state.now >= outageStart && state.now < outageEnd ? .outage : .none
                        result.add(try await run(.run, feed: mode == .feed, verifier: router))
                    }
                    state.feedFault = .none
                    result.wall = clock.now - began
                    result.requests = Counters(state).minus(before)
                    result.listingDelay = notificationDelaySeconds
                    let counted = try await store.rows(
                        "SELECT COUNT(*) AS n FROM feed_notifications WHERE signed_at > $1", [SQLValue(start)]
                    ).first?["n"]
                    if case .int64(let n) = counted { result.notifications = Int(n) }
                    result.intervalMinutes = intervalMinutes
                    result.delays = try await Self.delays(
                        receipts.map(\.receipt), from: start, until: state.now, store: store)
                    // What a fresh look at every subscription still changes: state the month got wrong.
                    let final = try await run(.backfill(BackfillSelector(all: true)), feed: false, verifier: router)
                    result.finalDiscrepancies = try await Self.kinds(ofRun: final[0].runID, store: store)
                    result.forged = state.forgedNotifications.count
                    result.forgedApplied = try await Self.refunded(state.forgedNotifications, store: store)
                    return result
                }
            }
        }
    }

    /// Registers the population with the simulator, lists the duplicates and forged refunds, and
    /// imports the rows in `form`.
    func setUp(
        _ state: SimulatorState, store: any BenchStore, receipts: [(user: String, receipt: SimulatedReceipt)],
        form: ImportForm
    ) async throws {
        state.register(receipts.map(\.receipt))
        state.feedDuplicatePercent = duplicatePercent
        // Forged refunds of steady renewing subscribers, spread over the month.
        let steady = receipts.filter { $0.receipt.scenario == .renewal }.map(\.receipt)
        state.forgedNotifications = (0..<min(forgedRefunds, steady.count)).map { index in
            SimulatedNotification.forgedRefund(
                of: steady[index * steady.count / max(forgedRefunds, 1)],
                at: Self.origin.addingTimeInterval(days * 86_400 * Double(index + 1) / Double(forgedRefunds + 1)))
        }
        _ = try await store.importReceipts(
            receipts.map {
                switch form {
                case .receipt:
                    ReceiptImport(userID: $0.user, latestReceipt: $0.receipt.encoded, productID: $0.receipt.productID)
                case .id:
                    ReceiptImport(
                        userID: $0.user, latestReceipt: nil, productID: $0.receipt.productID,
                        originalTransactionID: $0.receipt.originalTransactionID)
                }
            }, now: state.now)
    }

    /// One run per worker, started together (a backfill: the first store's only).
    static func run(
        _ command: RenewalRun.Command, workers stores: [any BenchStore], verifier: SourceRouter,
        feed: (any NotificationFeed)?, now: @escaping @Sendable () -> Date, logger: Logger
    ) async throws -> [RenewalOutcome] {
        try await withThrowingTaskGroup(of: RenewalOutcome.self) { group in
            for store in stores {
                group.addTask {
                    var configuration = RenewalRun.Configuration(command: command)
                    configuration.concurrency = 16
                    var dependencies = RenewalRun.Dependencies(
                        store: store, verifier: verifier, logger: logger, now: now)
                    dependencies.feed = feed
                    return try await RenewalRun(configuration: configuration, dependencies: dependencies).run()
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// How many of the forged refunds' subscriptions the database shows refunded.
    static func refunded(_ forged: [SimulatedNotification], store: any BenchStore) async throws -> Int {
        var refunded = 0
        for notification in forged {
            let refunds = try await store.rows(
                "SELECT COUNT(*) AS n FROM entitlement_changes WHERE original_transaction_id = $1 AND kind = 'refunded'",
                [.text(notification.originalTransactionID)]
            ).first?["n"]
            if case .int64(let n) = refunds, n > 0 { refunded += 1 }
        }
        return refunded
    }

    /// Each notification of the month paired with the first change of its kind recorded for its
    /// subscription at or after it, in order.
    static func delays(
        _ receipts: [SimulatedReceipt], from start: Date, until end: Date, store: any BenchStore
    )
        async throws -> [String: [TimeInterval?]]
    {
        let rows = try await store.rows(
            """
            SELECT original_transaction_id, kind, occurred_at FROM entitlement_changes
            WHERE occurred_at > $1 ORDER BY occurred_at
            """, [SQLValue(start)])
        var recorded: [String: [Date]] = [:]
        for row in rows {
            guard case .text(let id) = row["original_transaction_id"], case .text(let kind) = row["kind"],
                case .int64(let at) = row["occurred_at"]
            else { continue }
            recorded["\(id)/\(kind)", default: []].append(Date(timeIntervalSince1970: Double(at) / 1000))
        }
        var used: [String: Int] = [:]
        var delays: [String: [TimeInterval?]] = [:]
        let events = receipts.flatMap { $0.notifications(until: end) }.filter { $0.signedDate > start }
            .sorted { $0.signedDate < $1.signedDate }
        for event in events {
            guard let kind = Self.kind(of: event) else { continue }
            let key = "\(event.originalTransactionID)/\(kind)"
            let times = recorded[key] ?? []
            var index = used[key] ?? 0
            while index < times.count, times[index] < event.signedDate { index += 1 }
            if index < times.count {
                delays[kind, default: []].append(times[index].timeIntervalSince(event.signedDate))
                used[key] = index + 1
            } else {
                delays[kind, default: []].append(nil)
            }
        }
        return delays
    }

    /// The change a notification announces, as `entitlement_changes.kind`; nil for those that show no
    /// change of state by themselves (a purchase before the month, a plan change taking effect later,
    /// the end of a grace period).
    static func kind(of notification: SimulatedNotification) -> String? {
        switch (notification.type, notification.subtype) {
        case ("DID_RENEW", "BILLING_RECOVERY"): return "billing_recovered"
        case ("DID_RENEW", _): return "renewed"
        case ("REFUND", _): return "refunded"
        case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"): return "auto_renew_disabled"
        case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED"): return "auto_renew_enabled"
        case ("DID_FAIL_TO_RENEW", "GRACE_PERIOD"): return "grace_period_started"
        case ("DID_FAIL_TO_RENEW", _): return "billing_issue"
        case ("EXPIRED", _): return "expired"
        default: return nil
        }
    }

    static func kinds(ofRun runID: String, store: any BenchStore) async throws -> [String: Int] {
        let rows = try await store.rows(
            "SELECT kind, COUNT(*) AS n FROM entitlement_changes WHERE run_id = $1 GROUP BY kind", [.text(runID)])
        var kinds: [String: Int] = [:]
        for row in rows {
            if case .text(let kind) = row["kind"], case .int64(let n) = row["n"] { kinds[kind] = Int(n) }
        }
        return kinds
    }
}

/// The simulator's request counters.
struct Counters {
    var status = 0
    var feed = 0
    var verifyReceipt = 0

    init(_ state: SimulatorState) {
        status = state.serverAPIStats.requests
        feed = state.feedRequests
        verifyReceipt = state.stats.requests
    }

    func minus(_ other: Counters) -> Counters {
        var difference = self
        difference.status -= other.status
        difference.feed -= other.feed
        difference.verifyReceipt -= other.verifyReceipt
        return difference
    }
}

/// A store the benchmark can also query directly.
protocol BenchStore: RunHistoryStore, AnalyticsSummaryStore {
    func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow]
}

extension SQLSubscriptionStore: BenchStore {
    func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await database.withConnection { try $0.execute(sql, binds) }
    }
}

struct MonthResult {
    var mode: MonthBenchmark.Mode
    var form: MonthBenchmark.ImportForm
    var runs = 0
    /// Notifications applied from their signed data.
    var applied = 0
    /// Forged refunds listed, and how many of their subscriptions show a refund.
    var forged = 0
    var forgedApplied = 0
    var checked = 0
    var failed = 0
    var runsFallingBack = 0
    var wall: Duration = .zero
    var requests: Counters?
    var delays: [String: [TimeInterval?]] = [:]
    var finalDiscrepancies: [String: Int] = [:]
    /// How long after its event Apple listed each notification.
    var listingDelay: TimeInterval = 0
    /// Notifications of the month the feed recorded.
    var notifications = 0
    var intervalMinutes = 30.0

    init(mode: MonthBenchmark.Mode, form: MonthBenchmark.ImportForm) {
        self.mode = mode
        self.form = form
    }

    /// Counts the workers' outcomes of one run.
    mutating func add(_ outcomes: [RenewalOutcome]) {
        for outcome in outcomes {
            checked += outcome.counts.checked
            failed += outcome.counts.failed
            applied += outcome.counts.notificationsApplied
            if outcome.counts.feedFallback?.isEmpty == false { runsFallingBack += 1 }
        }
        runs += 1
    }

    func print(subscribers: Int, days: Double) {
        let perMonth = 30 / days / Double(subscribers)
        let requests = self.requests
        Swift.print("")
        Swift.print(
            """
            \(mode.rawValue), rows imported by \(form == .id ? "original_transaction_id" : "latest_receipt"): \
            \(runs) runs in \(wall), \(checked) checks, \(failed) failed, \(applied) notifications applied
            """)
        if let requests {
            Swift.print(
                String(
                    format:
                        "  per subscriber per month: %.3f status requests, %.3f verifyReceipt requests, %.3f together",
                    Double(requests.status) * perMonth, Double(requests.verifyReceipt) * perMonth,
                    Double(requests.status + requests.verifyReceipt) * perMonth))
            Swift.print(
                String(
                    format: "  feed: %d requests, %.2f per run (production and sandbox: 2 when one page each)",
                    requests.feed, Double(requests.feed) / Double(max(runs, 1))))
        }
        if runsFallingBack > 0 {
            Swift.print("  runs (of any worker) that found the feed unhealthy: \(runsFallingBack)")
        }
        Swift.print("  event to database, minutes: kind, events, p50, p95, max, never reflected")
        var all: [TimeInterval] = []
        var missed = 0
        for (kind, values) in delays.sorted(by: { $0.key < $1.key }) {
            let found = values.compactMap { $0 }.sorted()
            all += found
            missed += values.count - found.count
            Swift.print("    \(Self.row(kind, values.count, found, values.count - found.count))")
        }
        Swift.print("    \(Self.row("all", all.count + missed, all.sorted(), missed))")
        let listed = all.map { $0 - listingDelay }.sorted()
        Swift.print("    \(Self.row("all, from listing", listed.count + missed, listed, missed))")
        if let requests {
            // Status requests grow with subscribers; the feed's with runs and with notifications.
            let monthlyStatus = Double(requests.status) * perMonth * 1_000_000
            let runsPerMonth = Double(runs) * 30 / days
            // Each window also reads the 15 minutes of overlap before it again.
            let pages =
                Double(notifications) * perMonth * 1_000_000 / 20 * (intervalMinutes + 15) / intervalMinutes
            let feedRequests = mode == .feed ? 2 * runsPerMonth + pages : 0
            Swift.print(
                String(
                    format:
                        """
                          one million subscribers: %.0f status requests a month (%.2f/s on average), \
                        %.0f feed requests (%.0f runs, %.0f pages of 20 notifications, overlap included), \
                        %.3f/s on average
                        """, monthlyStatus, monthlyStatus / (30 * 86_400), feedRequests, runsPerMonth, pages,
                    feedRequests / (30 * 86_400)))
        }
        Swift.print("  forged refunds: \(forged) listed, \(forgedApplied) recorded as refunds")
        let wrong = finalDiscrepancies.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        Swift.print(
            "  final backfill --all against Apple: \(wrong.isEmpty ? "no change (every state equals Apple's)" : wrong.joined(separator: ", "))"
        )
    }

    static func row(_ kind: String, _ count: Int, _ sorted: [TimeInterval], _ missed: Int) -> String {
        func percentile(_ p: Double) -> String {
            guard !sorted.isEmpty else { return "-" }
            let value = sorted[min(sorted.count - 1, Int((p * Double(sorted.count - 1)).rounded(.up)))]
            return String(format: "%.1f", value / 60)
        }
        let name = kind.padding(toLength: 22, withPad: " ", startingAt: 0)
        return "\(name) \(count) \(percentile(0.5)) \(percentile(0.95)) \(percentile(1)) \(missed)"
    }
}

/// The subscribers: mostly monthly renewals, some annual, and the month's cancellations, refunds,
/// billing failures, recoveries and grace periods, their purchases spread over the period before the
/// first run so that their events fall through the month.
struct Population {
    var receipts: [(user: String, receipt: SimulatedReceipt)] = []
    var counts: [String: Int] = [:]

    static let mix: [(Scenario, annual: Bool, weight: Int)] = [
        (.renewal, false, 58), (.renewal, true, 15), (.voluntaryExpiry, false, 8), (.refund, false, 5),
        (.billingRetry, false, 4), (.billingRecovery, false, 4), (.gracePeriod, false, 3), (.upgrade, false, 3),
    ]

    init(subscribers: Int, seed: UInt64, origin: Date) {
        var random = SplitMix64(seed: seed)
        let total = Self.mix.map(\.weight).reduce(0, +)
        for index in 0..<subscribers {
            var pick = Int(random.next() % UInt64(total))
            var choice = Self.mix[0]
            for entry in Self.mix {
                if pick < entry.weight {
                    choice = entry
                    break
                }
                pick -= entry.weight
            }
            let period: TimeInterval = (choice.annual ? 365 : 30) * 86_400
            let age = Double(random.next() % 1_000_000) / 1_000_000 * period
            let receipt = SimulatedReceipt(
                account: "month-\(seed)-\(index)", scenario: choice.0, start: origin.addingTimeInterval(-age),
                period: period)
            receipts.append(("user-\(index)", receipt))
            counts[choice.0.rawValue + (choice.annual ? " (annual)" : ""), default: 0] += 1
        }
    }

    var summary: String {
        counts.sorted { $0.value > $1.value }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
    }
}

/// A small seeded generator, so a population is the same on every machine.
struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
