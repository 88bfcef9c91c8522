import Logging
import RenewalAppStore
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage

/// The Apple side of a run, resolved from the options before anything connects: one app from the
/// `APPSTORE_*` variables, or several from the apps file (`--apps` / `RENEWAL_APPS_FILE`).
struct AppleSetup {
    /// One app of several: its identity and credentials.
    struct App {
        var identity: AppIdentity
        /// verifyReceipt with this app's shared secret (nil: none sent).
        var verifyReceipt: AppStoreClient.Configuration
        var serverAPI: ServerAPIClient.Configuration?
    }

    var mode: SourceMode
    /// verifyReceipt with the one app's shared secret (several apps: without one, for the log).
    var verifyReceipt: AppStoreClient.Configuration
    /// The one app's Server API configuration (several apps: nil).
    var serverAPI: ServerAPIClient.Configuration?
    /// Several apps, in the apps file's order; nil for one app.
    var apps: [App]?

    /// Reads the settings, the secrets and the keys; any problem is a `ConfigurationError` naming
    /// the setting (or the apps file's entry) and the fix.
    static func resolve(
        appStore: AppStoreOptions, serverAPI options: ServerAPIOptions, concurrency: Int, logger: Logger
    ) throws -> AppleSetup {
        try EndpointPairs(appStore: appStore, serverAPI: options).check()
        let mode = options.resolvedSource ?? .auto
        var base = AppStoreClient.Configuration(
            productionURL: appStore.resolvedProductionURL, sandboxURL: appStore.resolvedSandboxURL,
            sharedSecret: nil, requestTimeout: .milliseconds(Int64(appStore.timeout * 1000)),
            maxResponseBytes: appStore.maxResponseBytes, maxAttempts: appStore.maxAttempts,
            maxConnectionsPerHost: concurrency)
        if let path = appStore.resolvedAppsFile {
            let file = try AppsFile.load(path: path)
            let ignored = AppsFile.ignoredVariables
            if !ignored.isEmpty {
                logger.warning(
                    "The apps file defines every app; these variables are ignored",
                    metadata: ["variables": "\(ignored.joined(separator: ","))"])
            }
            let apps = try file.apps.map { app in
                try Self.app(
                    app, mode: mode, base: base, appStore: appStore, options: options, concurrency: concurrency)
            }
            return AppleSetup(mode: mode, verifyReceipt: base, serverAPI: nil, apps: apps)
        }
        let serverAPI = try options.configuration(
            bundleID: appStore.resolvedBundleID, timeout: appStore.timeout, maxAttempts: appStore.maxAttempts,
            connections: concurrency)
        if mode == .serverAPI, serverAPI == nil {
            throw ConfigurationError(
                """
                --source server-api needs APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID and \
                APPSTORE_PRIVATE_KEY_FILE.
                """
            )
        }
        // verifyReceipt needs the shared secret unless every check goes to the Server API, or
        // the Server API is configured and the secret is not (a team that finished migrating).
        base.sharedSecret =
            mode == .serverAPI || (serverAPI != nil && !SharedSecret.isSet) ? nil : try SharedSecret.load()
        return AppleSetup(mode: mode, verifyReceipt: base, serverAPI: serverAPI, apps: nil)
    }

    private static func app(
        _ app: AppsFile.App, mode: SourceMode, base: AppStoreClient.Configuration, appStore: AppStoreOptions,
        options: ServerAPIOptions, concurrency: Int
    ) throws -> App {
        var serverAPI: ServerAPIClient.Configuration?
        if let keyID = app.keyID, let issuerID = app.issuerID, let keyFile = app.privateKeyFile {
            serverAPI = try options.configuration(
                keyID: keyID, issuerID: issuerID, keyFile: keyFile,
                keyFileSetting: "private_key_file of \(app.bundleID)", bundleID: app.bundleID,
                timeout: appStore.timeout, maxAttempts: appStore.maxAttempts, connections: concurrency)
            serverAPI?.budgetApp = app.bundleID
        }
        if mode == .serverAPI, serverAPI == nil {
            throw ConfigurationError(
                """
                --source server-api needs a Server API key for every app; \(app.bundleID) has none in the apps \
                file (key_id, issuer_id, private_key_file).
                """
            )
        }
        if mode == .verifyReceipt, app.sharedSecretFile == nil {
            throw ConfigurationError(
                """
                --source verify-receipt needs a shared secret for every app; \(app.bundleID) has no \
                shared_secret_file in the apps file.
                """
            )
        }
        var verifyReceipt = base
        verifyReceipt.sharedSecret = mode == .serverAPI ? nil : try AppsFile.sharedSecret(of: app)
        let identity = AppIdentity(
            bundleID: app.bundleID, productIDs: app.products, configuredIn: "the apps file's entry for \(app.bundleID)")
        return App(identity: identity, verifyReceipt: verifyReceipt, serverAPI: serverAPI)
    }

    /// The one app's identity (`APPSTORE_BUNDLE_ID`, `--products`), or with several apps each one's;
    /// `--products-from-database` adds the products the database has seen to each.
    mutating func resolveIdentities(appStore: AppStoreOptions, store: any SubscriptionStore) async throws
        -> AppIdentity
    {
        guard var apps else { return try await appStore.identity(store: store) }
        if appStore.productsFromDatabase {
            let known = try await store.knownProductIDs()
            for index in apps.indices {
                apps[index].identity.productIDs = (apps[index].identity.productIDs ?? []).union(known)
            }
            self.apps = apps
        }
        return AppIdentity()
    }

    /// The clients over one shared transport: the verifier a run asks (for several apps, the
    /// catalogue that routes each row to its app), and the change feed and transaction history when
    /// there is a Server API key.
    func makeVerifier(transport: AppleTransport, budget: any RequestBudget) -> (
        verifier: any ReceiptVerifier, feed: (any NotificationFeed)?, history: (any TransactionHistory)?,
        operatorActions: (any OperatorActions)?, catalogue: AppCatalogue?
    ) {
        let serverAPIClients = serverAPIClients(transport: transport, budget: budget)
        guard let apps else {
            let client = AppStoreClient(transport: transport, configuration: verifyReceipt)
            let serverAPIClient = serverAPIClients[nil]
            let router = SourceRouter(mode: mode, verifyReceipt: client, serverAPI: serverAPIClient)
            // The change feed comes with the Server API; verify-receipt asks only verifyReceipt.
            let serverAPIReader = mode == .verifyReceipt ? nil : serverAPIClient
            return (router, serverAPIReader, serverAPIReader, serverAPIReader, nil)
        }
        let catalogue = AppCatalogue(
            apps: apps.map { app in
                let client = AppStoreClient(transport: transport, configuration: app.verifyReceipt)
                let serverAPIClient = serverAPIClients[app.identity.bundleID]
                return AppCatalogue.App(
                    identity: app.identity,
                    verifier: SourceRouter(mode: mode, verifyReceipt: client, serverAPI: serverAPIClient),
                    // Apple's change feed is per app: each app's own key reads its own.
                    feed: mode == .verifyReceipt ? nil : serverAPIClient,
                    history: mode == .verifyReceipt ? nil : serverAPIClient,
                    operatorActions: mode == .verifyReceipt ? nil : serverAPIClient)
            })
        return (catalogue, nil, nil, nil, catalogue)
    }

    /// What the log shows of the Apple side: URLs, apps and which credentials each has; never a
    /// secret or a key.
    var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = [
            LogKey.appstoreClient: "\(verifyReceipt)", LogKey.appstoreSource: "\(mode.rawValue)",
        ]
        if let apps {
            metadata[LogKey.apps] = .string(
                apps.map { app in
                    let credentials = [
                        app.verifyReceipt.sharedSecret == nil ? nil : "shared secret",
                        app.serverAPI == nil ? nil : "Server API key \(app.serverAPI?.keyID ?? "")",
                    ].compactMap { $0 }
                    return "\(app.identity.bundleID ?? "") (\(credentials.joined(separator: ", ")))"
                }.joined(separator: "; "))
        } else {
            metadata[LogKey.appstoreServerAPI] = "\(serverAPI.map { "\($0)" } ?? "not configured")"
        }
        return metadata
    }
}
