import Foundation
import RenewalCore
import RenewalServerAPI

/// One App Store Server Notification V2 of a simulated customer's timeline: what Apple would have
/// sent the app's notification URL, and keeps in Notification History.
public struct SimulatedNotification: Sendable, Hashable {
    /// `notificationUUID`: stable for the event, so a repeated page repeats it.
    public var uuid: String
    public var type: String
    public var subtype: String?
    /// When Apple signed (sent) it; history is ordered and filtered by it.
    public var signedDate: Date
    /// The subscription it is about.
    public var originalTransactionID: String
    public var receipt: SimulatedReceipt
    /// Signed by a chain nobody trusts (`SimulatorState.forgedNotifications`).
    public var isForged = false
    /// Of a mass extension's `SUMMARY`: the extension it sums up (the payload has `summary`, no `data`).
    public var summary: SimulatedMassExtension?
    /// Its signed transaction cannot be decoded (`unreadable(of:at:)`).
    public var hasUnreadableTransaction = false

    public init(
        uuid: String, type: String, subtype: String?, signedDate: Date, originalTransactionID: String,
        receipt: SimulatedReceipt, isForged: Bool = false
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.originalTransactionID = originalTransactionID
        self.receipt = receipt
        self.isForged = isForged
    }

    /// A refund of `receipt`'s subscription at `date` that Apple never made: the customer's state as a
    /// refunded one, signed by a chain nobody trusts, listed in Notification History among the real ones.
    public static func forgedRefund(of receipt: SimulatedReceipt, at date: Date) -> SimulatedNotification {
        // The same customer (so the same original transaction id), refunded half a period ago.
        let refunded = SimulatedReceipt(
            account: receipt.account, scenario: .refund, start: date.addingTimeInterval(-1.5 * receipt.period),
            period: receipt.period)
        return SimulatedNotification(
            uuid: SimulatedReceipt.uuid(receipt.account, "forged-refund", String(Int64(date.timeIntervalSince1970))),
            type: "REFUND", subtype: nil, signedDate: date, originalTransactionID: receipt.originalTransactionID,
            receipt: refunded, isForged: true)
    }

    /// A notification about `receipt`'s subscription at `date`, signed by Apple's chain, whose signed
    /// transaction is signed too but has no `signedDate` (so it cannot be decoded) and whose renewal
    /// info is left out: the subscription is named only by `originalTransactionId` in that payload.
    public static func unreadable(of receipt: SimulatedReceipt, at date: Date) -> SimulatedNotification {
        var notification = SimulatedNotification(
            uuid: SimulatedReceipt.uuid(receipt.account, "unreadable", String(Int64(date.timeIntervalSince1970))),
            type: "DID_RENEW", subtype: nil, signedDate: date, originalTransactionID: receipt.originalTransactionID,
            receipt: receipt)
        notification.hasUnreadableTransaction = true
        return notification
    }

    /// Whether a history that lists `percent` % of its notifications twice lists this one twice.
    func isListedTwice(percent: Int) -> Bool {
        percent > 0 && SimulatedIdentifier.fnv1a("twice#" + uuid) % 100 < UInt64(percent)
    }
}

extension SigningChain {
    /// The chain forged notifications are signed by.
    static let forger: SigningChain? = try? SigningChain.generate(name: "forger")
}

extension SimulatedReceipt {
    /// Every notification of this customer's timeline signed at or before `until`, oldest first:
    /// the purchase, each renewal, and the scenario's own events (refund, upgrade, auto-renew off,
    /// billing failure, grace period end, recovery, expiry). Scenarios Apple does not answer for
    /// (unknown accounts, broken receipts, outages) have none.
    public func notifications(until: Date) -> [SimulatedNotification] {
        var events = TimelineEvents(until: until, originalID: originalTransactionID)
        // The end of a one-period subscription, moved by the extensions Apple granted.
        let grace = scenario == .gracePeriod ? Self.graceDays * Self.day : 0
        let firstEnd = extendedFirstEnd(until: until, grace: grace)
        switch scenario {
        case .accountNotFound, .notAuthentic, .malformed, .outage, .html200:
            return []
        default:
            events.add(start, "SUBSCRIBED", "INITIAL_BUY")
        }
        addScenarioEvents(to: &events, firstEnd: firstEnd, grace: grace)
        // Each extension Apple carried out, as it notifies it.
        for granted in extensions ?? [] {
            events.add(granted.at, "RENEWAL_EXTENDED", id: granted.originalTransactionID ?? originalTransactionID)
        }
        return events.list.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map { at, type, subtype, id in
            SimulatedNotification(
                uuid: Self.uuid(account, type, subtype ?? "", id, String(Int64(at.timeIntervalSince1970))),
                type: type, subtype: subtype, signedDate: at, originalTransactionID: id, receipt: self)
        }
    }

    /// The scenario's own events after the purchase (refund, upgrade, auto-renew off, billing failure,
    /// grace period end, recovery, expiry) and the renewals between them.
    private func addScenarioEvents(to events: inout TimelineEvents, firstEnd: Date, grace: TimeInterval) {
        switch scenario {
        case .voluntaryExpiry, .legacyIOS6:
            events.add(start.addingTimeInterval(3_600), "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED")
            events.add(firstEnd, "EXPIRED", "VOLUNTARY")
        case .billingRetry:
            events.add(firstEnd, "DID_FAIL_TO_RENEW")
            events.add(firstEnd.addingTimeInterval(60 * Self.day), "EXPIRED", "BILLING_RETRY")
        case .gracePeriod:
            events.add(firstEnd, "DID_FAIL_TO_RENEW", "GRACE_PERIOD")
            events.add(firstEnd.addingTimeInterval(grace), "GRACE_PERIOD_EXPIRED")
            events.add(firstEnd.addingTimeInterval(60 * Self.day), "EXPIRED", "BILLING_RETRY")
        case .billingRecovery:
            let recovery = firstEnd.addingTimeInterval(3 * Self.day)
            events.add(firstEnd, "DID_FAIL_TO_RENEW")
            events.add(recovery, "DID_RENEW", "BILLING_RECOVERY")
            addRenewals(from: recovery, to: &events)
        case .gracePeriodRecovery:
            let dates = graceRecoveryDates(until: events.until)
            events.add(dates.failure, "DID_FAIL_TO_RENEW", "GRACE_PERIOD")
            events.add(dates.recovery, "DID_RENEW", "BILLING_RECOVERY")
            for renewal in dates.periods.dropFirst() { events.add(renewal.start, "DID_RENEW") }
        case .refund:
            events.add(firstEnd, "DID_RENEW")
            if let request = refundRequest { events.add(request.at, "CONSUMPTION_REQUEST") }
            events.add(start.addingTimeInterval(1.5 * period), "REFUND")
            events.add(start.addingTimeInterval(1.5 * period + 1), "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED")
        case .upgrade:
            let upgradeDate = start.addingTimeInterval(1.5 * period)
            events.add(firstEnd, "DID_RENEW")
            events.add(upgradeDate, "DID_CHANGE_RENEWAL_PREF", "UPGRADE")
            addRenewals(from: upgradeDate, to: &events)
        case .multiseat:
            addRenewals(from: start, to: &events)
            events.add(seatRefundDate, "REFUND", "SEATS")
        case .refundRequest:
            addRenewals(from: start, to: &events)
            if let request = refundRequest {
                events.add(request.at, "CONSUMPTION_REQUEST")
                events.add(request.at.addingTimeInterval(2 * Self.day), "REFUND_DECLINED")
            }
        case .multipleSubscriptions:
            let addonID = SimulatedIdentifier.id(account, "addon")
            events.add(start, "SUBSCRIBED", "INITIAL_BUY", id: addonID)
            events.add(start.addingTimeInterval(3_600), "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", id: addonID)
            events.add(extendedFirstEnd(until: events.until, of: addonID), "EXPIRED", "VOLUNTARY", id: addonID)
            addRenewals(from: start, to: &events)
        default:
            addRenewals(from: start, to: &events)
        }
    }

    /// Renewals every period from `origin` (the first at `origin + period`), at the extended dates.
    private func addRenewals(from origin: Date, to events: inout TimelineEvents) {
        let until = events.until
        guard grantedExtensions(until: until).contains(where: { $0.at >= origin }) else {
            var at = origin.addingTimeInterval(period)
            while at <= until {
                events.add(at, "DID_RENEW")
                at = at.addingTimeInterval(period)
            }
            return
        }
        for renewal in extendedPeriods(from: origin, until: until).dropFirst() {
            events.add(renewal.start, "DID_RENEW")
        }
    }

    /// A version-4-shaped UUID derived from `parts`, so the same event always has the same id.
    static func uuid(_ parts: String...) -> String {
        let a = SimulatedIdentifier.fnv1a(parts.joined(separator: "#"))
        let b = SimulatedIdentifier.fnv1a("uuid#" + parts.joined(separator: "#"))
        let hex = String(format: "%016llx%016llx", a, b)
        let chars = Array(hex)
        let version = "4" + String(chars[13..<16])
        let variant = String(["8", "9", "a", "b"][Int(b % 4)]) + String(chars[17..<20])
        return "\(String(chars[0..<8]))-\(String(chars[8..<12]))-\(version)-\(variant)-\(String(chars[20..<32]))"
    }
}

extension SimulatedNotification {
    /// The `signedPayload` Apple sends: the notification's fields and `data` with the subscription's
    /// signed transaction and renewal info as they were when it was signed.
    public func signedPayload(signer: SigningChain) throws -> String {
        let environment = receipt.scenario == .sandbox ? "Sandbox" : "Production"
        if let summary {
            var object: [String: Any] = [
                "environment": environment, "appAppleId": 1_234_567_890, "bundleId": summary.bundleID,
                "productId": summary.productID, "requestIdentifier": summary.requestIdentifier,
                "succeededCount": summary.succeeded.count, "failedCount": summary.failed,
            ]
            object["storefrontCountryCodes"] = summary.storefronts
            let payload: [String: Any] = [
                "notificationType": type, "subtype": subtype ?? "", "notificationUUID": uuid, "version": "2.0",
                "signedDate": SimulatedReceipt.ms(signedDate), "summary": object,
            ]
            return try signer.sign(SimulatedReceipt.json(payload))
        }
        let response = receipt.response(at: signedDate)
        var data: [String: Any] = [
            "environment": environment, "bundleId": receipt.bundleIdentifier, "appAppleId": 1_234_567_890,
            "bundleVersion": "1",
        ]
        if let item = receipt.lastTransaction(
            originalTransactionID, in: response, environment: environment, now: signedDate, signer: signer)
        {
            data["signedTransactionInfo"] = item.transaction
            data["signedRenewalInfo"] = item.renewal
            data["status"] = item.status
        }
        if hasUnreadableTransaction {
            let transaction: [String: Any] = [
                "originalTransactionId": originalTransactionID, "bundleId": receipt.bundleIdentifier,
                "environment": environment,
            ]
            data["signedTransactionInfo"] = try signer.sign(SimulatedReceipt.json(transaction))
            data["signedRenewalInfo"] = nil
        }
        if type == "CONSUMPTION_REQUEST" { data["consumptionRequestReason"] = receipt.refundRequest?.reason }
        var payload: [String: Any] = [
            "notificationType": type, "notificationUUID": uuid, "version": "2.0",
            "signedDate": SimulatedReceipt.ms(signedDate), "data": data,
        ]
        payload["subtype"] = subtype
        return try signer.sign(SimulatedReceipt.json(payload))
    }
}

/// A timeline's notifications as they are added: each signed at or before `until`, about the
/// customer's subscription unless another id is given.
private struct TimelineEvents {
    let until: Date
    let originalID: String
    var list: [(Date, String, String?, String)] = []

    init(until: Date, originalID: String) {
        self.until = until
        self.originalID = originalID
    }

    mutating func add(_ at: Date, _ type: String, _ subtype: String? = nil, id: String? = nil) {
        guard at <= until else { return }
        list.append((at, type, subtype, id ?? originalID))
    }
}
