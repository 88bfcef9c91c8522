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

/// Where renewal-date extensions are kept: each request's identifier stored before it is sent, so a crash,
/// a kill -9 or a second invocation never sends a second extension for the same intent.
public protocol RenewalExtensionStore: Sendable {
    /// The subscriptions of `userIDs`, with their extensions recorded in the 365 days before `now`.
    func extensionCandidates(userIDs: [String], now: Date) async throws -> [ExtensionCandidate]

    /// Stores `requestIdentifier` for `intent` unless a request for the same intent and subscription is
    /// stored already; returns the stored one (this one, or the earlier).
    func storeExtensionIntent(_ intent: ExtensionIntent, requestIdentifier: String, now: Date) async throws
        -> StoredExtension

    /// Marks a pending request as being sent, committed before it is; false when it is not pending (another
    /// invocation took it).
    func markExtensionSending(_ requestIdentifier: String, now: Date) async throws -> Bool

    /// Records what became of sending it.
    func recordExtension(_ requestIdentifier: String, result: ExtensionResult) async throws
}
