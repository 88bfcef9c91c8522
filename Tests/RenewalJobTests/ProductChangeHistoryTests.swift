import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalStorage
import Testing

@testable import RenewalDelivery
@testable import RenewalJob

/// A plan change keeps the plan it left: `product_changed` names `from_product_id` in the table, the
/// reports and the webhook, and the history read backwards (the HTML chart) moves the subscriber from
/// the old plan to the new one at the run that saw the change, counting one subscription's move once.
@Suite("Product changes: the plan left is recorded, and history walks back through it")
struct ProductChangeHistoryTests {
    static let monthly = "com.example.pro.monthly"
    static let premium = "com.example.pro.monthly.premium"
    static let yearly = "com.example.pro.yearly"

    @Test(
        "an upgrade, a crossgrade and a downgrade each record the product left; a refund with auto-renew off counts once",
        arguments: Backend.available)
    func planChanges(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let plan = h.receipt("plan", .renewal)
            let refund = h.receipt("refund", .renewal)
            try await h.importReceipts([("plan", plan), ("refund", refund)])
            let history = try #require(h.store as? any RunHistoryStore)
            let first = try await h.run()
            #expect(first.counts.changed == 2)

            // Each step: the plan subscription moves to `product` (the refund, on the first step only).
            var runs: [(RenewalOutcome, from: String, to: String)] = []
            for (from, to) in [(Self.monthly, Self.premium), (Self.premium, Self.yearly), (Self.yearly, Self.monthly)] {
                h.state.advance(by: 3_600)
                let moved = EvidenceRulesTests.editingRows(try EvidenceRulesTests.answer(plan, at: h.state.now)) {
                    $0["product_id"] = to
                }
                h.state.script(account: "plan", .json(moved))
                if runs.isEmpty {
                    var refunded = EvidenceRulesTests.editingRows(
                        try EvidenceRulesTests.answer(refund, at: h.state.now)
                    ) {
                        $0["cancellation_date_ms"] = String(AppleDateFormat.milliseconds(h.state.now))
                    }
                    refunded["pending_renewal_info"] = [
                        [
                            "original_transaction_id": refund.originalTransactionID, "product_id": Self.monthly,
                            "auto_renew_product_id": Self.monthly, "auto_renew_status": "0",
                        ]
                    ]
                    h.state.script(account: "refund", .json(refunded))
                }
                let outcome = try await h.run(.backfill(BackfillSelector(all: true))) {
                    $0.queueWebhooks = true
                    $0.reportPath = h.directory + "/run-\(runs.count).json"
                }
                runs.append((outcome, from, to))
            }

            for (outcome, from, to) in runs {
                let changes = try await history.changes(ofRun: outcome.runID)
                let moved = changes.filter { $0.event.kind == .productChanged }
                #expect(moved.count == 1, "\(changes.map(\.event.kind))")
                #expect(moved.first?.event.fromProductID == from && moved.first?.event.productID == to)
                #expect(
                    changes.filter { $0.event.kind != .productChanged }.allSatisfy { $0.event.fromProductID == nil })
                // The report names it too.
                let report = try h.report(outcome)
                let reported = (report["changes"] as? [[String: Any]] ?? []).filter {
                    $0["kind"] as? String == "product_changed"
                }
                #expect(reported.first?["from_product_id"] as? String == from, "\(reported)")
                // Net entitled change of the run: the plan left loses one, the plan joined gains one.
                let deltas = try await history.entitledDeltas(since: first.startedAt)[outcome.runID] ?? [:]
                let production = { (product: String) in
                    deltas[EntitledPlan(productID: product, environment: "Production")] ?? 0
                }
                let refundDelta = outcome.runID == runs[0].0.runID ? -1 : 0
                #expect(production(from) == -1 + (from == Self.monthly ? refundDelta : 0), "\(deltas)")
                #expect(production(to) == 1, "\(deltas)")
            }
            // The refund's two events (refunded, auto_renew_disabled) are one move out of the plan.
            let refundEvents = try await history.changes(ofRun: runs[0].0.runID).filter { $0.userID == "refund" }
            #expect(Set(refundEvents.map(\.event.kind)) == [.refunded, .autoRenewDisabled], "\(refundEvents)")

            // Walking back from now through every run's deltas gives the first run's picture.
            var walked = try await history.entitledNow()
            for (outcome, _, _) in runs {
                for (plan, delta) in try await history.entitledDeltas(since: first.startedAt)[outcome.runID] ?? [:] {
                    walked[plan, default: 0] -= delta
                }
            }
            #expect(
                walked.filter { $0.value != 0 } == [EntitledPlan(productID: Self.monthly, environment: "Production"): 2]
            )

            // The webhook's data carries it as well (a user's changes go out in order: the first here).
            let outbox = try #require(h.store as? any WebhookOutboxStore)
            let pending = try await outbox.claimDeliveries(
                owner: "test", now: h.state.now.addingTimeInterval(60),
                leaseExpiresAt: h.state.now.addingTimeInterval(600),
                limit: 100)
            let bodies = try pending.filter { $0.change.event.kind == .productChanged }.map {
                try #require(try JSONSerialization.jsonObject(with: WebhookEvent.body(of: $0)) as? [String: Any])
            }
            #expect(
                bodies.compactMap { ($0["data"] as? [String: Any])?["from_product_id"] as? String } == [Self.monthly],
                "\(bodies)")
        }
    }
}
