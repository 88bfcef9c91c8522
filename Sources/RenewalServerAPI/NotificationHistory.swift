import Foundation
import Logging
import NIOHTTP1
import RenewalAppleAPI
import RenewalCore

/// One page of Get Notification History: the signed payloads as Apple kept them, unverified.
public struct NotificationHistoryPage: Decodable, Sendable {
    public struct Record: Decodable, Sendable {
        public var signedPayload: String?
    }

    public var notificationHistory: [Record]?
    public var hasMore: Bool?
    public var paginationToken: String?

    /// The token of the next page; nil on the last one.
    public var nextToken: String? { hasMore == true ? paginationToken : nil }
}

/// The decoded payload of an App Store Server Notification V2 (`ResponseBodyV2DecodedPayload`): only
/// what the job reads; unknown fields are ignored, every field optional.
struct NotificationPayload: SignedPayload {
    struct Data: Decodable {
        var environment: String?
        var bundleId: String?
        var signedTransactionInfo: String?
        var signedRenewalInfo: String?
        /// The subscription's status when Apple signed it (1 active … 5 revoked), in newer notifications.
        var status: Int?
        /// Of a `CONSUMPTION_REQUEST`: why the customer asked for a refund.
        var consumptionRequestReason: String?
        /// `signedTransactionInfo` or `signedRenewalInfo` was sent but is not a string.
        var signedDataUnreadable = false

        enum CodingKeys: String, CodingKey {
            case environment, bundleId, signedTransactionInfo, signedRenewalInfo, status, consumptionRequestReason
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            environment = c.flexibleString(.environment)
            bundleId = c.flexibleString(.bundleId)
            signedTransactionInfo = c.flexibleString(.signedTransactionInfo)
            signedRenewalInfo = c.flexibleString(.signedRenewalInfo)
            status = c.flexibleInt(.status)
            consumptionRequestReason = c.flexibleString(.consumptionRequestReason)
            signedDataUnreadable =
                (signedTransactionInfo == nil && c.holdsValue(.signedTransactionInfo))
                || (signedRenewalInfo == nil && c.holdsValue(.signedRenewalInfo))
        }
    }

    /// A mass extension's summary (`RENEWAL_EXTENSION` `SUMMARY`), sent instead of `data`.
    struct Summary: Decodable {
        var requestIdentifier: String?
        var bundleId: String?
        var succeededCount: Int?
        var failedCount: Int?

        enum CodingKeys: String, CodingKey {
            case requestIdentifier, bundleId, succeededCount, failedCount
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            requestIdentifier = c.flexibleString(.requestIdentifier)
            bundleId = c.flexibleString(.bundleId)
            succeededCount = c.flexibleInt(.succeededCount)
            failedCount = c.flexibleInt(.failedCount)
        }
    }

    var notificationType: String?
    var subtype: String?
    var notificationUUID: String?
    var signedDate: Date?
    var data: Data?
    var summary: Summary?
    /// `data` was sent but is not an object the job can read.
    var dataUnreadable = false

    /// Where the notification is from: `data.environment` (notifications without `data`, such as
    /// summaries, name none).
    var environment: String? { data?.environment }

    enum CodingKeys: String, CodingKey {
        case notificationType, subtype, notificationUUID, signedDate, data, summary
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        notificationType = c.flexibleString(.notificationType)
        subtype = c.flexibleString(.subtype)
        notificationUUID = c.flexibleString(.notificationUUID)
        signedDate = c.milliseconds(.signedDate)
        data = try? c.decodeIfPresent(Data.self, forKey: .data)
        dataUnreadable = data == nil && c.contains(.data) && (try? c.decodeNil(forKey: .data)) != true
        summary = try? c.decodeIfPresent(Summary.self, forKey: .summary)
    }
}

/// A notification whose signature, chain, bundle and environment were verified, with the subscription
/// it is about read from its own verified signed transaction.
public struct VerifiedNotification: Sendable, Hashable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedDate: Date
    /// The subscription it concerns; nil for notifications that carry no transaction (summaries,
    /// consent and external-purchase notifications, tests).
    public var originalTransactionID: String?
    /// Its signed transaction, verified, when it has one.
    public var transaction: JWSTransaction?
    /// Its signed renewal info, verified, when it has one.
    public var renewal: JWSRenewalInfo?
    /// `data.status`, when Apple sent it.
    public var status: Int?
    /// `data.bundleId`.
    public var bundleID: String?
    /// `data.consumptionRequestReason`, of a refund request.
    public var consumptionRequestReason: String?
    /// `summary`, of a mass extension's `RENEWAL_EXTENSION` `SUMMARY`.
    public var extensionSummary: ExtensionSummary?
    /// Apple sent `data` but it is not an object the job can read, or its signed transaction or renewal
    /// info cannot be decoded: the notification is a failure, not one about no subscription
    /// (`originalTransactionID` is then the subscription as far as it can still be read).
    public var dataUnreadable = false

    /// The notification in the decision's terms, with the subscription's signed state when it carries
    /// a transaction of an auto-renewable subscription and its renewal info (Core's
    /// `ServerAPISubscriptionFacts.notificationEvidence` decides when it does and what it means).
    public func evidence(environment: AppStoreEnvironment) -> NotificationEvidence {
        let subscription = transaction.flatMap { transaction in
            ServerAPISubscriptionFacts(
                status: status, originalTransactionID: nil, subscriptionGroupIdentifier: nil,
                transaction: transaction, renewal: renewal
            ).notificationEvidence(environment: environment)
        }
        var evidence = NotificationEvidence(
            type: type, subtype: subtype, signedDate: signedDate, environment: environment, bundleID: bundleID,
            subscription: subscription)
        evidence.appAccountToken = transaction?.appAccountToken.flatMap(UUID.init(uuidString:))?.uuidString.lowercased()
        evidence.isAutoRenewableSubscription = transaction?.isAutoRenewableSubscription ?? false
        return evidence
    }
}

extension SignedDataVerifier {
    /// Verifies a notification's `signedPayload` from `environment` ("Production" or "Sandbox"), and
    /// the signed transaction inside it: both chain to the trusted roots, carry Apple's OIDs and
    /// match the bundle and environment, and so must its signed renewal info.
    public func notification(_ jws: String, environment: String) async throws(SignedDataFailure)
        -> VerifiedNotification
    {
        // A notification without `data` names no environment; it is checked against the one asked.
        let payload: NotificationPayload = try await verify(jws, environment: nil, allowingMissingEnvironment: true)
        if let found = payload.environment, found != environment {
            throw .wrongEnvironment(expected: environment, found: found)
        }
        if let found = payload.data?.bundleId, found != bundleID {
            throw .wrongBundle(expected: bundleID, found: found)
        }
        guard let uuid = payload.notificationUUID, let type = payload.notificationType,
            let signedDate = payload.signedDate
        else {
            throw .malformed("the notification has no notificationUUID, notificationType or signedDate")
        }
        let signedData = try await self.signedData(of: payload.data, environment: environment)
        let transaction = signedData.transaction
        var verified = VerifiedNotification(
            uuid: uuid, type: type, subtype: payload.subtype, signedDate: signedDate,
            originalTransactionID: transaction?.originalTransactionId, transaction: transaction,
            renewal: signedData.renewal,
            status: payload.data?.status, bundleID: payload.data?.bundleId,
            consumptionRequestReason: payload.data?.consumptionRequestReason,
            extensionSummary: payload.summary.flatMap { summary in
                guard summary.bundleId == nil || summary.bundleId == bundleID,
                    let id = summary.requestIdentifier
                else { return nil }
                return ExtensionSummary(
                    requestIdentifier: id, succeeded: summary.succeededCount, failed: summary.failedCount)
            })
        verified.dataUnreadable = payload.dataUnreadable || signedData.isUnreadable
        if signedData.isUnreadable { verified.originalTransactionID = signedData.originalTransactionID }
        return verified
    }
}

extension ServerAPIClient {
    /// One page of Get Notification History for `environment`: notifications signed in
    /// `[start, end)`, the first page when `token` is nil. Retried within the client's attempts like
    /// a status request; a 429 is not waited out here (the caller's pull stops and resumes next run).
    public func notificationHistory(
        environment: AppStoreEnvironment, start: Date, end: Date, token: String?, logger: Logger
    ) async -> Result<NotificationHistoryPage, AppleAPIError> {
        let query = token.map {
            "?paginationToken=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        }
        let body = Data(
            #"{"startDate":\#(AppleDateFormat.milliseconds(start)),"endDate":\#(AppleDateFormat.milliseconds(end))}"#
                .utf8)
        return await pageExchange(
            "/inApps/v1/notifications/history" + (query ?? ""), body: body, environment: environment,
            logger: logger, as: NotificationHistoryPage.self)
    }

    /// One page of a paged endpoint (Notification History, Transaction History): one request, retried
    /// within the client's attempts like a status request; a 429 is not waited out (the caller stops and
    /// resumes next run from what it stored).
    func pageExchange<Page: Decodable>(
        _ path: String, method: HTTPMethod? = nil, body: Data? = nil, environment: AppStoreEnvironment,
        logger: Logger, as: Page.Type
    ) async -> Result<Page, AppleAPIError> {
        await configuration.retryPolicy.run(
            observer: transport.observer, logger: logger, reason: { $0.failure?.reason }
        ) { _ in
            let result = await exchange(
                path, method: method, body: body, environment: environment, logger: logger, as: Page.self)
            switch result {
            case .success: return .finish(result)
            case .failure(let error): return error.isRetryable && !error.isRateLimit ? .retry(result) : .finish(result)
            }
        }
    }
}

extension Result where Failure == AppleAPIError {
    var failure: AppleAPIError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension AppleAPIError {
    var isRateLimit: Bool {
        if case .rateLimited = self { return true }
        return false
    }
}

extension ServerAPIClient: NotificationFeed {
    public func notificationPage(
        environment: AppStoreEnvironment, start: Date, end: Date, token: String?, logger: Logger
    ) async -> Result<FeedPage, AppleAPIError> {
        let page: NotificationHistoryPage
        switch await notificationHistory(environment: environment, start: start, end: end, token: token, logger: logger)
        {
        case .success(let read): page = read
        case .failure(let error): return .failure(error)
        }
        var notifications: [FeedNotification] = []
        var refused: [FailureReason] = []
        var unreadable: [FeedNotification] = []
        for record in page.notificationHistory ?? [] {
            guard let signed = record.signedPayload else {
                refused.append(.jwsMalformed)
                continue
            }
            do {
                let verified = try await verifier.notification(signed, environment: environment.rawValue)
                guard !verified.dataUnreadable else {
                    refused.append(.notificationDataUnreadable)
                    unreadable.append(
                        FeedNotification(
                            uuid: verified.uuid, type: verified.type, subtype: verified.subtype,
                            signedDate: verified.signedDate, originalTransactionID: verified.originalTransactionID))
                    continue
                }
                let isSubscription = verified.transaction?.isAutoRenewableSubscription ?? false
                var notification = FeedNotification(
                    uuid: verified.uuid, type: verified.type, subtype: verified.subtype,
                    signedDate: verified.signedDate,
                    originalTransactionID: isSubscription ? verified.originalTransactionID : nil,
                    evidence: isSubscription ? verified.evidence(environment: environment) : nil)
                notification.extensionSummary = verified.extensionSummary
                if isSubscription, let transaction = verified.transaction {
                    notification.transactionID = transaction.transactionId
                    notification.periodStart = transaction.purchaseDate
                    notification.periodEnd = transaction.expiresDate
                    notification.productID = transaction.productId
                    notification.consumptionRequestReason = verified.consumptionRequestReason
                }
                notifications.append(notification)
            } catch {
                refused.append(error.reason)
            }
        }
        var feedPage = FeedPage(notifications: notifications, refused: refused, nextToken: page.nextToken)
        feedPage.unreadable = unreadable
        return .success(feedPage)
    }
}
