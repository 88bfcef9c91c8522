import ArgumentParser
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalServerAPI
import RenewalStorage

struct ClaimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "claim",
        abstract: "Attach a subscription (an unclaimed purchase, say) to a user, by its id or the customer's order ID.",
        discussion: """
            For support: makes the subscription --original-transaction-id, or every subscription of the order \
            --order-id (looked up at Apple's Look Up Order ID and verified), the --user's, and records a \
            purchase_claimed change for them (queued as a purchase.claimed webhook when a webhook URL is set; \
            delivered by the next run or `renewal deliver`). An order is claimed whole or not at all: every \
            subscription is checked first. A subscription that belongs to another user is refused (exit 78, \
            naming each owner; nothing claimed) unless --reassign moves it; the refusal and the move are both \
            recorded in ownership_conflicts. --set-app-account-token also binds that token at Apple (Set App \
            Account Token), so Apple's later notifications carry it. Runs under the writers' lock: while \
            copy-database copies the database it exits 75 and changes nothing. Exit 0 claimed (or already the \
            user's), 3 for an invalid order ID, a subscription the database does not hold, or a token Apple did \
            not take (the claim stays; run the same command again), 4 Apple unreachable, 78 owned by another \
            user, or Server API credentials missing for --order-id or --set-app-account-token.
            """ + EnvironmentHelp.text(.database, .apple, .webhook, .logging))

    @Option(name: .long, help: ArgumentHelp("The subscription's original transaction id.", valueName: "id"))
    var originalTransactionID: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The order ID on the customer's e-mailed receipt: each of its subscriptions is claimed.", valueName: "id"))
    var orderID: String?

    @Option(name: .long, help: ArgumentHelp("The app's user id to attach it to.", valueName: "id"))
    var user: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Also bind this appAccountToken (a UUID) to the subscription at Apple.", valueName: "uuid"))
    var setAppAccountToken: String?

    @Flag(name: .long, help: "Move a subscription that belongs to another user (recorded).")
    var reassign = false

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var serverAPI: ServerAPIOptions
    @OptionGroup var webhook: WebhookOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (originalTransactionID == nil) != (orderID == nil) else {
            throw ValidationError(
                "Name the subscription with --original-transaction-id ID, or the customer's order with --order-id ID (one of them)."
            )
        }
        if let orderID { try OrderSupport.validate(orderID: orderID) }
        if let originalTransactionID, originalTransactionID.isEmpty || originalTransactionID.count > 64 {
            throw ValidationError("--original-transaction-id must be 1 to 64 characters.")
        }
        guard !user.isEmpty, user.trimmingCharacters(in: .whitespacesAndNewlines) == user else {
            throw ValidationError("--user must be the app's user id, without surrounding spaces.")
        }
        if let setAppAccountToken, UUID(uuidString: setAppAccountToken) == nil {
            throw ValidationError(
                "--set-app-account-token takes a UUID such as 7e3fb20b-4cdb-47cc-936d-99d65f608138.")
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        try await ExitMapping.run {
            let needsApple = orderID != nil || setAppAccountToken != nil
            let apple =
                needsApple
                ? try OrderSupport.resolve(appStore: appStore, serverAPI: serverAPI, command: "claim", logger: logger)
                : nil
            let queueWebhooks = webhook.resolvedURL != nil
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            guard let claims = store as? any PurchaseClaiming, let held = store as? any HeldSubscriptionReading else {
                throw ConfigurationError("This database cannot record claims; run `renewal migrate`.")
            }
            let work = ClaimWork(
                user: user, reassign: reassign, token: setAppAccountToken.flatMap(UUID.init(uuidString:)),
                queueWebhooks: queueWebhooks, logger: logger)
            // Refused (exit 75) before anything is written while copy-database copies the database.
            try await store.withWriterLock {
                guard let apple else {
                    return try await work.claim([originalTransactionID ?? ""], claims: claims)
                }
                try await OrderSupport.reportingFailure {
                    try await OrderSupport.withClients(apple: apple, serverAPI: serverAPI, store: store, logger: logger)
                    {
                        clients, budgets in
                        try await work.run(
                            orderID: orderID, originalTransactionID: originalTransactionID, clients: clients,
                            budgets: budgets, claims: claims, held: held)
                    }
                }
            }
        }
    }
}

/// One `renewal claim`: the claims in the database, then the token at Apple.
struct ClaimWork: Sendable {
    var user: String
    var reassign: Bool
    var token: UUID?
    var queueWebhooks: Bool
    var logger: Logger

    /// With Apple: the order's subscriptions (or the one named), claimed, then the token bound.
    func run(
        orderID: String?, originalTransactionID: String?, clients: [String?: ServerAPIClient], budgets: OrderBudgets,
        claims: any PurchaseClaiming, held: any HeldSubscriptionReading
    ) async throws {
        var ids = originalTransactionID.map { [$0] } ?? []
        var order: LookedUpOrder?
        if let orderID {
            let found = try await OrderSupport.lookUp(
                orderID: orderID, clients: clients, budget: budgets.lookUp, logger: logger)
            guard found.isValid else {
                try Self.fail(
                    "Apple does not know order ID \(orderID) (Look Up Order ID answered status 1); check it against "
                        + "the customer's e-mailed receipt. Nothing was claimed.")
            }
            guard found.refused.isEmpty || !found.subscriptionIDs.isEmpty else {
                try Self.fail(
                    "Order ID \(orderID)'s signed transactions failed verification ("
                        + found.refused.map(\.rawValue).joined(separator: ", ")
                        + "); check APPSTORE_ROOT_CERTIFICATES and APPSTORE_BUNDLE_ID. Nothing was claimed.")
            }
            guard !found.subscriptionIDs.isEmpty else {
                try Self.fail(
                    "Order ID \(orderID) holds no auto-renewable subscription (`renewal lookup --order-id \(orderID)` "
                        + "lists its transactions). Nothing was claimed.")
            }
            ids = found.subscriptionIDs
            order = found
        }
        try await claim(ids, claims: claims)
        guard let token else { return }
        let stored = try await held.heldSubscriptions(originalTransactionIDs: ids)
        var failed = false
        for id in ids {
            let bundleID = stored[id]?.bundleID ?? order?.bundleID
            guard let client = clients[bundleID] ?? clients[nil] ?? clients.values.first else { continue }
            let environment = stored[id]?.environment ?? order?.environment ?? .production
            switch await client.setAppAccountToken(
                originalTransactionID: id, token: token, environment: environment,
                endpointBudget: budgets.setAppAccountToken, logger: logger)
            {
            case .success:
                _ = try await held.recordAppAccountToken(
                    token.uuidString.lowercased(), originalTransactionID: id, now: Date())
                print("  \(id): appAccountToken \(token.uuidString.lowercased()) bound at Apple")
            case .failure(let error):
                failed = true
                let refusal = error.appleRefusal.errorCode.map { " (errorCode \($0))" } ?? ""
                FileHandle.standardError.write(
                    Data(
                        """
                        renewal: \(id) is claimed for \(user), but Apple did not bind the appAccountToken \
                        (\(error.reason.rawValue)\(refusal)); run the same command again (the claim is not repeated).

                        """.utf8))
            }
        }
        if failed { throw ExitCode(ExitStatus.someFailed.rawValue) }
    }

    /// Claims every subscription for the user, or none (one transaction): a subscription the database does
    /// not hold, or another user's without --reassign, refuses them all, naming each. One line per claim.
    func claim(_ ids: [String], claims: any PurchaseClaiming) async throws {
        let results: [ClaimResult]
        do {
            results = try await claims.claim(
                originalTransactionIDs: ids, user: user, reassign: reassign, method: .hand, runID: nil,
                queueWebhooks: queueWebhooks, now: Date())
        } catch let error as ClaimError {
            switch error {
            case .ownedByAnotherUser, .ownedByOtherUsers:
                try Self.fail("\(error)", code: .configuration)
            case .notHeld, .reservedUserID:
                try Self.fail("\(error)\(ids.count > 1 ? "; nothing was claimed" : "")")
            }
        }
        for result in results {
            print("Claimed \(result.originalTransactionID) for \(user): \(Self.describe(result))")
        }
    }

    static func describe(_ result: ClaimResult) -> String {
        guard result.changed else { return "already theirs, nothing changed" }
        return result.previousOwner.map { "moved from user \($0) (recorded)" } ?? "was unclaimed"
    }

    /// Prints `message` and ends the command with `code`.
    static func fail(_ message: String, code: ExitStatus = .someFailed) throws -> Never {
        FileHandle.standardError.write(Data("renewal: \(message)\n".utf8))
        throw ExitCode(code.rawValue)
    }
}
