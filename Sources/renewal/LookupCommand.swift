import ArgumentParser
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalServerAPI
import RenewalStorage

struct LookupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookup",
        abstract: "Look up a customer's order ID at Apple: its transactions, and whose each subscription is here.",
        discussion: """
            For support ("I paid but have no access"): asks Apple's Look Up Order ID (production only: Apple does not \
            serve it in the sandbox) with the order ID from the customer's e-mailed receipt, verifies every signed transaction (chain, bundle, environment), and \
            prints them with each subscription's state as the database holds it and whose it is: a user, \
            unclaimed (adopted from Apple's change feed, no user yet; attach it with `renewal claim`), or not \
            in the database. Writes nothing (on PostgreSQL, only the request budget's slots). --json prints \
            one object: order_id, status (valid or invalid), environment, bundle_id, transactions, \
            subscriptions, refused. Exit 0 for a valid order, 3 for an invalid order ID or a transaction that \
            failed verification, 4 when Apple could not be reached, 78 without App Store Server API \
            credentials.
            """ + EnvironmentHelp.text(.database, .apple, .logging))

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The order ID on the customer's e-mailed receipt from Apple (e.g. MQ5ZN4B4CK).", valueName: "id"))
    var orderID: String

    @Flag(name: .long, help: "Print JSON (the stable contract) instead of text.")
    var json = false

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var serverAPI: ServerAPIOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try OrderSupport.validate(orderID: orderID)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        try await ExitMapping.run {
            let apple = try OrderSupport.resolve(
                appStore: appStore, serverAPI: serverAPI, command: "lookup", logger: logger)
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            let order = try await OrderSupport.reportingFailure {
                try await OrderSupport.lookUp(
                    orderID: orderID, apple: apple, serverAPI: serverAPI, store: store, logger: logger)
            }
            let held = try await OrderSupport.held(order, store: store)
            print(json ? OrderOutput.json(order, held: held) : OrderOutput.text(order, held: held), terminator: "")
            guard order.isValid else {
                FileHandle.standardError.write(
                    Data(
                        """
                        renewal: Apple does not know order ID \(orderID) (Look Up Order ID answered status 1); check \
                        it against the customer's e-mailed receipt (Apple's order ID, not a transaction id).

                        """.utf8))
                throw ExitCode(ExitStatus.someFailed.rawValue)
            }
            if !order.refused.isEmpty { throw ExitCode(ExitStatus.someFailed.rawValue) }
        }
    }
}

/// An order as Apple's Look Up Order ID gave it: verified transactions, or none for an invalid id.
struct LookedUpOrder: Sendable {
    var orderID: String
    var isValid: Bool
    /// The app whose key found the order (nil: the one app of the `APPSTORE_*` variables).
    var bundleID: String?
    var environment: AppStoreEnvironment?
    var transactions: [JWSTransaction]
    var refused: [FailureReason]

    /// The original transaction ids of its auto-renewable subscriptions, each once, in Apple's order.
    var subscriptionIDs: [String] {
        var seen = Set<String>()
        return transactions.filter(\.isAutoRenewableSubscription).compactMap(\.originalTransactionId).filter {
            seen.insert($0).inserted
        }
    }
}

/// What `renewal lookup` and `renewal claim` share: the credentials check, the order lookup over every
/// app's key, and the database's view of the order's subscriptions.
enum OrderSupport {
    static func validate(orderID: String) throws {
        guard !orderID.isEmpty, orderID.count <= 64, orderID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
        else {
            throw ValidationError(
                "--order-id takes the order ID from the customer's e-mailed receipt: letters and digits, like MQ5ZN4B4CK."
            )
        }
    }

    /// The Apple setup, refusing (exit 78, naming the variables) when no app has a Server API key.
    static func resolve(appStore: AppStoreOptions, serverAPI: ServerAPIOptions, command: String, logger: Logger) throws
        -> AppleSetup
    {
        let missing = ConfigurationError(
            """
            renewal \(command) needs App Store Server API credentials: set APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, \
            APPSTORE_BUNDLE_ID and APPSTORE_PRIVATE_KEY_FILE (or each app's key in the apps file).
            """)
        if appStore.resolvedAppsFile == nil,
            try serverAPI.configuration(
                bundleID: appStore.resolvedBundleID, timeout: appStore.timeout, maxAttempts: appStore.maxAttempts,
                connections: 2) == nil
        {
            throw missing
        }
        let apple = try AppleSetup.resolve(appStore: appStore, serverAPI: serverAPI, concurrency: 2, logger: logger)
        guard apple.serverAPI != nil || (apple.apps ?? []).contains(where: { $0.serverAPI != nil }) else {
            throw missing
        }
        return apple
    }

    /// Runs `body` with every app's Server API client (keyed by bundle id; nil for one app), spending the
    /// command's request budget: the status budget every endpoint shares, and each support endpoint's own.
    static func withClients<T: Sendable>(
        apple: AppleSetup, serverAPI: ServerAPIOptions, store: any RenewalStore, logger: Logger,
        _ body: ([String?: ServerAPIClient], OrderBudgets) async throws -> T
    ) async throws -> T {
        try await AppleTransport.withAppleTransport(requestTimeout: .seconds(30), connectionsPerHost: 2) { transport in
            let budget = AppleSetup.requestBudget(serverAPI: serverAPI, store: store, logger: logger)
            let reserve: FleetRequestBudget.Reserve = { bucket, interval in
                try await store.reserveRequestSlot(bucket: bucket, interval: interval)
            }
            let budgets = OrderBudgets(
                lookUp: FleetRequestBudget(rates: OrderEndpoints.lookUp.rates, logger: logger, reserve: reserve),
                setAppAccountToken: FleetRequestBudget(
                    rates: OrderEndpoints.setAppAccountToken.rates, logger: logger, reserve: reserve))
            return try await body(apple.serverAPIClients(transport: transport, budget: budget), budgets)
        }
    }

    /// Asks each app's key in turn until one finds the order; invalid only when every one says so.
    static func lookUp(
        orderID: String, apple: AppleSetup, serverAPI: ServerAPIOptions, store: any RenewalStore, logger: Logger
    ) async throws -> LookedUpOrder {
        try await withClients(apple: apple, serverAPI: serverAPI, store: store, logger: logger) { clients, budgets in
            try await lookUp(orderID: orderID, clients: clients, budget: budgets.lookUp, logger: logger)
        }
    }

    static func lookUp(
        orderID: String, clients: [String?: ServerAPIClient], budget: any RequestBudget, logger: Logger
    ) async throws -> LookedUpOrder {
        for (bundleID, client) in clients.sorted(by: { ($0.key ?? "") < ($1.key ?? "") }) {
            switch await client.lookUpOrder(orderID: orderID, endpointBudget: budget, logger: logger) {
            case .success(.found(let environment, let transactions, let refused)):
                return LookedUpOrder(
                    orderID: orderID, isValid: true, bundleID: bundleID ?? client.configuration.bundleID,
                    environment: environment, transactions: transactions, refused: refused)
            case .success(.invalidOrder):
                continue
            case .failure(let error):
                throw OrderLookupFailure(error: error, orderID: orderID)
            }
        }
        return LookedUpOrder(
            orderID: orderID, isValid: false, bundleID: nil, environment: nil, transactions: [], refused: [])
    }

    /// Runs `body`; an `OrderLookupFailure` is printed and ends the command with its exit code.
    static func reportingFailure<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let failure as OrderLookupFailure {
            FileHandle.standardError.write(Data("renewal: \(failure)\n".utf8))
            throw ExitCode(failure.exitCode)
        }
    }

    /// The database's view of the order's subscriptions, by original transaction id.
    static func held(_ order: LookedUpOrder, store: any RenewalStore) async throws -> [String: HeldSubscription] {
        guard let reader = store as? any HeldSubscriptionReading else { return [:] }
        return try await reader.heldSubscriptions(originalTransactionIDs: order.subscriptionIDs)
    }
}

/// The request budgets of the two support endpoints, shared by every worker on the database.
struct OrderBudgets: Sendable {
    var lookUp: any RequestBudget
    var setAppAccountToken: any RequestBudget
}

/// Apple gave no answer about the order: exit 78 for a refused key, 4 when Apple could not be reached,
/// 3 for any other refusal.
struct OrderLookupFailure: Error, CustomStringConvertible {
    var error: AppleAPIError
    var orderID: String

    var exitCode: Int32 {
        if error == .unauthorized { return ExitStatus.configuration.rawValue }
        return error.isOutage ? ExitStatus.appleUnavailable.rawValue : ExitStatus.someFailed.rawValue
    }

    var description: String {
        if error == .unauthorized {
            return """
                The App Store Server API refused the key while looking up order ID \(orderID) (HTTP 401; Look Up \
                Order ID is asked in production only); check APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, \
                APPSTORE_BUNDLE_ID and the key file.
                """
        }
        let why =
            error.isOutage
            ? "the App Store Server API could not be reached or answered with a temporary error"
            : "the App Store Server API refused the request"
        return
            "Looking up order ID \(orderID) failed (\(error.reason.rawValue)): \(why). Nothing was changed; try again."
    }
}
