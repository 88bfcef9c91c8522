import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalSQL
import RenewalStorage
import RenewalTesting

/// A seeded subscriber population for the simulated-month property test: every timeline the simulator
/// plays that ends in a subscription row, with start dates spread so each one's event (renewal, trial end,
/// expiry, billing failure, grace end, recovery, refund, upgrade) falls inside the month.
struct TimelinePopulation {
    struct Member {
        var user: String
        var receipt: SimulatedReceipt
        /// What the member stands for in the failure message: the scenario, and its variant.
        var kind: String
        /// When Apple extends the member's renewal date (an operator elsewhere asks), if it does.
        var extension_: (at: Date, days: Int)?
    }

    var members: [Member] = []

    /// The mix: scenario, variant name, weight. Variants: `prorated` refunds half the period, `requested`
    /// asks for the refund a day before it, `extended` gets a renewal-date extension at a random moment of
    /// the month.
    static let mix: [(scenario: Scenario, variant: String, weight: Int)] = [
        (.renewal, "", 22), (.renewal, "extended", 8), (.trial, "", 10), (.voluntaryExpiry, "", 7),
        (.voluntaryExpiry, "extended", 3), (.billingRetry, "", 6), (.gracePeriod, "", 7),
        (.gracePeriod, "extended", 4), (.billingRecovery, "", 7), (.refund, "", 6), (.refund, "prorated", 5),
        (.upgrade, "", 4), (.multiseat, "", 3), (.multipleSubscriptions, "", 3), (.refundRequest, "", 2),
        (.refund, "requested", 2), (.familyShared, "", 4), (.sandbox, "", 4),
    ]

    init(count: Int, seed: UInt64, origin: Date, days: Double) {
        var random = SeededGenerator(seed: seed)
        let total = Self.mix.map(\.weight).reduce(0, +)
        for index in 0..<count {
            var pick = Int.random(in: 0..<total, using: &random)
            var choice = Self.mix[0]
            for entry in Self.mix {
                if pick < entry.weight {
                    choice = entry
                    break
                }
                pick -= entry.weight
            }
            // A quarter renew weekly, so a month holds several renewals, trial ends and failures of theirs.
            let period: TimeInterval = (Double.random(in: 0..<1, using: &random) < 0.25 ? 7 : 30) * 86_400
            // Started up to one and a half periods ago: the first period's end (trial end, expiry, billing
            // failure) and the refund or upgrade at s+1.5p fall in the month.
            let age = Double.random(in: 0..<1.5, using: &random) * period
            var receipt = SimulatedReceipt(
                account: "tp-\(seed)-\(index)", scenario: choice.scenario, start: origin.addingTimeInterval(-age),
                period: period, productID: period < 30 * 86_400 ? "com.example.pro.weekly" : "com.example.pro.monthly")
            if choice.variant == "prorated" { receipt.refundPercentage = 50_000 }
            if choice.variant == "requested" { receipt.refundRequested = true }
            var member = Member(
                user: String(format: "tp-%04d", index), receipt: receipt,
                kind: choice.scenario.rawValue + (choice.variant.isEmpty ? "" : " (\(choice.variant))"))
            if choice.variant == "extended" {
                member.extension_ = (
                    origin.addingTimeInterval(Double.random(in: 0..<days, using: &random) * 86_400),
                    Int.random(in: 1...10, using: &random)
                )
            }
            members.append(member)
        }
    }

    var summary: String {
        Dictionary(grouping: members, by: \.kind).map { ($0.key, $0.value.count) }.sorted { $0.1 > $1.1 }
            .map { "\($0.1) \($0.0)" }.joined(separator: ", ")
    }
}

/// One subscription row as the database stores it: what the job decided.
struct StoredSubscription {
    var userID: String
    var originalTransactionID: String
    var productID: String?
    var state: SubscriptionState
    var isTrial: Bool
    var environment: String?
    var ownershipType: String?
    var expiresAt: Date?
    var gracePeriodExpiresAt: Date?
    var autoRenew: Bool?
    var lastVerifiedAt: Date?
    var nextCheckAt: Date?

    /// The rows the analytics count: production, bought by the customer (not family-shared, not a seat
    /// of someone else's multiseat purchase).
    var isCounted: Bool { environment == "Production" && (ownershipType ?? "PURCHASED") == "PURCHASED" }

    static func all(_ h: JobHarness) async throws -> [StoredSubscription] {
        let rows = try await DashboardViewsTests.query(
            h,
            """
            SELECT user_id, original_transaction_id, product_id, state, is_trial, environment, ownership_type,
                expires_at, grace_period_expires_at, auto_renew, last_verified_at, next_check_at
            FROM subscriptions ORDER BY original_transaction_id
            """)
        return rows.compactMap { row in
            guard let id = DashboardViewsTests.text(row, "original_transaction_id"),
                let state = DashboardViewsTests.text(row, "state").flatMap(SubscriptionState.init(rawValue:))
            else { return nil }
            func date(_ column: String) -> Date? {
                DashboardViewsTests.int(row, column).map { Date(timeIntervalSince1970: Double($0) / 1000) }
            }
            return StoredSubscription(
                userID: DashboardViewsTests.text(row, "user_id") ?? "?", originalTransactionID: id,
                productID: DashboardViewsTests.text(row, "product_id"), state: state,
                isTrial: DashboardViewsTests.int(row, "is_trial") == 1,
                environment: DashboardViewsTests.text(row, "environment"),
                ownershipType: DashboardViewsTests.text(row, "ownership_type"), expiresAt: date("expires_at"),
                gracePeriodExpiresAt: date("grace_period_expires_at"),
                autoRenew: DashboardViewsTests.int(row, "auto_renew").map { $0 == 1 },
                lastVerifiedAt: date("last_verified_at"), nextCheckAt: date("next_check_at"))
        }
    }

    var described: String {
        "state \(state.rawValue), is_trial \(isTrial), expires_at \(Self.time(expiresAt)), grace_period_expires_at "
            + "\(Self.time(gracePeriodExpiresAt)), auto_renew \(autoRenew.map(String.init) ?? "null"), product "
            + "\(productID ?? "null"), \(environment ?? "no environment"), \(ownershipType ?? "no ownership"), "
            + "last_verified_at \(Self.time(lastVerifiedAt)), next_check_at \(Self.time(nextCheckAt))"
    }

    static func time(_ date: Date?) -> String { date.map(Timestamp.string) ?? "null" }
}

/// What the property compares after one run: each counted row's entitlement against Core's answer for
/// `now` from its ledger, and the analytics' active count against the rows stored as entitled and paid.
struct EntitlementComparison {
    struct Disagreement {
        var kind: String
        var row: StoredSubscription
        var ledger: SubscriptionLedger?
    }

    var disagreements: [Disagreement] = []
    var analyticsActive = 0
    var storedActive = 0
    var counted = 0
    var entitled = 0
    /// Rows the one definitional rule below set apart after this run.
    var awaitingCheck = 0
    /// Each counted row's stored entitlement, by original transaction id.
    var granted: [String: Bool] = [:]
    /// The counted rows Core agreed with, and the ledger it agreed from: what a later look at this moment
    /// is compared with (`LaterAnswers`).
    var agreed: [(row: StoredSubscription, ledger: SubscriptionLedger?)] = []

    /// Compares the database at `now`; `ledgers` is every subscription's, read through `ledgerPage`.
    init(rows: [StoredSubscription], ledgers: [String: SubscriptionLedger], now: Date) {
        var all = SubscriptionAnalytics(since: now.addingTimeInterval(-0.001), until: now)
        for ledger in ledgers.values { all.add(ledger) }
        analyticsActive = all.total.activeSubscriptions
        for row in rows {
            // Family-shared rows, a member's seat and Sandbox rows grant access, but the analytics count only
            // what customers bought in production (docs/analytics.md): Core has no answer to compare them to.
            guard row.isCounted else { continue }
            counted += 1
            granted[row.originalTransactionID] = row.state.grantsAccess
            if row.state.grantsAccess { entitled += 1 }
            let ledger = ledgers[row.originalTransactionID]
            let core = ledger.map { Self.entitled($0, at: now) } ?? false
            if row.state.grantsAccess != core, Self.awaitsItsCheck(row, ledger: ledger, now: now) {
                awaitingCheck += 1
                continue
            }
            if row.state.grantsAccess && !row.isTrial { storedActive += 1 }
            if row.state.grantsAccess != core {
                disagreements.append(
                    Disagreement(kind: Self.kind(row, core: core, ledger: ledger, now: now), row: row, ledger: ledger))
            } else {
                agreed.append((row, ledger))
            }
        }
    }

    /// Core's answer for one subscription at `moment`: paid or in a free trial, by the analytics' own
    /// definition of the moment (a window of one millisecond ending at it).
    static func entitled(_ ledger: SubscriptionLedger, at moment: Date) -> Bool {
        let analytics = SubscriptionAnalytics(since: moment.addingTimeInterval(-0.001), until: moment)
        var figures = AnalyticsFigures()
        for productFigures in analytics.figures(of: ledger).values { figures.add(productFigures) }
        return figures.activeSubscriptions + figures.activeTrials == 1
    }

    /// The one definitional difference: a stored state is the answer of the row's last check (design §3:
    /// derived from Apple's evidence and the time of the check), and the schedule looks again
    /// `afterExpiry` (15 min) after the period or the grace period ends (operating.md, "Default schedule"):
    /// an auto-renewing row waits there for Apple to post the renewal or the failure, one with auto-renew
    /// off for nothing. Between that end and that check the row still grants access while Core, reading
    /// the same end from the ledger, does not. Only that: the row grants access, its end has passed since
    /// its last check, Core agrees it was entitled until that end, and its next check is planned within
    /// `afterExpiry` of the end and has not come yet (a due row the run left stale is a disagreement).
    static func awaitsItsCheck(_ row: StoredSubscription, ledger: SubscriptionLedger?, now: Date) -> Bool {
        let end = row.state == .gracePeriod ? row.gracePeriodExpiresAt : row.expiresAt
        guard row.state.grantsAccess, let ledger, let end, end <= now, let checked = row.lastVerifiedAt,
            checked < end, let next = row.nextCheckAt, now < next,
            next <= end.addingTimeInterval(SchedulePolicy().afterExpiry)
        else { return false }
        return entitled(ledger, at: end.addingTimeInterval(-0.001))
    }

    /// A name for a disagreement, so the failure message groups them: the row's state against Core's answer,
    /// and what the ledger's newest transaction says about `now`.
    static func kind(_ row: StoredSubscription, core: Bool, ledger: SubscriptionLedger?, now: Date) -> String {
        let newest = ledger?.transactions.last
        let ledgerSays =
            newest == nil
            ? "no ledger"
            : newest?.revokedAt.map { $0 <= now ? "newest revoked" : "newest revoked later" }
                ?? ((newest?.expiresAt ?? .distantPast) <= now ? "newest expired" : "newest current")
        return "row \(row.state.rawValue)\(row.isTrial ? " (trial)" : "") but Core says "
            + "\(core ? "entitled" : "not entitled") (\(ledgerSays))"
    }

    /// The ledger as the failure message shows it: every field but the transactions (whatever the ledger
    /// carries besides them), then one line per transaction.
    static func describe(_ ledger: SubscriptionLedger?) -> String {
        guard let ledger else { return "  (no ledger rows)" }
        let fields = Mirror(reflecting: ledger).children.filter { $0.label != "transactions" }
            .map { "\($0.label ?? "?"): \(String(describing: $0.value))" }.joined(separator: ", ")
        let transactions = ledger.transactions.map { t in
            "  \(t.transactionID) \(t.productID ?? "?") purchased \(StoredSubscription.time(t.purchasedAt)) expires "
                + "\(StoredSubscription.time(t.expiresAt))\(t.isTrial ? " trial" : "")"
                + (t.revokedAt.map { " revoked \(Timestamp.string($0)) \(t.revocationType ?? "")" } ?? "")
                + (t.isUpgraded ? " upgraded" : "") + " \(t.ownershipType ?? "") \(t.transactionReason ?? "")"
                + " (\(t.origin.rawValue))"
        }
        return "  " + fields + "\n" + transactions.joined(separator: "\n")
    }
}

/// The analytics answer for past moments too (churn, cohorts, the daily series): at the end of the month,
/// Core's answer for each earlier run's moment, from the final ledger, must still be what the row stored then
/// and Core agreed with then, unless Apple's facts about that moment changed since (a refund or a renewal
/// learned later, an extension): a transaction purchased by that moment that appeared, or whose expiry or
/// revocation moved. Without such a change a different answer means the analytics lost a fact they had.
struct LaterAnswers {
    struct Moment {
        var run: Int
        var at: Date
        var agreed: [(row: StoredSubscription, ledger: SubscriptionLedger?)]
    }

    struct Disagreement {
        var kind: String
        var moment: Moment
        var row: StoredSubscription
        var then: SubscriptionLedger?
        var later: SubscriptionLedger?
    }

    var disagreements: [Disagreement] = []
    /// Answers that changed because Apple's facts about the moment changed since.
    var rewritten = 0
    var compared = 0

    init(_ moments: [Moment], final ledgers: [String: SubscriptionLedger]) {
        for moment in moments {
            for (row, then) in moment.agreed {
                compared += 1
                let later = ledgers[row.originalTransactionID]
                let answer = later.map { EntitlementComparison.entitled($0, at: moment.at) } ?? false
                guard answer != row.state.grantsAccess else { continue }
                if Self.facts(then, upTo: moment.at) != Self.facts(later, upTo: moment.at) {
                    rewritten += 1
                    continue
                }
                let kind =
                    "Core's later answer for an earlier moment: the row was \(row.state.rawValue) there, Core now "
                    + "says \(answer ? "entitled" : "not entitled") from the same transactions"
                disagreements.append(
                    Disagreement(kind: kind, moment: moment, row: row, then: then, later: later))
            }
        }
    }

    /// What the ledger says of the transactions purchased by `moment`: which, and when each ends.
    static func facts(_ ledger: SubscriptionLedger?, upTo moment: Date) -> [String: [Date?]] {
        var facts: [String: [Date?]] = [:]
        for transaction in ledger?.transactions ?? [] where (transaction.purchasedAt ?? .distantFuture) <= moment {
            facts[transaction.transactionID] = [transaction.expiresAt, transaction.revokedAt]
        }
        return facts
    }
}
