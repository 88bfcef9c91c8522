import Foundation

/// Apple's refund requests: a `CONSUMPTION_REQUEST` asks the developer for consumption information
/// about a purchase whose refund a customer requested, to be sent within 12 hours with Send Consumption
/// Information (`PUT /inApps/v2/transactions/consumption/{transactionId}`).
public enum RefundRequests {
    /// How long Apple waits for the answer after signing the request.
    public static let window: TimeInterval = 12 * 3_600
}

/// The refund the developer would prefer Apple to grant, sent with every answer when the operator sets
/// one (`--refund-preference`); none by default.
public enum RefundPreference: String, Sendable, Hashable, CaseIterable {
    case decline = "DECLINE"
    case grantFull = "GRANT_FULL"
    case grantProrated = "GRANT_PRORATED"
}

/// The body of Send Consumption Information (V2, App Store Server API 1.19): what the job tells Apple
/// about a purchase a customer asked a refund of. Sent only for a customer whose consent the app
/// recorded: `customerConsented` is always true, never invented.
public struct ConsumptionInformation: Sendable, Hashable, Encodable {
    /// `DELIVERED`, or `UNDELIVERED_OTHER` when the job never granted the period.
    public var deliveryStatus: String
    /// The customer had a free trial before paying.
    public var sampleContentProvided: Bool
    /// The share of the period used when the customer asked, in milliunits (100000 is all of it); 0
    /// when not delivered; left out with `GRANT_PRORATED`, as Apple asks for an auto-renewable
    /// subscription.
    public var consumptionPercentage: Int?
    public var refundPreference: RefundPreference?

    enum CodingKeys: String, CodingKey {
        case customerConsented, deliveryStatus, sampleContentProvided, consumptionPercentage, refundPreference
    }

    /// Apple's `deliveryStatus` values.
    public static let deliveryStatuses: Set<String> = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
        "UNDELIVERED_OTHER",
    ]

    /// The answer from the job's own data, or what the app supplied in its place.
    /// - Parameters:
    ///   - delivered: the job held the subscription entitled during the period.
    ///   - hadTrial: a free trial came before the period.
    ///   - period: the period the transaction paid for, when known.
    ///   - requestedAt: when the customer asked (Apple signed the request).
    ///   - appDeliveryStatus: the app's own delivery status, sent instead of the job's.
    ///   - appConsumptionPercentage: the app's own consumption share (milliunits), sent instead of the job's.
    public init(
        delivered: Bool, hadTrial: Bool, period: (start: Date, end: Date)?, requestedAt: Date,
        preference: RefundPreference?, appDeliveryStatus: String? = nil, appConsumptionPercentage: Int? = nil
    ) {
        let status =
            appDeliveryStatus.flatMap { Self.deliveryStatuses.contains($0) ? $0 : nil }
            ?? (delivered ? "DELIVERED" : "UNDELIVERED_OTHER")
        deliveryStatus = status
        sampleContentProvided = hadTrial
        refundPreference = preference
        if preference == .grantProrated {
            consumptionPercentage = nil
        } else if status != "DELIVERED" {
            // Apple refuses any other share for what was not delivered.
            consumptionPercentage = 0
        } else if let share = appConsumptionPercentage {
            consumptionPercentage = min(max(share, 0), 100_000)
        } else if let period, period.end > period.start {
            let used = requestedAt.timeIntervalSince(period.start) / period.end.timeIntervalSince(period.start)
            consumptionPercentage = Int((min(max(used, 0), 1) * 100_000).rounded())
        } else {
            consumptionPercentage = nil
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(true, forKey: .customerConsented)
        try c.encode(deliveryStatus, forKey: .deliveryStatus)
        try c.encode(sampleContentProvided, forKey: .sampleContentProvided)
        try c.encodeIfPresent(consumptionPercentage, forKey: .consumptionPercentage)
        try c.encodeIfPresent(refundPreference?.rawValue, forKey: .refundPreference)
    }

    /// The JSON body, keys sorted.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
