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

/// Where an extension request stands.
public enum ExtensionState: String, Sendable, Hashable, CaseIterable {
    /// Its identifier is stored; it was never sent.
    case pending
    /// About to be sent, or sent without an answer recorded (a crash, a timeout): never sent again; Apple's
    /// `RENEWAL_EXTENDED` or a later status answer confirms it.
    case sending
    /// Apple extended the subscription.
    case succeeded
    /// Apple refused it (ineligible, over the yearly limit): not sent again.
    case rejected
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

/// What became of sending one extension request.
public enum ExtensionResult: Sendable, Hashable {
    /// Apple extended it; its new renewal date is effective from `effectiveAt`.
    case succeeded(effectiveAt: Date?, at: Date)
    /// Apple refused it for good.
    case rejected(httpStatus: Int?, errorCode: Int?, reason: String, at: Date)
    /// Apple turned it away unread (a rate limit, a refused token): pending again, sent by a later invocation.
    case notSent(reason: String)
    /// It may have reached Apple (a timeout, a broken connection, a 5xx): kept as sent, never sent again.
    case unconfirmed(reason: String)
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

/// Where a mass extension stands.
public enum MassExtensionState: String, Sendable, Hashable, CaseIterable {
    /// Stored, never sent.
    case pending
    /// Sent without a recorded answer: sent again with the same identifier (Apple answers a repeated one
    /// again and extends nobody twice).
    case sending
    /// Apple accepted it and is carrying it out; later runs follow its status.
    case accepted
    /// Apple finished it.
    case complete
    /// Apple refused it.
    case rejected
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

/// What became of sending a mass extension, or of asking its status.
public enum MassExtensionResult: Sendable, Hashable {
    case accepted(at: Date, nextStatusAt: Date)
    case rejected(httpStatus: Int?, errorCode: Int?, reason: String)
    /// Not accepted yet (an outage): sent again, with its identifier, by a later run or invocation.
    case notAccepted(reason: String)
    /// Apple's status: still running (asked again at `nextStatusAt`), or complete with its counts.
    case inProgress(succeeded: Int?, failed: Int?, nextStatusAt: Date)
    case complete(succeeded: Int?, failed: Int?, at: Date)
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
