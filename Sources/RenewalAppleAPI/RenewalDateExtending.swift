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

/// Apple's Extend Subscription Renewal Dates for All Active Subscribers and its status. The Server API
/// client conforms.
public protocol MassRenewalDateExtending: Sendable {
    /// Asks Apple to extend every active subscriber of `productID` (in `storefronts`; all when empty).
    /// Apple answers a repeated `requestIdentifier` again and extends nobody twice, so a request whose
    /// answer was lost may be sent again with the same identifier.
    func massExtendRenewalDates(
        productID: String, storefronts: [String], days: Int, reason: Int, requestIdentifier: String,
        environment: AppStoreEnvironment, logger: Logger
    ) async -> Result<Void, AppleAPIError>

    /// Get Status of Subscription Renewal Date Extensions.
    func massExtensionStatus(
        productID: String, requestIdentifier: String, environment: AppStoreEnvironment, logger: Logger
    ) async -> Result<MassExtensionStatus, AppleAPIError>
}

/// Where Apple is with a mass extension.
public struct MassExtensionStatus: Sendable, Hashable {
    public var complete: Bool
    public var completeDate: Date?
    public var succeededCount: Int?
    public var failedCount: Int?

    public init(complete: Bool, completeDate: Date?, succeededCount: Int?, failedCount: Int?) {
        self.complete = complete
        self.completeDate = completeDate
        self.succeededCount = succeededCount
        self.failedCount = failedCount
    }
}

/// What Apple lets an app's backend do besides reading (its Server API key): answer refund requests and
/// extend renewal dates, one subscriber at a time or every subscriber of a product.
public typealias OperatorActions = MassRenewalDateExtending & RefundRequestAnswering & RenewalDateExtending
