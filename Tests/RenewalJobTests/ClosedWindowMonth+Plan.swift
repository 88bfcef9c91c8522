import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

/// The subscribers of `ClosedWindowMonthTests` and what happens to them: those imported at the window's
/// start `S` (started before it, so their renewals, trial ends, billing failures, grace periods,
/// recoveries, refunds and upgrades fall in the window or just after its end `M`), purchases made inside the
/// window and in the month after it, and renewal-date extensions Apple grants along the way. Fixed, not
/// random: each member names the event it stands for. Days are counted from `S`; a period is 30 days
/// (monthly) or 7 (weekly).
struct ClosedWindowPlan {
    enum Action {
        case purchase([(user: String, receipt: SimulatedReceipt)])
        case extend(user: String, days: Int)
    }

    /// The subscriber whose refund Apple reveals after the window: monthly, in dollars, renewing since
    /// `S-40d`, so its period `[S+20d, S+50d)` spans `M`.
    static let lateUser = "cw-late"

    static let products: [(String, BillingPeriod)] = [
        ("com.example.pro.monthly", .month), ("com.example.pro.weekly", .week),
        ("com.example.pro.monthly.premium", .month), ("com.example.pro.weekly.premium", .week),
        ("com.example.pro.monthly.addon", .month), ("com.example.pro.weekly.addon", .week),
    ]

    /// At `S`: scenario, start (days from `S`), weekly, variant, what it stands for.
    static let atStart: [(Scenario, Double, Bool, String)] = [
        (.renewal, -25, false, ""), (.renewal, -20, false, ""), (.renewal, -12, false, "extended"),  // by 10 days at S+22d
        (.renewal, -6, false, ""), (.renewal, -5, true, ""), (.renewal, -3, true, ""), (.renewal, -50, false, ""),
        (.renewal, -2, false, "extended after M"),
        (.trial, -3, false, ""),  // converts at S+27d
        (.trial, -40, false, ""),  // converted before S
        (.trial, -2, true, ""),  // converts at S+5d
        (.voluntaryExpiry, -10, false, ""),  // expires at S+20d: churn
        (.voluntaryExpiry, -1, false, ""),  // expires at S+29d
        (.voluntaryExpiry, -5, false, "extended"),  // S+25d, extended at S+22d by 10 days past M
        (.billingRetry, -20, false, ""), (.billingRetry, -5, true, ""),
        (.gracePeriod, -3, false, ""),  // fails at S+27d, grace to S+43d: spans M
        (.gracePeriod, -2, true, ""),  // fails at S+5d, grace to S+21d
        (.gracePeriod, -10, false, ""),  // fails at S+20d, grace to S+36d: spans M
        (.gracePeriodRecovery, -2, false, ""),  // fails at S+28d, recovers at S+33d, after M
        (.gracePeriodRecovery, -10, false, ""),  // fails at S+20d, recovers at S+25d
        (.gracePeriodRecovery, -1, true, ""),  // fails at S+6d, recovers at S+11d
        (.billingRecovery, -5, false, ""),  // fails at S+25d, recovers at S+28d
        (.billingRecovery, -1, false, ""),  // fails at S+29d, recovers at S+32d, after M
        (.refund, -30, false, ""),  // refunded at S+15d
        (.refund, -10, false, ""),  // the period spanning M refunded at S+35d
        (.refund, -25, false, "prorated"),  // half refunded at S+20d
        (.refund, -8, false, "prorated"),  // half refunded at S+37d
        (.upgrade, -20, false, ""), (.upgrade, -5, false, ""),  // at S+25d; at S+40d
        (.multiseat, -20, false, ""), (.multipleSubscriptions, -10, false, ""), (.familyShared, -10, false, ""),
        (.sandbox, -10, false, ""),
    ]

    /// Purchases after `S`: day, scenario, weekly.
    static let later: [(Double, Scenario, Bool)] = [
        (5, .renewal, true), (5, .trial, false), (10, .refund, true), (10, .voluntaryExpiry, false),
        (20, .trial, true),
        // The month after M.
        (33, .renewal, false), (33, .refund, true), (33, .trial, false), (40, .voluntaryExpiry, false),
        (40, .gracePeriodRecovery, true), (40, .renewal, true),
    ]

    static let storefronts = ["USA", "FRA", "GBR", "JPN", "DEU"]

    var pending: [(at: Date, action: Action)] = []
    var receipts: [String: SimulatedReceipt] = [:]
    let late: SimulatedReceipt

    init(origin: Date) {
        let day: TimeInterval = 86_400
        func receipt(_ user: String, _ scenario: Scenario, start: Double, weekly: Bool, _ index: Int)
            -> (user: String, receipt: SimulatedReceipt)
        {
            var receipt = SimulatedReceipt(
                account: user, scenario: scenario, start: origin.addingTimeInterval(start * day),
                period: (weekly ? 7 : 30) * day,
                productID: weekly ? "com.example.pro.weekly" : "com.example.pro.monthly")
            receipt.storefront = Self.storefronts[index % Self.storefronts.count]
            return (user, receipt)
        }
        var first: [(user: String, receipt: SimulatedReceipt)] = []
        var late = receipt(Self.lateUser, .renewal, start: -40, weekly: false, 0)
        late.receipt.storefront = "USA"
        first.append(late)
        self.late = late.receipt
        for (index, member) in Self.atStart.enumerated() {
            var made = receipt(
                "cw-\(index)-\(member.0.rawValue)", member.0, start: member.1, weekly: member.2, index)
            if member.3 == "prorated" { made.receipt.refundPercentage = 50_000 }
            if member.3 == "extended" {
                pending.append((origin.addingTimeInterval(22 * day), .extend(user: made.user, days: 10)))
            }
            if member.3 == "extended after M" {
                pending.append((origin.addingTimeInterval(40 * day), .extend(user: made.user, days: 3)))
            }
            first.append(made)
        }
        pending.append((origin, .purchase(first)))
        for (index, purchase) in Self.later.enumerated() {
            let made = receipt(
                "cw-new-\(index)-\(purchase.1.rawValue)", purchase.1, start: purchase.0, weekly: purchase.2, index)
            pending.append((origin.addingTimeInterval(purchase.0 * day), .purchase([made])))
        }
        for action in pending {
            if case .purchase(let made) = action.action {
                for member in made { receipts[member.user] = member.receipt }
            }
        }
    }

    /// Carries out every action due by `now` (each once): imports the purchases (Apple knows them from
    /// then), and has Apple extend the renewal dates, as an operator elsewhere asked.
    mutating func perform(dueBy now: Date, h: JobHarness) async throws {
        let due = pending.filter { $0.at <= now }
        pending.removeAll { $0.at <= now }
        for (_, action) in due {
            switch action {
            case .purchase(let made):
                try await h.importReceipts(made)
            case .extend(let user, let days):
                let id = try #require(receipts[user]).originalTransactionID
                let granted = h.state.extendRenewalDate(
                    originalTransactionID: id, days: days, requestIdentifier: "cw-extend-\(user)")
                #expect(granted, "Apple refused to extend \(user)")
            }
        }
    }
}
