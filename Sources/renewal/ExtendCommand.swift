import ArgumentParser
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage
import Synchronization

struct ExtendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extend",
        abstract: "Extend subscribers' renewal dates with Apple (after an outage, say), each once.",
        discussion: """
            Asks Apple's Extend a Subscription Renewal Date for every subscription of each --user that Apple \
            can extend (paid and active, not in a free trial, not family-shared or a multiseat member, extended \
            fewer than twice in 365 days); --dry-run lists who would be extended and who cannot be, and why, \
            judged as the real call judges them, and sends nothing. Requests are sent under the run lock: while \
            another run holds it (SQLite), extend exits 75 and sends nothing. \
            Apple cannot undo an extension and e-mails every customer, so each request's identifier is stored \
            before it is sent: a second invocation of the same intent (--intent, by default the days, the \
            reason and today's UTC date), a crash or a kill -9 never sends a second one. A request sent without \
            a recorded answer is never sent again; Apple's RENEWAL_EXTENDED notification confirms it. The \
            named subscribers are then checked again, as `backfill --user` does (same --report and exit codes \
            as `run`; 3 when some extension is unconfirmed or not sent). --product sends one request Apple \
            carries out over hours; later runs follow it to completion. Needs App Store Server API credentials.
            """ + EnvironmentHelp.text(.database, .apple, .webhook, .logging))

    @Option(name: .long, help: ArgumentHelp("Days to extend each renewal date by: 1 to 90.", valueName: "days"))
    var days: Int

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Apple's extendReasonCode: 0 undeclared, 1 customer satisfaction, 2 other, 3 service issue or outage.",
            valueName: "code"))
    var reason: Int

    @Option(name: .customLong("user"), help: ArgumentHelp("A user id (repeatable).", valueName: "id"))
    var users: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Every active subscriber of this product, by one request Apple carries out over hours (instead of \
            --user); later runs follow it until Apple says it is complete.
            """,
            valueName: "id"))
    var product: String?

    @Option(
        name: .customLong("storefront"),
        help: ArgumentHelp(
            "With --product, only subscribers of this App Store country, e.g. USA (repeatable; default all).",
            valueName: "code"))
    var storefronts: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Names the intent (e.g. outage-2026-11-26): the same intent is sent to a subscription once. Default: \
            the days, the reason and today's UTC date.
            """,
            valueName: "name"))
    var intent: String?

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var serverAPI: ServerAPIOptions
    @OptionGroup var options: ExtendOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard RenewalExtension.days.contains(days) else {
            throw ValidationError("--days must be between 1 and 90 (Apple extends by at most 90 days); got \(days).")
        }
        guard RenewalExtension.reasons.contains(reason) else {
            throw ValidationError(
                "--reason must be 0 (undeclared), 1 (customer satisfaction), 2 (other) or 3 (service issue or outage).")
        }
        guard users.isEmpty != (product == nil) else {
            throw ValidationError(
                "Name the subscribers to extend with --user ID (repeatable), or every subscriber of a product with --product ID."
            )
        }
        guard storefronts.isEmpty || product != nil else {
            throw ValidationError("--storefront narrows --product; with --user, name the users instead.")
        }
        for code in storefronts where code.count != 3 || !code.allSatisfy({ $0.isASCII && $0.isUppercase }) {
            throw ValidationError("--storefront takes ISO 3166-1 alpha-3 codes such as USA or FRA; got \(code).")
        }
        if let intent, intent.isEmpty || intent.count > 200 {
            throw ValidationError("--intent must be 1 to 200 characters.")
        }
    }

    func run() async throws {
        let runOptions = try options.runOptions()
        let clock = runOptions.clock
        let intent = self.intent ?? "days=\(days) reason=\(reason) \(Timestamp.string(clock()).prefix(10))"
        let logger = logging.makeLogger()
        var checked: [String] = []
        try await ExitMapping.run {
            let apple = try AppleSetup.resolve(
                appStore: appStore, serverAPI: serverAPI, concurrency: runOptions.concurrency, logger: logger)
            guard apple.serverAPI != nil || (apple.apps ?? []).contains(where: { $0.serverAPI != nil }) else {
                throw ConfigurationError(
                    """
                    renewal extend needs App Store Server API credentials: set APPSTORE_KEY_ID, \
                    APPSTORE_ISSUER_ID and APPSTORE_PRIVATE_KEY_FILE (or each app's key in the apps file).
                    """)
            }
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            if let product {
                let request = RenewalExtensions.MassRequest(
                    intent: intent, days: days, reason: reason, productID: product, storefronts: storefronts)
                return try await extendProduct(request, apple: apple, store: store, clock: clock, logger: logger)
            }
            let request = RenewalExtensions.Request(intent: intent, days: days, reason: reason, userIDs: users)
            if options.dryRun {
                let lines = try await withExtensions(apple: apple, store: store, clock: clock, logger: logger) {
                    try await $0.run(request, dryRun: true)
                }
                print(Self.table(lines, dryRun: true))
                if lines.contains(where: { $0.outcome.isUnfinished }) { throw ExitCode(3) }
                return
            }
            checked = try await store.extensionCandidates(userIDs: users, now: clock()).map(\.userID)
            if checked.isEmpty {
                // Nobody to extend or check: said so, under the lock all the same.
                let lines = try await store.withRunLock(owner: "extend-\(ProcessInfo.processInfo.processIdentifier)") {
                    try await withExtensions(apple: apple, store: store, clock: clock, logger: logger) {
                        try await $0.run(request, dryRun: false)
                    }
                }
                print(Self.table(lines, dryRun: false))
            }
        }
        guard !checked.isEmpty else { return }
        // The extensions are sent under the run lock, just before the named subscribers are checked again: the
        // new renewal dates enter the database through the same decision as any answer, and the run writes
        // its report and exit code as `run` does.
        let unfinished = UnfinishedFlag()
        let request = RenewalExtensions.Request(intent: intent, days: days, reason: reason, userIDs: users)
        var runner = JobRunner(
            database: database, appStore: appStore, serverAPI: serverAPI, options: runOptions, logging: logging)
        runner.beforeRun = { store, clients in
            let extensions = RenewalExtensions(
                store: store, extenders: clients.mapValues { $0 as any OperatorActions }, logger: logger, now: clock)
            let lines = try await extensions.run(request, dryRun: false)
            print(Self.table(lines, dryRun: false))
            unfinished.value.withLock { $0 = lines.contains { $0.outcome.isUnfinished } }
        }
        try await runner.execute(.backfill(BackfillSelector(userIDs: Array(Set(checked)).sorted())))
        if unfinished.value.withLock({ $0 }) { throw ExitCode(3) }
    }

    /// `--product`: the dry run says what the real call would do; the real call is sent under the run lock.
    private func extendProduct(
        _ request: RenewalExtensions.MassRequest, apple: AppleSetup, store: any RenewalStore,
        clock: @escaping @Sendable () -> Date, logger: Logger
    ) async throws {
        if options.dryRun {
            // Streamed: a product may have millions of subscribers.
            print("Renewal-date extension (dry run: nothing sent)")
            var counts: [String: Int] = [:]
            let outcome = try await withExtensions(apple: apple, store: store, clock: clock, logger: logger) {
                try await $0.dryRunMass(request) { line, _ in
                    print(Self.line(line))
                    counts[String(line.outcome.name.split(separator: ":")[0]), default: 0] += 1
                }
            }
            if let outcome {
                print(Self.massLine(product: request.productID, storefronts: request.storefronts, outcome))
            } else {
                print("  " + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            }
            return
        }
        let outcome = try await store.withRunLock(owner: "extend-\(ProcessInfo.processInfo.processIdentifier)") {
            try await withExtensions(apple: apple, store: store, clock: clock, logger: logger) {
                try await $0.runMass(request)
            }
        }
        print(Self.massLine(product: request.productID, storefronts: request.storefronts, outcome))
        switch outcome {
        case .notAccepted, .noKey, .rejected: throw ExitCode(3)
        default: break
        }
    }

    /// Runs `body` with the extensions over every app's Server API client, spending the request budget.
    private func withExtensions<T: Sendable>(
        apple: AppleSetup, store: any RenewalStore, clock: @escaping @Sendable () -> Date, logger: Logger,
        _ body: (RenewalExtensions) async throws -> T
    ) async throws -> T {
        try await AppleTransport.withAppleTransport(
            requestTimeout: .milliseconds(Int64(appStore.timeout * 1000)), connectionsPerHost: 4
        ) { transport in
            let budget = AppleSetup.requestBudget(serverAPI: serverAPI, store: store, logger: logger)
            let clients = apple.serverAPIClients(transport: transport, budget: budget)
            return try await body(
                RenewalExtensions(
                    store: store, extenders: clients.mapValues { $0 as any OperatorActions }, logger: logger,
                    now: clock))
        }
    }

    /// Where a mass extension stands.
    static func massLine(product: String, storefronts: [String], _ outcome: RenewalExtensions.MassOutcome) -> String {
        let scope = product + (storefronts.isEmpty ? "" : " in " + storefronts.joined(separator: ", "))
        switch outcome {
        case .accepted:
            return "Mass renewal-date extension of \(scope): accepted; Apple carries it out over hours, runs follow it"
        case .inProgress(let succeeded, let failed):
            return
                "Mass renewal-date extension of \(scope): in progress (accepted before, not sent again; succeeded \(succeeded ?? 0), failed \(failed ?? 0) so far)"
        case .complete(let succeeded, let failed):
            return
                "Mass renewal-date extension of \(scope): complete (succeeded \(succeeded ?? 0), failed \(failed ?? 0))"
        case .rejected(let code, let reason):
            return
                "Mass renewal-date extension of \(scope): rejected by Apple (\(code.map { "\($0) " } ?? "")\(reason))"
        case .notAccepted(let reason):
            return
                "Mass renewal-date extension of \(scope): not accepted yet (\(reason)); the next run sends it again with the same identifier"
        case .noKey:
            return "Mass renewal-date extension of \(scope): no Server API key for the product's app"
        }
    }

    /// One line per subscription: the user, the subscription, its product and what became of it.
    static func table(_ lines: [RenewalExtensions.Line], dryRun: Bool) -> String {
        var text = dryRun ? "Renewal-date extension (dry run: nothing sent)\n" : "Renewal-date extension\n"
        for item in lines {
            text += line(item) + "\n"
        }
        let counts = Dictionary(grouping: lines, by: { $0.outcome.name.split(separator: ":")[0] }).mapValues(\.count)
        text += "  " + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return text
    }

    /// One subscription's line: the user, the subscription, its product and what became of it.
    static func line(_ line: RenewalExtensions.Line) -> String {
        var outcome = line.outcome.name
        switch line.outcome {
        case .extended(let effectiveAt?): outcome += " (effective \(Timestamp.string(effectiveAt)))"
        case .rejected(let code, let reason): outcome += " (\(code.map { "\($0) " } ?? "")\(reason))"
        case .notSent(let reason): outcome += " (\(reason); sent by a later invocation of this intent)"
        case .unconfirmed: outcome += " (sent before without an answer; never sent again)"
        default: break
        }
        return "  \(line.userID.padding(toLength: max(12, line.userID.count), withPad: " ", startingAt: 0)) "
            + "\(line.originalTransactionID ?? "-")  \(line.productID ?? "-")  \(outcome)"
    }
}

/// `renewal extend`'s own options besides the extension's: the dry run, and the check of the extended
/// subscribers that follows a real call.
struct ExtendOptions: ParsableArguments {
    @Flag(
        name: .long,
        help: """
            List who would be extended and who would not, and why, judged as the real call judges them (an \
            intent already sent, a mass extension in progress, the environment); send and store nothing.
            """)
    var dryRun = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write the JSON report of the check of the extended subscribers to this file (a .html file: the page).",
            valueName: "file"))
    var report: String?

    @Flag(name: .long, help: "No progress line on standard error while the extended subscribers are checked.")
    var quiet = false

    @Option(name: .long, help: .hidden)
    var now: String?

    @OptionGroup var webhook: WebhookOptions

    func validate() throws {
        if let now, Timestamp.date(now) == nil {
            throw ValidationError("--now must be an RFC 3339 time like 2026-01-31T12:00:00Z.")
        }
    }

    /// The options of the check that follows the extensions, as a `backfill --user` takes them.
    func runOptions() throws -> RunOptions {
        var options = try RunOptions.parse([])
        options.report = report
        options.quiet = quiet
        options.now = now
        options.webhook = webhook
        return options
    }
}

/// Whether some extension sent under the run lock is left unfinished (exit 3 after the check).
private final class UnfinishedFlag: Sendable {
    let value = Mutex(false)
}
