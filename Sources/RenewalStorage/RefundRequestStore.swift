import Foundation
import RenewalCore

/// A `CONSUMPTION_REQUEST` from Apple's change feed still to answer: what Apple asked, and what the
/// job knows of the customer and the purchase to answer with.
public struct RefundRequest: Sendable, Hashable {
    /// The notification's uuid: one request, answered once.
    public var notificationUUID: String
    /// The transaction the customer asked a refund of (the path of Send Consumption Information).
    public var transactionID: String
    public var originalTransactionID: String?
    /// The user of the receipt holding the subscription; nil when the database does not know it.
    public var userID: String?
    public var bundleID: String?
    public var environment: AppStoreEnvironment
    /// Apple's `consumptionRequestReason` (`UNINTENDED_PURCHASE`, `FULFILLMENT_ISSUE`, …).
    public var reason: String?
    /// When Apple signed the request, and the end of the 12 hours Apple gives to answer.
    public var requestedAt: Date
    public var answerBy: Date
    /// The period the transaction paid for, from its signed data.
    public var periodStart: Date?
    public var periodEnd: Date?
    /// The consent the app recorded for the user (`consumption_consent`); nil when none was.
    public var consented: Bool?
    /// Whether the job granted the subscription during the period: it verified the subscription with Apple
    /// and held it entitled past the period's start, unrevoked before the request.
    public var delivered: Bool
    /// Whether the customer had a free trial of the subscription before paying (the ledger shows one).
    public var hadTrial: Bool
    /// Answers tried so far (a failure retries later with the shared backoff).
    public var attempts: Int
    /// What the app supplied for the user (`consumption_delivery_status`, `consumption_percentage`), sent
    /// instead of the job's own figures; nil when it supplied none.
    public var appDeliveryStatus: String?
    public var appConsumptionPercentage: Int?

    public init(
        notificationUUID: String, transactionID: String, originalTransactionID: String?, userID: String?,
        bundleID: String?, environment: AppStoreEnvironment, reason: String?, requestedAt: Date, answerBy: Date,
        periodStart: Date?, periodEnd: Date?, consented: Bool?, delivered: Bool, hadTrial: Bool, attempts: Int,
        appDeliveryStatus: String? = nil, appConsumptionPercentage: Int? = nil
    ) {
        self.appDeliveryStatus = appDeliveryStatus
        self.appConsumptionPercentage = appConsumptionPercentage
        self.notificationUUID = notificationUUID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.userID = userID
        self.bundleID = bundleID
        self.environment = environment
        self.reason = reason
        self.requestedAt = requestedAt
        self.answerBy = answerBy
        self.periodStart = periodStart
        self.periodEnd = periodEnd
        self.consented = consented
        self.delivered = delivered
        self.hadTrial = hadTrial
        self.attempts = attempts
    }
}

/// What became of one attempt to answer a refund request.
public enum RefundRequestResult: Sendable, Hashable {
    /// Apple accepted the answer (HTTP 202); `sent` is the JSON body.
    case answered(sent: String, at: Date)
    /// The app recorded no consent for the user: the request is left unanswered, never answered with
    /// invented consent.
    case noConsent(at: Date)
    /// Apple refused the answer for good (a 4xx with its error code): recorded, not retried.
    case rejected(httpStatus: Int?, errorCode: Int?, reason: String, sent: String, at: Date)
    /// It failed in a way that may pass (an outage, a rate limit, a timeout): tried again at `retryAt`.
    case retry(reason: String, retryAt: Date)
    /// The 12 hours passed before an answer could be sent.
    case missed(reason: String?, at: Date)
    /// Not tried in this run (an outage stopped the answers before it): the claim is given back, nothing else.
    case released
}

/// Where refund requests are kept: recorded from the change feed, claimed by one worker at a time,
/// and each attempt's result written before the next.
public protocol RefundRequestStore: Sendable {
    /// Claims up to `limit` requests still to answer whose next attempt is due at `now` and that no
    /// other live run holds, oldest deadline first, for `runID` until `claimedUntil`. A claim is free once
    /// it lapses, or at once when the run that made it is over: ended, or found dead (`abandoned` by
    /// `recoverAbandonedWork`, which proves it through the SQLite run lock or PostgreSQL's liveness lock).
    func claimRefundRequests(limit: Int, now: Date, claimedUntil: Date, runID: String?) async throws
        -> [RefundRequest]

    /// Records what became of `request`'s attempt and gives back its claim.
    func recordRefundRequest(_ request: RefundRequest, result: RefundRequestResult, runID: String?) async throws

    /// Requests still to answer at `now`, and those whose 12 hours ended unanswered in the day before `now`:
    /// what the alert on missed refund requests reads.
    func refundRequestBacklog(now: Date) async throws -> RefundRequestBacklog
}

/// The refund requests an operator watches.
public struct RefundRequestBacklog: Sendable, Hashable {
    /// Recorded and not answered yet, their 12 hours still running.
    public var open: Int
    /// Missed (12 hours passed unanswered) with a deadline in the last 24 hours.
    public var missedLastDay: Int

    public init(open: Int, missedLastDay: Int) {
        self.open = open
        self.missedLastDay = missedLastDay
    }
}
