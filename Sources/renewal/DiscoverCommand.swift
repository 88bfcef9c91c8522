import ArgumentParser
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage

struct DiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "Find and adopt purchases the database lacks in Apple's Notification History (up to 180 days back).",
        discussion: """
            Reads Notification History over the last --since (30d, 180d, 12h; at most 180 days, Apple's limit; \
            the sandbox keeps 30) for every configured app and environment, and adopts each subscription it \
            names that the database does not hold, as the change feed does for new notifications \
            (docs/lost-purchases.md): unclaimed, or claimed at once for the user its appAccountToken is \
            registered for. Adopted subscriptions are due now: the next `renewal run` checks them. Notifications \
            recorded before are not acted on again, so running it twice adopts nothing new; the regular feed's \
            cursor is not moved. Progress is stored after every page: a discover that was killed or failed goes \
            on from where it stopped when run again. Prints notifications read, subscriptions found, adopted, \
            already held, and the adopted transactions' revenue per currency, gross, refunded and net (--json: \
            one object). Spends the same request budget as `run`. Runs under the writers' lock. Exit 0 done, 3 a stream could not be \
            read or a notification failed verification, 64 --since over 180 days, 75 copy-database holds the \
            database, 78 no App Store Server API key or one Apple refused.
            """ + EnvironmentHelp.text(.database, .apple, .webhook, .logging))

    @Option(
        name: .long,
        help: ArgumentHelp("How far back to read: a number of days (d), hours (h) or minutes (m).", valueName: "age"))
    var since: String

    @Flag(name: .long, help: "Print JSON (the stable contract) instead of text.")
    var json = false

    @Option(name: .long, help: .hidden)
    var now: String?

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var serverAPI: ServerAPIOptions
    @OptionGroup var webhook: WebhookOptions
    @OptionGroup var logging: LoggingOptions

    /// The age `--since` gives, in seconds; nil when it is not one.
    static func age(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let amount = Double(text.dropLast()), amount > 0, amount.isFinite else {
            return nil
        }
        switch unit {
        case "m": return amount * 60
        case "h": return amount * 3_600
        case "d": return amount * 86_400
        default: return nil
        }
    }

    func validate() throws {
        guard let age = Self.age(since) else {
            throw ValidationError("--since takes an age such as 30d, 180d or 12h; \(since) is not one.")
        }
        guard age <= Discovery.longest else {
            throw ValidationError(
                "--since \(since) reaches back further than the 180 days Apple keeps Notification History; use 180d or less."
            )
        }
        if let now, Timestamp.date(now) == nil {
            throw ValidationError("--now must be an RFC 3339 time like 2026-01-31T12:00:00Z.")
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let fixed = now.flatMap(Timestamp.date)
        let clock: @Sendable () -> Date = { fixed ?? Date() }
        try await ExitMapping.run {
            var apple = try OrderSupport.resolve(
                appStore: appStore, serverAPI: serverAPI, command: "discover", logger: logger)
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            guard let progress = store as? any DiscoveryProgressStore, let held = store as? any HeldSubscriptionReading
            else {
                throw ConfigurationError("This database cannot record discover's progress; run `renewal migrate`.")
            }
            let identity = try await apple.resolveIdentities(appStore: appStore, store: store)
            var apps: [String: AppIdentity] = [:]
            for app in apple.apps ?? [] {
                if let bundleID = app.identity.bundleID { apps[bundleID] = app.identity }
            }
            let rules = EntitlementDecision.Rules(identity: identity, apps: apps)
            let queueWebhooks = webhook.resolvedURL != nil
            let age = Self.age(since) ?? Discovery.longest
            let resolved = apple
            // Refused (exit 75) before anything is written while copy-database copies the database.
            let outcome = try await store.withWriterLock {
                try await AppleTransport.withAppleTransport(requestTimeout: .seconds(30), connectionsPerHost: 2) {
                    transport in
                    let budget = AppleSetup.requestBudget(serverAPI: serverAPI, store: store, logger: logger)
                    let clients = resolved.serverAPIClients(transport: transport, budget: budget)
                    let feeds = clients.sorted { ($0.key ?? "") < ($1.key ?? "") }.map {
                        (app: $0.key, feed: $0.value as any NotificationFeed)
                    }
                    let discovery = Discovery(
                        feeds: feeds, store: store, progress: progress, held: held, rules: rules,
                        queueWebhooks: queueWebhooks, logger: logger, clock: clock)
                    return try await discovery.discover(since: age, now: clock())
                }
            }
            print(json ? DiscoverOutput.json(outcome) : DiscoverOutput.text(outcome), terminator: "")
            let refusedKeys = outcome.failed.filter { $0.value == .serverAPIUnauthorized }.map(\.key.key).sorted()
            if !refusedKeys.isEmpty {
                FileHandle.standardError.write(
                    Data(
                        """
                        renewal: the App Store Server API refused the key reading \(refusedKeys.joined(separator: ", ")) \
                        (HTTP 401); check APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID and the key file (or \
                        that app's entry in the apps file). The other streams were read.

                        """.utf8))
                throw ExitCode(ExitStatus.configuration.rawValue)
            }
            if !outcome.failed.isEmpty || !outcome.refused.isEmpty {
                throw ExitCode(ExitStatus.someFailed.rawValue)
            }
        }
    }
}
