import Foundation
import Logging
import NIOHTTP1
import RenewalAppleAPI
import RenewalCore

/// The body of Apple's answer to Extend a Subscription Renewal Date; only what the job reads.
struct ExtendRenewalDateResponse: Decodable {
    var success: Bool?
    var effectiveDate: Date?

    enum CodingKeys: String, CodingKey {
        case success, effectiveDate
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        success = c.flexibleBool(.success)
        effectiveDate = c.milliseconds(.effectiveDate)
    }
}

extension ServerAPIClient: RenewalDateExtending {
    /// `PUT /inApps/v1/subscriptions/extend/{originalTransactionId}` with `extendByDays`, `extendReasonCode`
    /// and `requestIdentifier`: one request, never retried (the caller records what it may have done).
    public func extendRenewalDate(
        originalTransactionID: String, days: Int, reason: Int, requestIdentifier: String,
        environment: AppStoreEnvironment, logger: Logger
    ) async -> Result<RenewalDateExtended, AppleAPIError> {
        let path =
            "/inApps/v1/subscriptions/extend/"
            + (originalTransactionID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let body: [String: Any] = [
            "extendByDays": days, "extendReasonCode": reason, "requestIdentifier": requestIdentifier,
        ]
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
        return await exchange(
            path, method: .PUT, body: data, environment: environment, logger: logger,
            as: ExtendRenewalDateResponse.self
        ).map { RenewalDateExtended(success: $0.success ?? false, effectiveDate: $0.effectiveDate) }
    }
}

/// The body of Get Status of Subscription Renewal Date Extensions; only what the job reads.
struct MassExtendRenewalDateStatusResponse: Decodable {
    var complete: Bool?
    var completeDate: Date?
    var succeededCount: Int?
    var failedCount: Int?

    enum CodingKeys: String, CodingKey {
        case complete, completeDate, succeededCount, failedCount
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        complete = c.flexibleBool(.complete)
        completeDate = c.milliseconds(.completeDate)
        succeededCount = c.flexibleInt(.succeededCount)
        failedCount = c.flexibleInt(.failedCount)
    }
}

extension ServerAPIClient: MassRenewalDateExtending {
    /// `POST /inApps/v1/subscriptions/extend/mass`; retried within the client's attempts like a status
    /// request, since Apple answers a repeated request identifier again without extending twice.
    public func massExtendRenewalDates(
        productID: String, storefronts: [String], days: Int, reason: Int, requestIdentifier: String,
        environment: AppStoreEnvironment, logger: Logger
    ) async -> Result<Void, AppleAPIError> {
        var body: [String: Any] = [
            "extendByDays": days, "extendReasonCode": reason, "requestIdentifier": requestIdentifier,
            "productId": productID,
        ]
        if !storefronts.isEmpty { body["storefrontCountryCodes"] = storefronts }
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
        return await pageExchange(
            "/inApps/v1/subscriptions/extend/mass", method: .POST, body: data, environment: environment,
            logger: logger, as: NoContent.self
        ).map { _ in () }
    }

    /// `GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`.
    public func massExtensionStatus(
        productID: String, requestIdentifier: String, environment: AppStoreEnvironment, logger: Logger
    ) async -> Result<MassExtensionStatus, AppleAPIError> {
        let path =
            "/inApps/v1/subscriptions/extend/mass/"
            + (productID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") + "/"
            + (requestIdentifier.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        return await pageExchange(
            path, environment: environment, logger: logger, as: MassExtendRenewalDateStatusResponse.self
        ).map {
            MassExtensionStatus(
                complete: $0.complete ?? false, completeDate: $0.completeDate, succeededCount: $0.succeededCount,
                failedCount: $0.failedCount)
        }
    }
}
