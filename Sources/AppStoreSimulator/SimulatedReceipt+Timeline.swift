import Foundation
import RenewalCore

/// What the simulator sends back for one verifyReceipt request.
enum SimulatedAnswer: Sendable {
    /// An Apple answer in the iOS 7+ shape, encoded from the core types.
    case apple(VerifyReceiptResponse)
    /// An iOS 6-style answer.
    case legacy(LegacyVerifyReceiptAnswer)
    /// A valid answer cut in half (HTTP 200, `application/json`).
    case truncated(VerifyReceiptResponse)
    /// A non-Apple body: an HTML error page or similar.
    case raw(httpStatus: Int, contentType: String, body: String)

    static func status(_ code: AppStoreStatus) -> SimulatedAnswer {
        .apple(VerifyReceiptResponse(status: code))
    }

    static let outagePage = SimulatedAnswer.raw(
        httpStatus: 503, contentType: "text/html; charset=utf-8",
        body:
            "<html><head><title>503 Service Unavailable</title></head><body><h1>Service Unavailable</h1></body></html>")
    static let htmlPage = SimulatedAnswer.raw(
        httpStatus: 200, contentType: "text/html; charset=utf-8",
        body: "<!DOCTYPE html><html><head><title>Apple</title></head><body><p>We'll be right back.</p></body></html>")
}

/// Deterministic identifiers: FNV-1a (64-bit) of the account and a salt, as 15 digits. Swift's
/// `hashValue` is randomized per process and would change ids between runs.
enum SimulatedIdentifier {
    static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// A 15-digit decimal id, never starting with 0.
    static func id(_ parts: String...) -> String {
        String(100_000_000_000_000 + fnv1a(parts.joined(separator: "#")) % 900_000_000_000_000)
    }
}

/// One paid period of one subscription.
struct SimulatedPeriod {
    var index: Int
    var start: Date
    var end: Date
    var productID: String
    var originalTransactionID: String
    var salt: String
    var trial = false
    var cancellation: Date?
    var cancellationReason: String?
    var upgraded = false
}

extension SimulatedReceipt {
    /// The bundle id of every simulated receipt.
    public static let bundleID = "com.example.app"
    static let day: TimeInterval = 86_400
    /// The billing grace period of `grace_period`, in days.
    static let graceDays: TimeInterval = 16

    /// The answer to one request at simulator time `now`.
    /// - Parameters:
    ///   - sandboxEndpoint: the request came to `/sandbox/verifyReceipt`.
    ///   - attempt: the request number for this account (1 for the first).
    /// - `withHistory`: `exclude-old-transactions` was false: every earlier period is listed too.
    func answer(at now: Date, sandboxEndpoint: Bool, attempt: Int, withHistory: Bool = false) -> SimulatedAnswer {
        if scenario == .sandbox, !sandboxEndpoint { return .status(.sandboxReceiptOnProduction) }
        if scenario != .sandbox, sandboxEndpoint { return .status(.productionReceiptOnSandbox) }
        switch scenario {
        case .accountNotFound: return .status(.accountNotFound)
        case .notAuthentic: return .status(.notAuthentic)
        case .malformed: return .status(.malformedOrTemporary)
        case .transient21005 where attempt <= 2: return .status(.serverUnavailable)
        case .outage: return SimulatedAnswer.outagePage
        case .html200: return SimulatedAnswer.htmlPage
        case .truncatedJSON: return .truncated(response(at: now))
        case .legacyIOS6: return .legacy(legacyAnswer(at: now))
        default: return .apple(response(at: now, withHistory: withHistory))
        }
    }

    /// The status-0 answer of the subscription scenarios at `now` (tests start scripted answers from it).
    public func response(at now: Date, withHistory: Bool = false) -> VerifyReceiptResponse {
        let timeline = timeline(at: now)
        var periods = timeline.periods
        // A subscription renewing since its purchase: its earlier periods, when asked for.
        if withHistory, [.renewal, .trial, .familyShared, .sandbox].contains(scenario), let current = periods.first,
            current.salt.isEmpty, current.index > 0
        {
            // At their extended dates, when Apple extended any.
            let bounds =
                grantedExtensions(until: now).isEmpty
                ? (0..<current.index).map { index in
                    let periodStart = start.addingTimeInterval(Double(index) * period)
                    return (index: index, start: periodStart, end: periodStart.addingTimeInterval(period))
                } : Array(extendedPeriods(until: now).prefix(current.index))
            periods =
                bounds.map { bounds in
                    var earlier = current
                    earlier.index = bounds.index
                    earlier.start = bounds.start
                    earlier.end = bounds.end
                    earlier.trial = scenario == .trial && bounds.index == 0
                    return earlier
                } + periods
        }
        let rows = periods.map(row(for:))
        let isSandbox = scenario == .sandbox
        var latest = self
        latest.generation = max(generation, timeline.renewals)
        return VerifyReceiptResponse(
            status: .valid,
            environment: isSandbox ? .sandbox : .production,
            latestReceipt: latest.encoded,
            latestReceiptInfo: rows,
            pendingRenewalInfo: timeline.pending,
            receipt: ReceiptInfo(
                receiptType: isSandbox ? "ProductionSandbox" : "Production", bundleID: bundleIdentifier,
                inApp: rows))
    }

    /// What the scenario's subscriptions look like at an instant: the periods Apple lists, the
    /// renewal info, and how many renewals have happened (the receipt's generation).
    struct Timeline {
        var periods: [SimulatedPeriod]
        var pending: [PendingRenewalInfo]
        var renewals = 0
    }

    private func timeline(at now: Date) -> Timeline {
        let originalID = SimulatedIdentifier.id(account)
        let elapsed = now.timeIntervalSince(start)
        // A one-period subscription's end, moved by the extensions Apple granted before it (or in its grace).
        let retryStart = extendedFirstEnd(until: now, grace: scenario == .gracePeriod ? Self.graceDays * Self.day : 0)
        let first = SimulatedPeriod(
            index: 0, start: start, end: retryStart, productID: productID, originalTransactionID: originalID, salt: "")
        switch scenario {
        case .voluntaryExpiry:
            return Timeline(
                periods: [first],
                pending: [
                    .init(
                        originalTransactionID: originalID, productID: productID, autoRenewStatus: false,
                        expirationIntent: now >= retryStart ? "1" : nil)
                ])
        case .legacyIOS6:
            // As the iOS 6 answer tells it: one period, auto-renew off, no intent given.
            return Timeline(
                periods: [first],
                pending: [.init(originalTransactionID: originalID, productID: productID, autoRenewStatus: false)])
        case .billingRetry, .gracePeriod:
            return Timeline(periods: [first], pending: [billingRetryPending(originalID: originalID, now: now)])
        case .gracePeriodRecovery:
            return graceRecoveryTimeline(at: now)
        case .billingRecovery:
            let recovery = retryStart.addingTimeInterval(3 * Self.day)
            guard now >= recovery else {
                return Timeline(periods: [first], pending: [billingRetryPending(originalID: originalID, now: now)])
            }
            let current = renewing(productID, from: recovery, firstIndex: 1, salt: "", now: now)
            return Timeline(
                periods: [current],
                pending: [.init(originalTransactionID: originalID, productID: productID, autoRenewStatus: true)],
                renewals: current.index)
        case .refund where elapsed >= 1.5 * period:
            var refunded = first
            refunded.index = 1
            refunded.start = retryStart
            refunded.end = retryStart.addingTimeInterval(period)
            refunded.cancellation = start.addingTimeInterval(1.5 * period)
            refunded.cancellationReason = "0"
            return Timeline(
                periods: [refunded],
                pending: [.init(originalTransactionID: originalID, productID: productID, autoRenewStatus: false)],
                renewals: 1)
        case .upgrade where elapsed >= 1.5 * period:
            return upgradeTimeline(first: first, now: now)
        case .multipleSubscriptions:
            return multipleSubscriptionsTimeline(now: now)
        default:
            // renewal, sandbox, family_shared, trial, transient_21005, truncated_json, slow, multiseat,
            // refund_request, and refund/upgrade before their event; extended renewal dates move the periods.
            var current = renewing(productID, from: start, firstIndex: 0, salt: "", now: now)
            current.trial = scenario == .trial && current.index == 0
            return Timeline(
                periods: [current],
                pending: [.init(originalTransactionID: originalID, productID: productID, autoRenewStatus: true)],
                renewals: current.index)
        }
    }

    /// The extensions of the subscription `originalTransactionID` (nil: the main one) Apple carried out by
    /// `now`, oldest first: one Apple has not carried out yet (a mass extension in progress) moves nothing.
    func grantedExtensions(until now: Date, of originalTransactionID: String? = nil) -> [SimulatedExtension] {
        let main = SimulatedIdentifier.id(account)
        let wanted = originalTransactionID ?? main
        return (extensions ?? []).filter { ($0.originalTransactionID ?? main) == wanted && $0.at <= now }
            .sorted { $0.at < $1.at }
    }

    /// The end of the first period of a subscription that does not renew on its own (auto-renew off, a
    /// billing failure), with the extensions Apple granted by `now`: each granted before that end, or
    /// `grace` after it (a billing grace period), moves it by its days.
    func extendedFirstEnd(until now: Date, grace: TimeInterval = 0, of originalTransactionID: String? = nil) -> Date {
        var end = start.addingTimeInterval(period)
        for granted in grantedExtensions(until: now, of: originalTransactionID)
        where granted.at < end.addingTimeInterval(grace) {
            end = end.addingTimeInterval(Double(granted.days) * Self.day)
        }
        return end
    }

    /// The periods of a subscription renewing every `period` from `origin`, up to the one `now` falls in:
    /// each extension moves the end of the period it was granted in (and so every later period) by its
    /// days; those granted before `origin` belong to an earlier subscription and move nothing. The first
    /// period may end elsewhere than a `period` after `origin` (`firstEnd`: a recovery keeps the renewal
    /// date) and count from `firstIndex`.
    func extendedPeriods(
        from origin: Date? = nil, firstEnd: Date? = nil, firstIndex: Int = 0, until now: Date
    ) -> [(index: Int, start: Date, end: Date)] {
        let origin = origin ?? start
        var pending = grantedExtensions(until: now).filter { $0.at >= origin }[...]
        var periods: [(index: Int, start: Date, end: Date)] = []
        var periodStart = origin
        var periodEnd = firstEnd ?? origin.addingTimeInterval(period)
        for index in firstIndex..<(firstIndex + 10_000) {
            while let next = pending.first, next.at < periodEnd {
                periodEnd = periodEnd.addingTimeInterval(Double(next.days) * Self.day)
                pending.removeFirst()
            }
            periods.append((index, periodStart, periodEnd))
            if now < periodEnd { break }
            periodStart = periodEnd
            periodEnd = periodStart.addingTimeInterval(period)
        }
        return periods
    }

    /// The period of a subscription renewing every `period` since `origin` that `now` falls in, its renewal
    /// dates moved by the extensions Apple granted since `origin`.
    private func renewing(_ product: String, from origin: Date, firstIndex: Int, salt: String, now: Date)
        -> SimulatedPeriod
    {
        let k = max(0, Int((now.timeIntervalSince(origin) / period).rounded(.down)))
        var current = (index: k, start: origin.addingTimeInterval(Double(k) * period), end: Date())
        current.end = current.start.addingTimeInterval(period)
        if now >= origin, grantedExtensions(until: now).contains(where: { $0.at >= origin }),
            let extended = extendedPeriods(from: origin, until: now).last
        {
            current = extended
        }
        return SimulatedPeriod(
            index: firstIndex + current.index, start: current.start, end: current.end,
            productID: product, originalTransactionID: SimulatedIdentifier.id(account), salt: salt)
    }

    /// Upgraded to the premium product mid-way through the second period.
    private func upgradeTimeline(first: SimulatedPeriod, now: Date) -> Timeline {
        let retryStart = start.addingTimeInterval(period)
        let upgradeDate = start.addingTimeInterval(1.5 * period)
        var old = first
        old.index = 1
        old.start = retryStart
        old.end = retryStart.addingTimeInterval(period)
        old.upgraded = true
        old.cancellation = upgradeDate
        let premium = productID + ".premium"
        let current = renewing(premium, from: upgradeDate, firstIndex: 0, salt: "premium", now: now)
        return Timeline(
            periods: [old, current],
            pending: [
                .init(originalTransactionID: SimulatedIdentifier.id(account), productID: premium, autoRenewStatus: true)
            ],
            renewals: 2 + current.index)
    }

    /// A renewing subscription and an add-on that expired after its first period.
    private func multipleSubscriptionsTimeline(now: Date) -> Timeline {
        let originalID = SimulatedIdentifier.id(account)
        let current = renewing(productID, from: start, firstIndex: 0, salt: "", now: now)
        let addonID = SimulatedIdentifier.id(account, "addon")
        let addon = productID + ".addon"
        let addonEnd = extendedFirstEnd(until: now, of: addonID)
        return Timeline(
            periods: [
                current,
                SimulatedPeriod(
                    index: 0, start: start, end: addonEnd, productID: addon, originalTransactionID: addonID,
                    salt: "addon"),
            ],
            pending: [
                .init(originalTransactionID: originalID, productID: productID, autoRenewStatus: true),
                .init(
                    originalTransactionID: addonID, productID: addon, autoRenewStatus: false,
                    expirationIntent: now >= addonEnd ? "1" : nil),
            ],
            renewals: current.index)
    }

    private func billingRetryPending(originalID: String, now: Date) -> PendingRenewalInfo {
        let retryStart = extendedFirstEnd(until: now, grace: scenario == .gracePeriod ? Self.graceDays * Self.day : 0)
        guard now >= retryStart else {
            return .init(originalTransactionID: originalID, productID: productID, autoRenewStatus: true)
        }
        let retrying = now < retryStart.addingTimeInterval(60 * Self.day)
        let grace = scenario == .gracePeriod ? retryStart.addingTimeInterval(Self.graceDays * Self.day) : nil
        return .init(
            originalTransactionID: originalID, productID: productID, autoRenewStatus: true,
            expirationIntent: "2", isInBillingRetryPeriod: retrying, gracePeriodExpiresDate: grace)
    }

    private func row(for period: SimulatedPeriod) -> LatestReceiptInfo {
        let transactionID =
            period.index == 0 && period.salt.isEmpty
            ? period.originalTransactionID
            : SimulatedIdentifier.id(account, "transaction", period.salt, String(period.index))
        return LatestReceiptInfo(
            productID: period.productID,
            transactionID: transactionID,
            originalTransactionID: period.originalTransactionID,
            webOrderLineItemID: SimulatedIdentifier.id(account, "line", period.salt, String(period.index)),
            quantity: String(seats(ofPeriod: period.index)?.quantity ?? 1),
            purchaseDate: period.start,
            originalPurchaseDate: start,
            expiresDate: period.end,
            cancellationDate: period.cancellation,
            cancellationReason: period.cancellationReason,
            isTrialPeriod: period.trial,
            isInIntroOfferPeriod: paidIntroductoryOffer == true && period.index == 0 && !period.trial,
            isUpgraded: period.upgraded ? true : nil,
            inAppOwnershipType: ownershipType,
            subscriptionGroupIdentifier: period.salt == "addon" ? "20000002" : "20000001")
    }

    /// `inAppOwnershipType` of the scenario's transactions.
    var ownershipType: String {
        switch scenario {
        case .familyShared: "FAMILY_SHARED"
        case .assignedSeat: "ASSIGNED"
        default: "PURCHASED"
        }
    }

    /// The seats of a multiseat scenario's period `index` (0 the purchase), and how many of them were
    /// refunded by `now`; nil for a scenario without seats.
    func seats(ofPeriod index: Int, at now: Date = .distantPast) -> (quantity: Int, revoked: Int?)? {
        switch scenario {
        case .assignedSeat:
            return (purchasedSeats, nil)
        case .multiseat:
            let refunded = now >= seatRefundDate && index == 1
            let left = purchasedSeats - Self.refundedSeats
            return (index >= 2 ? left : purchasedSeats, refunded ? Self.refundedSeats : nil)
        default:
            return nil
        }
    }

    /// When `multiseat` refunds two seats.
    var seatRefundDate: Date { start.addingTimeInterval(1.5 * period) }

    /// The index of the period `row` belongs to (0 the purchase).
    func periodIndex(of row: LatestReceiptInfo) -> Int {
        guard let purchased = row.purchaseDate else { return 0 }
        return max(0, Int((purchased.timeIntervalSince(start) / period).rounded()))
    }
}
