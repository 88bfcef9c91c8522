import Foundation
import RenewalCore

/// A mass extension (Extend Subscription Renewal Dates for All Active Subscribers) Apple accepted.
public struct SimulatedMassExtension: Sendable, Hashable {
    public var requestIdentifier: String
    public var bundleID: String
    public var productID: String
    public var storefronts: [String]?
    public var requestedAt: Date
    /// When it finishes (and its summary notification is signed).
    public var completesAt: Date
    /// Each subscriber extended: when, and its original transaction id (in `requestIdentifier`).
    public var succeeded: [SimulatedExtension]
    public var failed: Int

    /// Its `RENEWAL_EXTENSION` `SUMMARY` notification.
    var summaryNotification: SimulatedNotification {
        var notification = SimulatedNotification(
            uuid: SimulatedReceipt.uuid("mass-summary", requestIdentifier), type: "RENEWAL_EXTENSION",
            subtype: "SUMMARY", signedDate: completesAt, originalTransactionID: "",
            receipt: SimulatedReceipt(
                account: "mass-" + requestIdentifier, scenario: .renewal, start: requestedAt, productID: productID,
                bundle: bundleID == SimulatedReceipt.bundleID ? nil : bundleID))
        notification.summary = self
        return notification
    }
}

extension SimulatedReceipt {
    /// An Apple error a request body earns: its code and message.
    struct RequestProblem: Error, Sendable, Hashable {
        var code: Int
        var message: String
    }

    /// The days and request identifier of an extension request's body (one subscriber or mass), or what
    /// Apple refuses in it: days outside 1–90 (4000009), a reason outside 0–3 (4000010), a missing or
    /// over-long request identifier (4000011).
    static func extensionRequest(_ fields: [String: Any]?) -> Result<(days: Int, identifier: String), RequestProblem> {
        guard let days = (fields?["extendByDays"] as? NSNumber)?.intValue, (1...90).contains(days) else {
            return .failure(RequestProblem(code: 4_000_009, message: "Invalid extend by days value."))
        }
        guard let reason = (fields?["extendReasonCode"] as? NSNumber)?.intValue, (0...3).contains(reason) else {
            return .failure(RequestProblem(code: 4_000_010, message: "Invalid extend reason code."))
        }
        guard let identifier = fields?["requestIdentifier"] as? String, !identifier.isEmpty, identifier.count <= 128
        else {
            return .failure(RequestProblem(code: 4_000_011, message: "Invalid request identifier."))
        }
        return .success((days, identifier))
    }

    /// What Apple refuses in a Send Consumption Information (V2) body, as it documents: consent other than
    /// true (4000035), an unknown delivery status (4000036), a percentage outside 0–100000 or not 0 for an
    /// undelivered purchase, an unknown refund preference, a missing `sampleContentProvided` (4000000).
    static func consumptionProblem(_ fields: [String: Any]?) -> RequestProblem? {
        guard let fields else { return RequestProblem(code: 4_000_000, message: "Invalid request body.") }
        guard fields["customerConsented"] as? Bool == true else {
            return RequestProblem(code: 4_000_035, message: "Invalid customer consented.")
        }
        let statuses: Set<String> = [
            "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
            "UNDELIVERED_OTHER",
        ]
        guard let status = fields["deliveryStatus"] as? String, statuses.contains(status) else {
            return RequestProblem(code: 4_000_036, message: "Invalid delivery status.")
        }
        guard fields["sampleContentProvided"] is Bool else {
            return RequestProblem(code: 4_000_000, message: "Invalid sample content provided.")
        }
        if let percentage = fields["consumptionPercentage"] {
            guard let value = (percentage as? NSNumber)?.intValue, (0...100_000).contains(value) else {
                return RequestProblem(code: 4_000_000, message: "Invalid consumption percentage.")
            }
            if status != "DELIVERED", value != 0 {
                return RequestProblem(code: 4_000_000, message: "Undelivered consumption percentage non zero.")
            }
        }
        if let preference = fields["refundPreference"] {
            guard let text = preference as? String, ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"].contains(text) else {
                return RequestProblem(code: 4_000_000, message: "Invalid refund preference.")
            }
        }
        return nil
    }

    /// Apple's answer to extending this subscription by `days` at `now`: the success body, or the error
    /// an ineligible subscription gets (4030007 family-shared, 4030005 extended twice in 365 days, 4030004
    /// otherwise: not active, in a free trial, a multiseat member).
    func extensionAnswer(originalTransactionID: String, days: Int, requestIdentifier: String, at now: Date)
        -> ServerAPIAnswer
    {
        // Apple holds no subscription of an account it does not answer for.
        if [.accountNotFound, .notAuthentic, .malformed, .outage, .html200].contains(scenario) { return .notFound }
        if scenario == .familyShared {
            return .error(
                httpStatus: 403, code: 4_030_007, message: "Family shared subscriptions are not eligible for extension."
            )
        }
        let recent = grantedExtensions(until: now, of: originalTransactionID).filter {
            $0.at > now.addingTimeInterval(-365 * Self.day)
        }
        if recent.count >= 2 {
            return .error(httpStatus: 403, code: 4_030_005, message: "Subscription has reached the maximum extensions.")
        }
        // The subscription's latest period (after an upgrade, the new product's, not the one it replaced).
        let current = response(at: now).latestReceiptInfo.filter { $0.originalTransactionID == originalTransactionID }
            .max { ($0.expiresDate ?? .distantPast) < ($1.expiresDate ?? .distantPast) }
        // Active, or in a billing grace period not yet past (Apple extends those too).
        let graceEnd =
            scenario.hasGracePeriod ? current?.expiresDate?.addingTimeInterval(Self.graceDays * Self.day) : nil
        let active =
            current.map { row in
                row.cancellationDate == nil && max(row.expiresDate ?? .distantPast, graceEnd ?? .distantPast) > now
                    && row.isTrialPeriod != true
            } ?? false
        guard active, scenario != .assignedSeat else {
            return .error(httpStatus: 403, code: 4_030_004, message: "Subscription is not eligible for extension.")
        }
        let body: [String: Any] = [
            "originalTransactionId": originalTransactionID, "webOrderLineItemId": current?.webOrderLineItemID ?? "",
            "success": true, "effectiveDate": Self.ms(now),
        ]
        return .json(Self.json(body))
    }
}
