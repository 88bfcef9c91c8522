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
