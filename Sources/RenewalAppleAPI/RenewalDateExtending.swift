import Foundation
import Logging
import RenewalCore

/// Apple's Extend a Subscription Renewal Date. The Server API client conforms.
public protocol RenewalDateExtending: Sendable {
    /// Asks Apple to move the renewal date of `originalTransactionID` by `days` for `reason`, under
    /// `requestIdentifier`. Sent once: a failure is never retried here (a request that reached Apple and
    /// was retried could extend twice).
    func extendRenewalDate(
        originalTransactionID: String, days: Int, reason: Int, requestIdentifier: String,
        environment: AppStoreEnvironment, logger: Logger
    ) async -> Result<RenewalDateExtended, AppleAPIError>
}

/// Apple's answer to an extension request (`ExtendRenewalDateResponse`).
public struct RenewalDateExtended: Sendable, Hashable {
    /// Whether Apple extended the subscription.
    public var success: Bool
    /// When the new renewal date takes effect.
    public var effectiveDate: Date?

    public init(success: Bool, effectiveDate: Date?) {
        self.success = success
        self.effectiveDate = effectiveDate
    }
}
