import ArgumentParser
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage

struct ExtendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extend",
        abstract: "Extend subscribers' renewal dates with Apple (after an outage, say), each once.",
        discussion: """
            Asks Apple's Extend a Subscription Renewal Date for every subscription of each --user that Apple \
            can extend (paid and active, not in a free trial, not family-shared or a multiseat member, extended \
            fewer than twice in 365 days); --dry-run lists who would be extended and who cannot be, and why. \
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
    @OptionGroup var options: RunOptions
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
        var unfinished = false
        var checked: [String] = []
        try await ExitMapping.run {
            let logger = logging.makeLogger()
            let apple = try AppleSetup.resolve(
                appStore: appStore, serverAPI: serverAPI, concurrency: options.concurrency, logger: logger)
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            let clock = options.clock
            let intent = self.intent ?? "days=\(days) reason=\(reason) \(Timestamp.string(clock()).prefix(10))"
            let request = RenewalExtensions.Request(intent: intent, days: days, reason: reason, userIDs: users)
            let lines: [RenewalExtensions.Line] = try await AppleTransport.withAppleTransport(
                requestTimeout: .milliseconds(Int64(appStore.timeout * 1000)), connectionsPerHost: 4
            ) { transport in
                var extenders: [String?: any OperatorActions] = [:]
                if let configuration = apple.serverAPI {
                    extenders[nil] = ServerAPIClient(transport: transport, configuration: configuration)
                }
                for app in apple.apps ?? [] {
                    if let configuration = app.serverAPI {
                        extenders[app.identity.bundleID] = ServerAPIClient(
                            transport: transport, configuration: configuration)
                    }
                }
                guard !extenders.isEmpty else {
                    throw ConfigurationError(
                        """
                        renewal extend needs App Store Server API credentials: set APPSTORE_KEY_ID, \
                        APPSTORE_ISSUER_ID and APPSTORE_PRIVATE_KEY_FILE (or each app's key in the apps file).
                        """)
                }
                let extensions = RenewalExtensions(store: store, extenders: extenders, logger: logger, now: clock)
                if let product {
                    let massRequest = RenewalExtensions.MassRequest(
                        intent: intent, days: days, reason: reason, productID: product, storefronts: storefronts)
                    if options.dryRun {
                        // Streamed: a product may have millions of subscribers.
                        print("Renewal-date extension (dry run: nothing sent)")
                        var counts: [String: Int] = [:]
                        try await extensions.forEachSubscriber(massRequest) { line, _ in
                            print(Self.line(line))
                            counts[String(line.outcome.name.split(separator: ":")[0]), default: 0] += 1
                        }
                        print(
                            "  "
                                + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(
                                    separator: ", "))
                        return []
                    }
                    let outcome = try await extensions.runMass(massRequest)
                    print(Self.massLine(product: product, storefronts: storefronts, outcome))
                    switch outcome {
                    case .notAccepted, .noKey, .rejected: unfinished = true
                    default: break
                    }
                    return []
                }
                return try await extensions.run(request, dryRun: options.dryRun)
            }
            if product != nil { return }
            print(Self.table(lines, dryRun: options.dryRun))
            unfinished = unfinished || lines.contains { $0.outcome.isUnfinished }
            if !options.dryRun {
                checked = lines.compactMap { $0.outcome == .noSubscription ? nil : $0.userID }
            }
        }
        if !checked.isEmpty {
            // The named subscribers are checked again: the new renewal dates enter the database through the
            // same decision as any answer, and the run writes its report and exit code as `run` does.
            try await JobRunner(
                database: database, appStore: appStore, serverAPI: serverAPI, options: options, logging: logging
            ).execute(.backfill(BackfillSelector(userIDs: Array(Set(checked)).sorted())))
        }
        if unfinished { throw ExitCode(3) }
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
