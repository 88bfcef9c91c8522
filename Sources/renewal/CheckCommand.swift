import ArgumentParser
import Foundation
import Logging
import RenewalAppleAPI
import RenewalAppStore
import RenewalCore
import RenewalDelivery
import RenewalJob
import RenewalServerAPI
import RenewalStorage

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate the configuration and test the database and Apple connections; changes nothing.",
        discussion: """
            Apple checks the shared secret only for a receipt it can read, so `check` sends one receipt \
            stored in the database (nothing is written but, on PostgreSQL, the request budget's slots its \
            Server API requests take, as every command's do). With no stored receipt it can only \
            prove that Apple answers, and says so. With an apps file, each app is checked with its own \
            credentials against one of its own stored receipts. Exit 0 when all is well, 78 on a configuration \
            problem (database, shared secret rejected with 21004, another app's receipt), 4 when Apple cannot be \
            reached.
            """ + EnvironmentHelp.text(.database, .apple, .webhook))

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var serverAPI: ServerAPIOptions
    @OptionGroup var webhook: WebhookOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        try await ExitMapping.run {
            let logger = logging.makeLogger()
            try EndpointPairs(appStore: appStore, serverAPI: serverAPI).check()
            if appStore.resolvedAppsFile != nil {
                try await checkApps(logger: logger)
                return
            }
            let serverAPIConfiguration = try serverAPI.configuration(
                bundleID: appStore.resolvedBundleID, timeout: appStore.timeout, maxAttempts: 1, connections: 2)
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            print("database: ok (\(store.backendName), schema current)")
            if webhook.resolvedURL != nil {
                var configuration = WebhookDelivery.Configuration(url: try webhook.url(), signer: try webhook.signer())
                configuration.requestTimeout = .milliseconds(Int64(appStore.timeout * 1000))
                let problem = try await WebhookDelivery.withHTTPClient { client in
                    try await WebhookDelivery.sendTest(configuration: configuration, client: client)
                }
                if let problem {
                    throw ConfigurationError(
                        """
                        webhook: the endpoint did not take a signed webhook.test event (\(problem)); check \
                        RENEWAL_WEBHOOK_URL and that the receiver verifies with the secret in RENEWAL_WEBHOOK_SECRET_FILE.
                        """)
                }
                print("webhook: ok (the endpoint took a signed webhook.test event)")
            }
            let withoutReceipt = try await store.countWithoutReceipt()
            if withoutReceipt > 0 {
                if serverAPIConfiguration == nil {
                    print(
                        """
                        storekit 2 rows: \(withoutReceipt) imported by transaction id wait for App Store Server API \
                        credentials (APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID, \
                        APPSTORE_PRIVATE_KEY_FILE); until then run and backfill fail them with needs_server_api
                        """)
                } else {
                    print("storekit 2 rows: \(withoutReceipt) imported by transaction id, checked by the Server API")
                }
            }
            if let serverAPIConfiguration {
                try await Self.checkServerAPI(
                    serverAPIConfiguration, store: store,
                    budget: AppleSetup.requestBudget(serverAPI: serverAPI, store: store, logger: logger), logger: logger
                )
                // A team that finished migrating may have no shared secret any more.
                guard SharedSecret.isSet else {
                    print(
                        "shared secret: not set; verifyReceipt is not used (rows the Server API cannot check will fail)"
                    )
                    return
                }
            }
            let secret = try SharedSecret.load()
            print("shared secret: set (\(secret.count) characters)")
            let identity = try await appStore.identity(store: store)
            if let bundleID = identity.bundleID {
                print("bundle id: \(bundleID)")
            } else {
                print("bundle id: not set; set APPSTORE_BUNDLE_ID so answers for another app's receipts change nothing")
            }
            let configuration = AppStoreClient.Configuration(
                productionURL: appStore.resolvedProductionURL, sandboxURL: appStore.resolvedSandboxURL,
                sharedSecret: secret, requestTimeout: .milliseconds(Int64(appStore.timeout * 1000)), maxAttempts: 1)
            let sample = try await Self.sampleReceipt(in: store, withReceipt: true)
            let probe = sample?.latestReceipt ?? Data("renewal-check".utf8).base64EncodedString()
            let answer = try await AppStoreClient.withAppStoreClient(configuration: configuration) { client in
                await client.verify(receipt: probe, logger: logger)
            }
            try Self.report(answer, sample: sample, identity: identity, url: appStore.resolvedProductionURL)
            try await Self.probeSandbox(configuration, logger: logger)
        }
    }

    /// A run sends sandbox receipts to the sandbox URL: `check` asks it too, with a made-up receipt
    /// (never a customer's), and any answer Apple's format allows proves it is reached.
    static func probeSandbox(_ configuration: AppStoreClient.Configuration, logger: Logger) async throws {
        var sandbox = configuration
        sandbox.productionURL = configuration.sandboxURL
        let answer = try await AppStoreClient.withAppStoreClient(configuration: sandbox) { client in
            await client.verify(receipt: Data("renewal-check".utf8).base64EncodedString(), logger: logger)
        }
        if case .transient(let failure, let isOutage) = answer {
            if failure.reason == .environmentLoop {
                // The sandbox URL answers as production does (21007) or sends the receipt back (21008).
                throw ConfigurationError(
                    """
                    The sandbox verifyReceipt URL \(configuration.sandboxURL) answered a made-up receipt with \
                    21007/21008, as if it were the other environment's endpoint. Set \
                    APPSTORE_SANDBOX_VERIFY_RECEIPT_URL (--sandbox-url) to the sandbox endpoint \
                    (https://sandbox.itunes.apple.com/verifyReceipt).
                    """)
            }
            FileHandle.standardError.write(
                Data("renewal: apple sandbox (\(configuration.sandboxURL)): \(failure.message)\n".utf8))
            throw ExitCode(isOutage ? ExitStatus.appleUnavailable.rawValue : ExitStatus.internalError.rawValue)
        }
        print("apple sandbox: ok (\(configuration.sandboxURL) answers)")
    }

    /// Several apps: the apps file reads (secrets and keys included), then each app's Server API key and
    /// shared secret are tried with one of that app's own stored receipts. Every app is checked before
    /// the first problem ends the command.
    private func checkApps(logger: Logger) async throws {
        var apple = try AppleSetup.resolve(appStore: appStore, serverAPI: serverAPI, concurrency: 2, logger: logger)
        let store = try StoreFactory.open(database.resolved, create: false)
        try await store.checkSchema()
        print("database: ok (\(store.backendName), schema current)")
        _ = try await apple.resolveIdentities(appStore: appStore, store: store)
        let apps = apple.apps ?? []
        print("apps file: \(apps.count) apps (\(apps.compactMap(\.identity.bundleID).joined(separator: ", ")))")
        var problems: [String] = []
        var unreachable = false
        for app in apps {
            let bundleID = app.identity.bundleID ?? ""
            print("")
            print("app \(bundleID):")
            do {
                if var configuration = app.serverAPI {
                    configuration.maxAttempts = 1
                    try await Self.checkServerAPI(
                        configuration, store: store, app: bundleID,
                        budget: AppleSetup.requestBudget(serverAPI: serverAPI, store: store, logger: logger),
                        logger: logger)
                }
                guard let secret = app.verifyReceipt.sharedSecret else {
                    print("shared secret: none in the apps file; verifyReceipt is not used for this app")
                    continue
                }
                print("shared secret: read from its file (\(secret.count) characters)")
                var configuration = app.verifyReceipt
                configuration.maxAttempts = 1
                let sample = try await Self.sampleReceipt(in: store, app: bundleID, withReceipt: true)
                guard let sample, let receipt = sample.latestReceipt else {
                    print(
                        """
                        shared secret: not confirmed: the database holds no receipt of this app yet (Apple checks a \
                        secret only for a receipt of its app); run `renewal check` again after a run has pinned one
                        """)
                    continue
                }
                let answer = try await AppStoreClient.withAppStoreClient(configuration: configuration) { client in
                    await client.verify(receipt: receipt, logger: logger)
                }
                try Self.report(
                    answer, sample: sample, identity: app.identity, url: configuration.productionURL,
                    secretSetting: "the shared_secret_file of \(bundleID)")
                try await Self.probeSandbox(configuration, logger: logger)
            } catch let error as ConfigurationError {
                FileHandle.standardError.write(Data("renewal: \(bundleID): \(error.description)\n".utf8))
                problems.append(bundleID)
            } catch let exit as ExitCode where exit.rawValue == 4 {
                unreachable = true
            }
        }
        if !problems.isEmpty {
            throw ConfigurationError("apps file: \(problems.joined(separator: ", ")) failed the check (see above).")
        }
        if unreachable { throw ExitCode(ExitStatus.appleUnavailable.rawValue) }
    }

    /// The key parses (it did, to get here); a signed request reaches both environments and the
    /// token is accepted: 401 from both is exit 78. Asks by a stored receipt's transaction id when
    /// there is one (and reports what Apple says of it), else by a made-up id Apple answers 404.
    static func checkServerAPI(
        _ configuration: ServerAPIClient.Configuration, store: any SubscriptionStore, app: String? = nil,
        budget: any RequestBudget, logger: Logger
    ) async throws {
        print(
            """
            server api: key \(configuration.keyID) of issuer \(configuration.issuerID) for \
            \(configuration.bundleID) (key file parses)
            """
        )
        let sample = try await sampleReceipt(in: store, app: app)
        let id = sample.flatMap {
            ServerAPIClient.lookupID(
                for: ReceiptCheck(
                    receipt: $0.latestReceipt, originalTransactionID: $0.originalTransactionID,
                    subscriptionIDs: $0.subscriptions.map(\.snapshot.originalTransactionID), environment: $0.environment
                ))
        }
        let now = Date()
        let (answer, feed, sandboxFeed) = try await AppleSetup.withServerAPIClient(configuration, budget: budget) {
            client in
            (
                await client.statuses(transactionID: id ?? "0", preferring: sample?.environment, logger: logger),
                await client.notificationHistory(
                    environment: .production, start: now.addingTimeInterval(-86_400), end: now, token: nil,
                    logger: logger),
                // Every URL a run would use is tried: the sandbox's feed too.
                await client.notificationHistory(
                    environment: .sandbox, start: now.addingTimeInterval(-86_400), end: now, token: nil,
                    logger: logger)
            )
        }
        Self.report(feed: feed)
        switch sandboxFeed {
        case .success:
            print("server api sandbox: ok (\(configuration.sandboxURL) accepts the token)")
        case .failure(let error) where error.isOutage:
            FileHandle.standardError.write(
                Data("renewal: server api sandbox (\(configuration.sandboxURL)): \(error.message(.serverAPI))\n".utf8))
            throw ExitCode(ExitStatus.appleUnavailable.rawValue)
        case .failure(let error):
            print("server api sandbox: \(configuration.sandboxURL) answers (\(error.reason))")
        }
        let whose = id == nil ? "a made-up transaction id" : "the transaction id of user \(sample?.userID ?? "")"
        switch answer {
        case .misconfigured(let failure):
            throw ConfigurationError("server api: \(failure.message)")
        case .verified(let evidence):
            print(
                """
                server api: ok (\(configuration.productionURL) accepts the token; signed answer for \(whose) \
                verified to the trusted root, \(evidence.subscriptions.count) subscription(s), \
                \(evidence.environment?.rawValue ?? "unknown environment"))
                """
            )
        case .transient(let failure, let isOutage):
            if failure.reason == .transactionNotFound {
                print("server api: ok (the token is accepted; Apple knows no transaction by \(whose))")
            } else if isOutage {
                FileHandle.standardError.write(Data("renewal: server api: \(failure.message)\n".utf8))
                throw ExitCode(ExitStatus.appleUnavailable.rawValue)
            } else {
                throw ConfigurationError("server api: \(failure.message)")
            }
        case .rejected(let rejection):
            print("server api: ok (answered \(rejection.reason))")
        }
    }

    /// One page of the last day's Notification History (production) proves the change feed is
    /// readable; an empty one is the sign of an app with no App Store Server Notifications V2 URL.
    static func report(feed: Result<NotificationHistoryPage, AppleAPIError>) {
        switch feed {
        case .success(let page):
            let count = page.notificationHistory?.count ?? 0
            if count == 0 {
                print(
                    """
                    change feed: readable, but no notification in the last day (production). If subscriptions \
                    renew, set the App Store Server Notifications V2 URL in App Store Connect: Notification History \
                    lists only what Apple tried to send there, and without it runs fall back to polling
                    """)
            } else {
                print("change feed: ok (\(count)\(page.hasMore == true ? "+" : "") notifications in the last day)")
            }
        case .failure(let error):
            print(
                "change feed: not readable (\(error.reason)); runs fall back to polling. \(error.message(.serverAPI))")
        }
    }

    /// A stored receipt Apple verified before (it holds subscriptions), else any stored receipt; with
    /// `withReceipt`, one that holds a receipt (not a StoreKit 2 row imported by id), from the first pages.
    /// With `app`, only that app's receipts (pinned to it).
    static func sampleReceipt(in store: any SubscriptionStore, app: String? = nil, withReceipt: Bool = false)
        async throws -> StoredReceipt?
    {
        let apps = app.map { [$0] } ?? []
        let verified = BackfillSelector(
            states: [.active, .gracePeriod, .billingRetry, .expired, .revoked], bundleIDs: apps)
        for selector in [verified, BackfillSelector(all: true, bundleIDs: apps)] {
            let page = try await store.nextBatch(.backfill(selector), after: nil, limit: 50, lease: nil)
            if let receipt = page.first(where: { !withReceipt || $0.latestReceipt != nil }) { return receipt }
        }
        return nil
    }

    static func report(
        _ answer: AppleAnswer, sample: StoredReceipt?, identity: AppIdentity, url: String,
        secretSetting: String = "APPSTORE_SHARED_SECRET"
    ) throws {
        let whose = sample.map { "the stored receipt of user \($0.userID)" } ?? "a made-up receipt"
        switch answer {
        case .misconfigured:
            throw ConfigurationError(
                """
                Apple rejected the shared secret (21004) for \(whose). Set \(secretSetting) to the app's \
                shared secret from App Store Connect.
                """
            )
        case .verified(let evidence):
            print("apple: ok (\(url) answers)")
            print("shared secret: accepted by Apple for \(whose)")
            if case .failure(let screening) = identity.screen(evidence) {
                throw ConfigurationError("\(whose): \(screening.message)")
            }
        case .rejected(let rejection):
            print("apple: ok (\(url) answers)")
            if let sample {
                print(
                    """
                    shared secret: not confirmed: Apple could not read the stored receipt of user \
                    \(sample.userID) (\(rejection.reason)), and it checks the secret only for a receipt it can \
                    read
                    """
                )
            } else {
                print(
                    """
                    shared secret: not confirmed: the database holds no receipt yet (StoreKit 2 rows hold none), \
                    and Apple checks the secret only for a receipt it can read; run `renewal check` again after \
                    importing one
                    """
                )
            }
        case .transient(let failure, let isOutage):
            FileHandle.standardError.write(Data("renewal: apple: \(failure.message)\n".utf8))
            throw ExitCode(isOutage ? ExitStatus.appleUnavailable.rawValue : ExitStatus.internalError.rawValue)
        }
    }
}
