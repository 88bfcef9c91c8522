import Foundation

/// Renewal-date extensions (Extend a Subscription Renewal Date): Apple moves a subscriber's renewal date by
/// 1–90 days, at most twice in 365 days, for paid active subscriptions only. It cannot be undone and Apple
/// e-mails the customer, so each intent is sent once.
public enum RenewalExtension {
    /// The days one request may extend by.
    public static let days = 1...90
    /// `extendReasonCode`: 0 undeclared, 1 customer satisfaction, 2 other, 3 service issue or outage.
    public static let reasons = 0...3
    /// Extensions Apple grants a subscriber in `window`.
    public static let maximumPerWindow = 2
    public static let window: TimeInterval = 365 * 86_400

    /// Why a subscription cannot be extended, as `--dry-run` and the report name it.
    public enum Ineligibility: String, Sendable, Hashable, CaseIterable {
        /// Not paid and entitled now (expired, refunded, in billing retry, or a grace period already past).
        case notActive = "not_active"
        /// In a free trial: Apple extends paid periods only.
        case freeTrial = "free_trial"
        /// A family member: Apple extends the purchaser, and the family with them.
        case familyShared = "family_shared"
        /// A member of a multiseat purchase: it renews with the purchaser's subscription.
        case assignedSeat = "assigned_seat"
        /// Extended twice already in the last 365 days.
        case yearlyLimit = "yearly_limit"
        /// Never verified with Apple: nothing says it is active.
        case unverified
    }

    /// What the job knows of a subscription to judge an extension of it.
    public struct Subject: Sendable, Hashable {
        public var state: SubscriptionState
        public var isTrialPeriod: Bool
        public var ownershipType: String?
        /// Extensions Apple granted it (as the job recorded them) in the last 365 days.
        public var recentExtensions: Int

        public init(state: SubscriptionState, isTrialPeriod: Bool, ownershipType: String?, recentExtensions: Int) {
            self.state = state
            self.isTrialPeriod = isTrialPeriod
            self.ownershipType = ownershipType
            self.recentExtensions = recentExtensions
        }
    }

    /// Why `subject` cannot be extended; nil when Apple should accept it.
    public static func ineligibility(of subject: Subject) -> Ineligibility? {
        if subject.state == .unverified { return .unverified }
        if subject.ownershipType == "FAMILY_SHARED" { return .familyShared }
        if subject.ownershipType == "ASSIGNED" { return .assignedSeat }
        // Apple extends only a subscriber it entitles now: the job's one definition of that.
        guard subject.state.grantsAccess else { return .notActive }
        if subject.isTrialPeriod { return .freeTrial }
        if subject.recentExtensions >= maximumPerWindow { return .yearlyLimit }
        return nil
    }
}

/// A mass extension's summary (`RENEWAL_EXTENSION` `SUMMARY`): its request identifier and Apple's counts.
public struct ExtensionSummary: Sendable, Hashable {
    public var requestIdentifier: String
    public var succeeded: Int?
    public var failed: Int?

    public init(requestIdentifier: String, succeeded: Int?, failed: Int?) {
        self.requestIdentifier = requestIdentifier
        self.succeeded = succeeded
        self.failed = failed
    }
}
