import Foundation
import RenewalCore

/// A subscription `renewal extend` may extend, with what the job knows to judge it.
public struct ExtensionCandidate: Sendable, Hashable {
    public var userID: String
    public var originalTransactionID: String
    public var productID: String?
    public var bundleID: String?
    public var environment: AppStoreEnvironment?
    public var expiresAt: Date?
    public var subject: RenewalExtension.Subject

    public init(
        userID: String, originalTransactionID: String, productID: String?, bundleID: String?,
        environment: AppStoreEnvironment?, expiresAt: Date?, subject: RenewalExtension.Subject
    ) {
        self.userID = userID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.bundleID = bundleID
        self.environment = environment
        self.expiresAt = expiresAt
        self.subject = subject
    }
}

/// One operator intent about one subscription: extend it by `days` for `reason`. `intent` names the
/// operator's intent (an outage, say); the same intent about the same subscription is sent at most once.
public struct ExtensionIntent: Sendable, Hashable {
    public var intent: String
    public var candidate: ExtensionCandidate
    public var days: Int
    public var reason: Int

    public init(intent: String, candidate: ExtensionCandidate, days: Int, reason: Int) {
        self.intent = intent
        self.candidate = candidate
        self.days = days
        self.reason = reason
    }
}

/// An extension request as stored: its identifier, sent to Apple, and where it stands.
public struct StoredExtension: Sendable, Hashable {
    public var requestIdentifier: String
    public var state: ExtensionState
    public var effectiveAt: Date?
    public var appleErrorCode: Int?
    public var lastError: String?

    public init(
        requestIdentifier: String, state: ExtensionState, effectiveAt: Date?, appleErrorCode: Int?, lastError: String?
    ) {
        self.requestIdentifier = requestIdentifier
        self.state = state
        self.effectiveAt = effectiveAt
        self.appleErrorCode = appleErrorCode
        self.lastError = lastError
    }
}

/// One operator intent about every active subscriber of a product (in some storefronts, or all).
public struct MassExtensionIntent: Sendable, Hashable {
    public var intent: String
    public var productID: String
    /// ISO 3166-1 alpha-3 codes; empty for every storefront.
    public var storefronts: [String]
    public var bundleID: String?
    public var environment: AppStoreEnvironment
    public var days: Int
    public var reason: Int

    public init(
        intent: String, productID: String, storefronts: [String], bundleID: String?, environment: AppStoreEnvironment,
        days: Int, reason: Int
    ) {
        self.intent = intent
        self.productID = productID
        self.storefronts = storefronts
        self.bundleID = bundleID
        self.environment = environment
        self.days = days
        self.reason = reason
    }
}

/// A mass extension as stored.
public struct StoredMassExtension: Sendable, Hashable {
    public var requestIdentifier: String
    public var productID: String
    public var storefronts: [String]
    public var bundleID: String?
    public var environment: AppStoreEnvironment
    public var days: Int
    public var reason: Int
    public var state: MassExtensionState
    public var statusChecks: Int
    public var succeededCount: Int?
    public var failedCount: Int?
    public var lastError: String?

    public init(
        requestIdentifier: String, productID: String, storefronts: [String], bundleID: String?,
        environment: AppStoreEnvironment, days: Int, reason: Int, state: MassExtensionState, statusChecks: Int,
        succeededCount: Int?, failedCount: Int?, lastError: String?
    ) {
        self.requestIdentifier = requestIdentifier
        self.productID = productID
        self.storefronts = storefronts
        self.bundleID = bundleID
        self.environment = environment
        self.days = days
        self.reason = reason
        self.state = state
        self.statusChecks = statusChecks
        self.succeededCount = succeededCount
        self.failedCount = failedCount
        self.lastError = lastError
    }
}

/// Where renewal-date extensions are kept: each request's identifier stored before it is sent, so a crash,
/// a kill -9 or a second invocation never sends a second extension for the same intent.
public protocol RenewalExtensionStore: Sendable {
    /// The subscriptions of `userIDs`, with their extensions recorded in the 365 days before `now`.
    func extensionCandidates(userIDs: [String], now: Date) async throws -> [ExtensionCandidate]

    /// Stores `requestIdentifier` for `intent` unless a request for the same intent and subscription is
    /// stored already; returns the stored one (this one, or the earlier).
    func storeExtensionIntent(_ intent: ExtensionIntent, requestIdentifier: String, now: Date) async throws
        -> StoredExtension

    /// The requests stored for `intent` about the subscriptions `originalTransactionIDs`, by original
    /// transaction id; stores nothing (what a dry run judges by).
    func storedExtensions(intent: String, originalTransactionIDs: [String]) async throws -> [String: StoredExtension]

    /// Marks a pending request as being sent, committed before it is; false when it is not pending (another
    /// invocation took it).
    func markExtensionSending(_ requestIdentifier: String, now: Date) async throws -> Bool

    /// Records what became of sending it.
    func recordExtension(_ requestIdentifier: String, result: ExtensionResult) async throws

    /// Up to `limit` subscriptions of `productID` in `environment` (unknown counts as production) after
    /// `afterID` (original transaction id order), with the storefront of their latest transaction in the
    /// ledger (nil when unknown): who a mass extension reaches.
    func massExtensionCandidates(
        productID: String, environment: AppStoreEnvironment, after afterID: String?, limit: Int, now: Date
    ) async throws -> [(candidate: ExtensionCandidate, storefront: String?)]

    /// Whether the database holds a production subscription of `productID` (or one of unknown environment).
    func holdsProductionSubscription(productID: String) async throws -> Bool

    /// The mass extension stored for `intent`'s intent, product and storefronts; nil when none is. Stores nothing.
    func storedMassExtension(_ intent: MassExtensionIntent) async throws -> StoredMassExtension?

    /// Stores `requestIdentifier` for `intent` unless one is stored for the same intent; returns the stored one.
    func storeMassExtension(_ intent: MassExtensionIntent, requestIdentifier: String, now: Date) async throws
        -> StoredMassExtension

    /// Marks a mass extension as being sent (from `pending` or `sending`).
    func markMassExtensionSending(_ requestIdentifier: String, now: Date) async throws

    /// Records Apple's answer or status.
    func recordMassExtension(_ requestIdentifier: String, result: MassExtensionResult, now: Date) async throws

    /// The mass extensions a run follows at `now`: those in progress whose next status is due, and those
    /// sent without a recorded answer more than `resendAfter` ago.
    func dueMassExtensions(now: Date, resendAfter: TimeInterval) async throws -> [StoredMassExtension]
}
