import Logging
import RenewalCore

/// Something that asks Apple about one stored receipt and answers in the core's source-neutral
/// terms. The verifyReceipt client and the App Store Server API client conform, so the job never
/// sees a wire format or a status code.
public protocol ReceiptVerifier: Sendable {
    /// Asks Apple about one receipt, retrying temporary failures within the verifier's own bounds.
    /// Never throws for per-receipt problems: they are answers (`.transient`, `.rejected`).
    func verify(receipt: String, logger: Logger) async -> AppleAnswer

    /// Asks Apple about one stored receipt, knowing what the database knows of it (the transaction
    /// id a Server API check asks by, its environment, the source that read it last). The default
    /// asks by the receipt alone.
    func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer
}

extension ReceiptVerifier {
    public func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        guard let receipt = check.receipt else { return .transient(.needsServerAPI, isOutage: false) }
        return await verify(receipt: receipt, logger: logger)
    }
}

/// A verifier that asks Apple by transaction id (the App Store Server API). It tells, without asking
/// Apple, which id it would ask a stored receipt by, so the job can route a check to it or elsewhere.
public protocol TransactionVerifier: ReceiptVerifier {
    /// The transaction id a check of `check` asks by; nil when there is none.
    func transactionID(for check: ReceiptCheck) -> String?

    /// Asks Apple about the customer who owns `transactionID`, starting with `environment` (production
    /// when nil).
    func verify(transactionID: String, preferring environment: AppStoreEnvironment?, logger: Logger) async
        -> AppleAnswer
}

/// One stored receipt as a verifier sees it. Never logged: `receipt` is the customer's receipt.
public struct ReceiptCheck: Sendable, Hashable {
    /// The stored `latest_receipt`; nil for a row imported by transaction id only (StoreKit 2),
    /// which only the App Store Server API can check.
    public var receipt: String?
    /// The original transaction id stored for the receipt by an earlier answer, if any.
    public var originalTransactionID: String?
    /// The original transaction ids of the subscriptions stored for the receipt.
    public var subscriptionIDs: [String]
    /// The environment that answered last, if any.
    public var environment: AppStoreEnvironment?
    /// The API that read the receipt last; nil when it was never read.
    public var source: CheckSource?
    /// The app the row belongs to (imported with it, or learnt from an earlier answer); nil when unknown.
    public var bundleID: String?
    /// The transaction ledger lacks the purchase of one of its subscriptions: verifyReceipt is asked
    /// for every transaction (`exclude-old-transactions` false) instead of the latest ones.
    public var wantsHistory = false

    public init(
        receipt: String?, originalTransactionID: String? = nil, subscriptionIDs: [String] = [],
        environment: AppStoreEnvironment? = nil, source: CheckSource? = nil, bundleID: String? = nil
    ) {
        self.bundleID = bundleID
        self.receipt = receipt
        self.originalTransactionID = originalTransactionID
        self.subscriptionIDs = subscriptionIDs
        self.environment = environment
        self.source = source
    }
}
