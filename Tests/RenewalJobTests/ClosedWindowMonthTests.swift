import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage
import Testing

/// Issue 43, "done when": a window asked at its end and again after a month of later events gives the same
/// figures, and a fact Apple reveals later about a moment inside the window moves exactly the figures
/// docs/analytics.md ("A closed window stays closed") says it may. Through the real job, the change feed
/// and the simulator's Server API, on SQLite and PostgreSQL.
@Suite("Closed window over a month: the same figures at the window's end and a month later, on both databases")
struct ClosedWindowMonthTests {
    static let day: TimeInterval = 86_400
    static let step: TimeInterval = 12 * 3_600

    @Test(
        """
        a month [S, M) of subscribers (renewals in four currencies, trials, grace periods with and without an early \
        recovery, billing retry, recoveries, full and prorated refunds, upgrades, extensions, cancellations, new \
        purchases) run every 12 hours through the feed; the window asked just after M and again after a month of \
        grace periods ending, refunds after M, recoveries, cancellations and new purchases gives every figure \
        equal, overall and per product; a refund Apple reveals later, dated inside the window, moves the active \
        count, MRR and refunds of the window, and nothing else
        """,
        arguments: Backend.available)
    func windowStaysClosed(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let origin = h.state.now
            let until = origin.addingTimeInterval(30 * Self.day)
            var plan = ClosedWindowPlan(origin: origin)
            h.state.notificationDelay = 120
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                // A run at M itself: what the job stored then agrees with the ledger's answer for M.
                try await Self.runs(h, plan: &plan, through: until, router, client)
                try await Self.expectAgreementWithTheRows(h, at: until)
                // Asked an hour later, after one more run has read what Apple listed at M (a renewal due
                // exactly at M is in the feed two minutes later).
                try await Self.runs(h, plan: &plan, through: until.addingTimeInterval(3_600), router, client)
                let atEnd = try await Self.figures(h, since: origin, until: until)
                print("closed window [\(backend)] at M: \(Self.describe(atEnd.total))")
                Self.expectTheWindowIsExercised(atEnd.total)

                try await Self.runs(h, plan: &plan, through: until.addingTimeInterval(30 * Self.day), router, client)
                let later = try await Self.figures(h, since: origin, until: until)
                let moved = Self.differences(atEnd.total, later.total)
                #expect(moved.isEmpty, "figures of [S, M) moved a month later: \(moved)")
                for (product, figures) in atEnd.byProduct {
                    let changed = Self.differences(figures, later.byProduct[product] ?? AnalyticsFigures())
                    #expect(changed.isEmpty, "\(product): \(changed)")
                }
                #expect(Set(later.byProduct.keys) == Set(atEnd.byProduct.keys))
                // The month after M did happen: the later window is not the same as the closed one.
                let month = try await Self.figures(h, since: until, until: h.state.now).total
                #expect(month.newSubscriptions > 0 && month.refunds != Amounts() && month.churned > 0, "\(month)")

                // Apple reveals a refund dated inside the window of a period spanning M.
                try await Self.revealLateRefund(h, plan.late, at: origin.addingTimeInterval(25 * Self.day))
                let revealed = try await Self.figures(h, since: origin, until: until).total
                #expect(Self.differences(later.total, revealed) == ["activeSubscriptions", "mrr", "refunds"])
                #expect(revealed.activeSubscriptions == later.total.activeSubscriptions - 1)
                let price = Decimal(string: "9.99")!
                #expect(revealed.mrr.byCurrency["USD"] == (later.total.mrr.byCurrency["USD"] ?? 0) - price)
                #expect(revealed.refunds.byCurrency["USD"] == (later.total.refunds.byCurrency["USD"] ?? 0) + price)
            }
        }
    }

    /// The population exercises every kind of figure in the window.
    static func expectTheWindowIsExercised(_ figures: AnalyticsFigures) {
        #expect(figures.activeSubscriptions > 10 && figures.activeTrials > 0 && figures.activeAtSince > 10)
        #expect(figures.newSubscriptions > 0 && figures.newTrials > 0 && figures.trialConversions > 0)
        #expect(figures.churned > 0)
        #expect(Set(figures.mrr.byCurrency.keys).isSuperset(of: ["USD", "EUR", "GBP", "JPY"]), "\(figures.mrr)")
        #expect(figures.refunds.byCurrency.values.contains { $0 > 0 }, "\(figures.refunds)")
    }

    /// At its end, the ledger says what the job stored then: each counted row entitled exactly when the
    /// ledger says so at M (the one definitional rule of `EntitlementComparison` aside), and the active count
    /// equal to the rows stored entitled and paid. Without this, a ledger that lost a fact before M would give
    /// the same wrong figures twice.
    static func expectAgreementWithTheRows(_ h: JobHarness, at until: Date) async throws {
        let store = try #require(h.store as? any AnalyticsStore)
        let comparison = EntitlementComparison(
            rows: try await StoredSubscription.all(h), ledgers: try await TimelinePropertyTests.ledgers(store),
            now: until)
        let disagreements = comparison.disagreements.map { "\($0.row.userID): \($0.kind)" }
        #expect(disagreements.isEmpty, "rows and ledger disagree at M: \(disagreements)")
        #expect(comparison.analyticsActive == comparison.storedActive, "stored \(comparison.storedActive)")
        #expect(comparison.storedActive > 10 && comparison.awaitingCheck < 3)
    }

    /// Runs every `step` from now through `end`: before each, the plan's purchases and extensions due by then.
    static func runs(
        _ h: JobHarness, plan: inout ClosedWindowPlan, through end: Date, _ router: SourceRouter,
        _ client: ServerAPIClient
    ) async throws {
        while true {
            try await plan.perform(dueBy: h.state.now, h: h)
            _ = try await h.run(.run, verifier: router) {
                $0.feed = client
                $0.operatorActions = client
            }
            guard h.state.now < end else { return }
            h.state.advance(by: min(Self.step, end.timeIntervalSince(h.state.now)))
        }
    }

    /// A refund Apple had not told (or the job missed): the subscription's verifyReceipt answer now lists the
    /// period that `date` falls in as refunded at `date`, beside its current period; one check reads it.
    static func revealLateRefund(_ h: JobHarness, _ receipt: SimulatedReceipt, at date: Date) async throws {
        var answer = try EvidenceRulesTests.answer(receipt, at: h.state.now)
        let refunded = EvidenceRulesTests.editingRows(try EvidenceRulesTests.answer(receipt, at: date)) {
            $0["cancellation_date_ms"] = String(AppleDateFormat.milliseconds(date))
            $0["cancellation_reason"] = "0"
        }
        let current = answer["latest_receipt_info"] as? [[String: Any]] ?? []
        answer["latest_receipt_info"] = (refunded["latest_receipt_info"] as? [[String: Any]] ?? []) + current
        h.state.script(account: receipt.account, .json(answer))
        defer { h.state.script(account: receipt.account, nil) }
        let outcome = try await h.run(.backfill(BackfillSelector(userIDs: [ClosedWindowPlan.lateUser])))
        #expect(outcome.counts.failed == 0, "the late refund's check failed")
    }

    static let catalogue = ProductCatalogue(
        products: Dictionary(
            uniqueKeysWithValues: ClosedWindowPlan.products.map { id, period in
                (id, ProductCatalogue.Product(period: period, listPrices: ["USD": Decimal(string: "9.99")!]))
            }))

    /// What `renewal analytics --since --until` computes: one pass over every ledger, as `AnalyticsWork` does.
    static func figures(_ h: JobHarness, since: Date, until: Date) async throws -> SubscriptionAnalytics {
        let store = try #require(h.store as? any AnalyticsStore)
        var analytics = SubscriptionAnalytics(since: since, until: until, catalogue: catalogue)
        try await store.forEachSubscriptionLedger(bundleID: nil) { analytics.add($0) }
        return analytics
    }

    /// The names of the figures that differ between `a` and `b` (amounts compared per currency).
    static func differences(_ a: AnalyticsFigures, _ b: AnalyticsFigures) -> [String] {
        var right: [String: AnyHashable] = [:]
        for child in Mirror(reflecting: b).children { right[child.label ?? "?"] = child.value as? AnyHashable }
        return Mirror(reflecting: a).children.compactMap { child in
            let label = child.label ?? "?"
            return right[label] == child.value as? AnyHashable ? nil : label
        }
    }

    static func describe(_ figures: AnalyticsFigures) -> String {
        "active \(figures.activeSubscriptions), trials \(figures.activeTrials), at since \(figures.activeAtSince), "
            + "new \(figures.newSubscriptions), new trials \(figures.newTrials), converted \(figures.trialConversions), "
            + "churned \(figures.churned), reactivated \(figures.reactivations), mrr \(figures.mrr.byCurrency), "
            + "revenue \(figures.revenue.byCurrency), refunds \(figures.refunds.byCurrency)"
    }
}
