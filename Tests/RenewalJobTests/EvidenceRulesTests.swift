import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

/// The evidence rules (docs/operating.md, "What it guarantees"): thin or odd answers never move an
/// entitlement. Each test runs on a real SQLite file and, when CI provides one, a real PostgreSQL.
@Suite("Evidence rules: only clear Apple answers move entitlements")
struct EvidenceRulesTests {
    /// Apple's normal answer for `receipt` at `date`, as a JSON object a test can bend.
    static func answer(_ receipt: SimulatedReceipt, at date: Date) throws -> [String: Any] {
        let data = try JSONEncoder().encode(receipt.response(at: date))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// `answer` with `edit` applied to every `latest_receipt_info` row.
    static func editingRows(_ answer: [String: Any], _ edit: (inout [String: Any]) -> Void) -> [String: Any] {
        var answer = answer
        var rows = answer["latest_receipt_info"] as? [[String: Any]] ?? []
        for index in rows.indices { edit(&rows[index]) }
        answer["latest_receipt_info"] = rows
        return answer
    }

    static func failures(_ h: JobHarness, run outcome: RenewalOutcome) async throws -> [RecordedFailure] {
        let history = try #require(h.store as? any RunHistoryStore)
        return try await history.failures(ofRun: outcome.runID)
    }

    static func changes(_ h: JobHarness, run outcome: RenewalOutcome) async throws -> [RecordedChange] {
        let history = try #require(h.store as? any RunHistoryStore)
        return try await history.changes(ofRun: outcome.runID)
    }

    @Test(
        "21002 on check after check never takes away an entitlement a valid answer granted",
        arguments: Backend.available)
    func malformedStormKeepsPayingCustomer(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Given an active, auto-renewing subscriber verified once
            let receipt = h.receipt("payer", .renewal, daysAgo: 25)
            try await h.importReceipts([("payer", receipt)])
            _ = try await h.run()
            #expect(try await h.status().first?.state == .active)

            // When Apple answers 21002 on every check for four days from just before the paid period's end
            h.state.script(account: "payer", .json(["status": 21002]))
            h.state.advance(by: 5 * 86_400 - 2 * 3600)
            var failed: [RecordedFailure] = []
            for _ in 0..<4 {
                h.state.advance(by: 30 * 3600)
                let outcome = try await h.run()
                #expect(outcome.counts.checked == 1)
                #expect(outcome.counts.changed == 0)
                failed += try await Self.failures(h, run: outcome)
            }

            // Then the subscriber is still active and entitled, the receipt still verified
            let row = try #require(try await h.status().first)
            #expect(row.state == .active)
            #expect(row.entitled)
            #expect(try await h.receipts().first?.status == .verified)
            #expect(failed.count == 4 && failed.allSatisfy { $0.failure.reason == "apple_status_21002" })
            #expect(failed.first?.failure.message.contains("verified before") == true)

            // And a single 21003 does not invalidate it either
            h.state.script(account: "payer", .json(["status": 21003]))
            h.state.advance(by: 86_400)
            let outcome = try await h.run()
            #expect(outcome.counts.invalid == 0)
            #expect(try await h.status().first?.entitled == true)
            #expect(try await Self.failures(h, run: outcome).map(\.failure.reason) == ["apple_status_21003"])
        }
    }

    @Test(
        "A 21002 storm across many receipts opens the breaker; the failures are in run_failures",
        arguments: Backend.available)
    func malformedStormOpensBreaker(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let accounts = (0..<12).map { "acct-\($0)" }
            try await h.importReceipts(accounts.map { ($0, h.receipt($0, .renewal, daysAgo: 25)) })
            _ = try await h.run()
            let before = try await h.status()
            for account in accounts { h.state.script(account: account, .json(["status": 21002])) }

            h.state.advance(by: 10 * 86_400)
            let outcome = try await h.run {
                $0.circuitBreaker = .init(threshold: 5)
                $0.concurrency = 1
            }

            #expect(outcome.status == .abortedAppleUnavailable)
            #expect(outcome.status.exitCode == 4)
            #expect(outcome.counts.changed == 0)
            #expect(try await h.status() == before)
            let failures = try await Self.failures(h, run: outcome)
            #expect(failures.count == 5)
            #expect(failures.allSatisfy { $0.failure.reason == "apple_status_21002" })
            #expect(try await h.receipts().allSatisfy { $0.status == .verified && $0.consecutiveFailures == 0 })
        }
    }

    @Test(
        "A replaced receipt: the old subscription loses its entitlement when its expiry passes",
        arguments: Backend.available)
    func replacedReceiptLosesStaleEntitlement(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Given a user whose subscription (old Apple ID) is active for 20 more days
            let old = h.receipt("old-apple-id", .renewal, daysAgo: 10)
            try await h.importReceipts([("u", old)])
            _ = try await h.run()
            let oldID = try #require(try await h.status().first?.originalTransactionID)

            // When the app stores a receipt of another Apple ID for the same user
            try await h.importReceipts([("u", h.receipt("new-apple-id", .voluntaryExpiry, daysAgo: 1))])
            _ = try await h.run()
            // Then the old one keeps its entitlement until its known expiry
            let stillPaid = try await h.status(user: "u")
            #expect(stillPaid.count == 2)
            #expect(stillPaid.first { $0.originalTransactionID == oldID }?.entitled == true)

            // When that expiry passes and the receipt is checked again
            h.state.advance(by: 21 * 86_400)
            let outcome = try await h.run(.backfill(BackfillSelector(userIDs: ["u"])))

            // Then it loses the entitlement, with an event that says why
            let oldRow = try #require(try await h.status(user: "u").first { $0.originalTransactionID == oldID })
            #expect(oldRow.state == .expired)
            #expect(!oldRow.entitled)
            let change = try #require(
                try await Self.changes(h, run: outcome).first { $0.event.originalTransactionID == oldID })
            #expect(change.event.kind == .expiredUnlisted)
            #expect(change.event.fromState == .active)
            #expect(change.event.newExpiresAt == old.start.addingTimeInterval(30 * 86_400))
        }
    }

    @Test(
        "A renewal Apple has not posted yet keeps the customer active and is checked again within the hour",
        arguments: Backend.available)
    func lateRenewalDoesNotLockOut(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let receipt = h.receipt("late", .renewal, daysAgo: 29.9)
            try await h.importReceipts([("late", receipt)])
            _ = try await h.run()
            let expiry = receipt.start.addingTimeInterval(30 * 86_400)
            #expect(try await h.status().first?.expiresAt == expiry)

            // When Apple still shows the old period just after it ended (auto-renew on, no intent, no retry)
            h.state.script(account: "late", .json(try Self.answer(receipt, at: expiry.addingTimeInterval(-60))))
            h.state.set(expiry.addingTimeInterval(5 * 60))
            let pending = try await h.run()

            // Then nothing changes and the next check is within the hour
            #expect(pending.counts.changed == 0)
            let row = try #require(try await h.status().first)
            #expect(row.state == .active && row.entitled)
            let next = try #require(row.nextCheckAt)
            #expect(next > h.state.now && next <= h.state.now.addingTimeInterval(3600))

            // When the renewal is posted, the next check reports it
            h.state.script(account: "late", nil)
            h.state.set(next)
            let renewed = try await h.run()
            #expect(try await Self.changes(h, run: renewed).map(\.event.kind) == [.renewed])

            // And the wait is bounded: a renewal that never comes expires after the window
            let other = h.receipt("never", .renewal, daysAgo: 29.9)
            try await h.importReceipts([("never", other)])
            h.state.set(other.start.addingTimeInterval(29.95 * 86_400))
            _ = try await h.run()
            let otherExpiry = other.start.addingTimeInterval(30 * 86_400)
            h.state.script(account: "never", .json(try Self.answer(other, at: otherExpiry.addingTimeInterval(-60))))
            h.state.set(otherExpiry.addingTimeInterval(25 * 3600))
            let lapsed = try await h.run(.backfill(BackfillSelector(userIDs: ["never"])))
            #expect(try await Self.changes(h, run: lapsed).map(\.event.kind) == [.expired])
            #expect(try await h.status(user: "never").first?.entitled == false)
        }
    }

    @Test(
        """
        Odd types in unused fields change nothing; an unreadable used field fails that receipt, naming the field, \
        not as an outage
        """,
        arguments: Backend.available)
    func oddFieldsAreTolerated(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let odd = (0..<25).map { "odd-\($0)" }
            let broken = (0..<25).map { "broken-\($0)" }
            try await h.importReceipts((odd + broken).map { ($0, h.receipt($0, .renewal)) })
            for account in odd {
                var answer = Self.editingRows(try Self.answer(h.receipt(account, .renewal), at: h.state.now)) { row in
                    row["quantity"] = ["value": 1]
                    row["original_purchase_date_ms"] = NSNull()
                    row["web_order_line_item_id"] = ["x"]
                }
                var receipt = answer["receipt"] as? [String: Any] ?? [:]
                receipt["application_version"] = 1.5
                receipt["download_id"] = "not-a-number"
                answer["receipt"] = receipt
                h.state.script(account: account, .json(answer))
            }
            for account in broken {
                let answer = Self.editingRows(try Self.answer(h.receipt(account, .renewal), at: h.state.now)) { row in
                    row["expires_date_ms"] = ["when": "soon"]
                }
                h.state.script(account: account, .json(answer))
            }

            let outcome = try await h.run { $0.circuitBreaker = .init(threshold: 5) }

            // The breaker never opened: none of these is Apple being down
            #expect(outcome.status == .completedWithFailures)
            #expect(outcome.counts.checked == 50)
            let rows = try await h.status()
            #expect(rows.filter { $0.userID.hasPrefix("odd-") }.allSatisfy { $0.state == .active && $0.entitled })
            #expect(rows.filter { $0.userID.hasPrefix("broken-") }.allSatisfy { $0.state == .unverified })
            let failures = try await Self.failures(h, run: outcome)
            #expect(failures.count == 25)
            #expect(failures.allSatisfy { $0.failure.reason == "unreadable_answer" })
            #expect(failures.allSatisfy { $0.failure.message.contains("latest_receipt_info[0].expires_date_ms") })
        }
    }

    @Test(
        "An answer for another app's bundle, or only for unknown products, changes nothing",
        arguments: Backend.available)
    func otherBundleAndUnknownProducts(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([
                ("other-app", h.receipt("other-app", .renewal)), ("ours", h.receipt("ours", .renewal)),
            ])
            var answer = try Self.answer(h.receipt("other-app", .renewal), at: h.state.now)
            answer["receipt"] = ["bundle_id": "com.example.otherapp", "receipt_type": "Production"]
            h.state.script(account: "other-app", .json(answer))

            let outcome = try await h.run {
                $0.identity = AppIdentity(bundleID: SimulatedReceipt.bundleID)
                $0.reportPath = h.directory + "/bundle.json"
            }

            #expect(try await h.status(user: "other-app").first?.state == .unverified)
            #expect(try await h.status(user: "other-app").first?.entitled == false)
            #expect(try await h.status(user: "ours").first?.state == .active)
            let failure = try #require(try await Self.failures(h, run: outcome).first)
            #expect(failure.userID == "other-app")
            #expect(failure.failure.reason == "wrong_bundle")
            #expect(failure.failure.message.contains("com.example.otherapp"))
            let report = try h.report(outcome)
            #expect((report["failures"] as? [[String: Any]])?.first?["reason"] as? String == "wrong_bundle")

            // Only products the app does not sell: nothing changes either
            try await h.importReceipts([("stranger", h.receipt("stranger", .renewal))])
            let products = try await h.run { $0.identity = AppIdentity(productIDs: ["com.example.pro.yearly"]) }
            #expect(try await h.status(user: "stranger").first?.state == .unverified)
            #expect(try await Self.failures(h, run: products).map(\.failure.reason).contains("unknown_products"))
        }
    }

    @Test(
        """
        A new purchase after a refund is resubscribed; only the same transaction losing its cancellation is \
        refund_reversed
        """,
        arguments: Backend.available)
    func resubscribeIsNotRefundReversed(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let receipt = h.receipt("r", .renewal, daysAgo: 10)
            try await h.importReceipts([("again", receipt), ("reversed", h.receipt("r2", .renewal, daysAgo: 10))])
            let refundedAt = h.state.now.addingTimeInterval(-86_400)
            for account in ["r", "r2"] {
                let answer = Self.editingRows(
                    try Self.answer(h.receipt(account, .renewal, daysAgo: 10), at: h.state.now)
                ) { row in
                    row["cancellation_date_ms"] = String(AppleDateFormat.milliseconds(refundedAt))
                }
                h.state.script(account: account, .json(answer))
            }
            _ = try await h.run()
            #expect(try await h.status().allSatisfy { $0.state == .revoked })

            // When "again" buys a new period (a new transaction) and "reversed" gets its refund taken back
            h.state.advance(by: 2 * 86_400)
            let fresh = Self.editingRows(try Self.answer(receipt, at: h.state.now)) { row in
                row["transaction_id"] = "900000000000001"
                row["purchase_date_ms"] = String(AppleDateFormat.milliseconds(h.state.now))
                row["expires_date_ms"] = String(
                    AppleDateFormat.milliseconds(h.state.now.addingTimeInterval(30 * 86_400)))
            }
            h.state.script(account: "r", .json(fresh))
            h.state.script(account: "r2", nil)
            let outcome = try await h.run(.backfill(BackfillSelector(all: true)))

            let kinds = Dictionary(grouping: try await Self.changes(h, run: outcome), by: \.userID).mapValues {
                $0.map(\.event.kind)
            }
            #expect(kinds["again"] == [.resubscribed])
            #expect(kinds["reversed"] == [.refundReversed])
            #expect(try await h.status().allSatisfy { $0.state == .active && $0.entitled })
        }
    }

    @Test(
        "A receipt holding no auto-renewable subscription is recorded once, not as a failure, and shown in status",
        arguments: Backend.available)
    func receiptWithoutSubscription(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let coins = h.receipt("coins", .renewal)
            try await h.importReceipts([("coins", coins)])
            let purchase: [String: Any] = [
                "product_id": "com.example.coins.100", "transaction_id": "500000000000001",
                "original_transaction_id": "500000000000001", "quantity": "1",
                "purchase_date_ms": String(AppleDateFormat.milliseconds(h.state.now)),
            ]
            h.state.script(
                account: "coins",
                .json([
                    "status": 0, "environment": "Production", "latest_receipt": coins.encoded,
                    "receipt": ["bundle_id": SimulatedReceipt.bundleID, "in_app": [purchase]],
                    "latest_receipt_info": [purchase],
                ]))

            let first = try await h.run()
            #expect(first.status == .completed)
            #expect(first.status.exitCode == 0)
            #expect(first.counts.failed == 0)
            #expect(try await Self.changes(h, run: first).map(\.event.kind) == [.noSubscription])
            let row = try #require(try await h.status().first)
            #expect(row.state == .noSubscription)
            #expect(!row.entitled)
            #expect(try #require(row.nextCheckAt) >= h.state.now.addingTimeInterval(29 * 86_400))

            // A later check records nothing new and does not fail
            let again = try await h.run(.backfill(BackfillSelector(all: true)))
            #expect(again.status == .completed)
            #expect(try await Self.changes(h, run: again).isEmpty)
            #expect(try await h.status().first?.state == .noSubscription)
        }
    }

    @Test(
        """
        a subscriber who churned is expired, not 'no subscription', when only in_app and pending_renewal_info \
        show the subscription
        """,
        arguments: Backend.available)
    func churnedSubscriberInReceiptOnly(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let churned = h.receipt("churned", .renewal)
            try await h.importReceipts([("churned", churned)])
            let now = h.state.now
            func row(_ product: String, _ transaction: String, _ original: String, purchased: Double, expires: Double?)
                -> [String: Any]
            {
                var row: [String: Any] = [
                    "quantity": "1", "product_id": product, "transaction_id": transaction,
                    "original_transaction_id": original,
                    "purchase_date_ms": String(
                        AppleDateFormat.milliseconds(now.addingTimeInterval(purchased * 86_400))),
                ]
                if let expires {
                    row["expires_date_ms"] = String(
                        AppleDateFormat.milliseconds(now.addingTimeInterval(expires * 86_400)))
                }
                return row
            }
            // Given a sandbox answer whose latest transactions hold only a non-consumable, while the
            // subscription (last period ended 10 days ago, auto-renew off, intent 1) is in in_app and
            // pending_renewal_info only
            let lifetime = row(
                "com.example.lifetime", "600000000000009", "600000000000009", purchased: -90, expires: nil)
            h.state.script(
                account: "churned",
                .json([
                    "status": 0, "environment": "Sandbox", "latest_receipt": churned.encoded,
                    "receipt": [
                        "bundle_id": SimulatedReceipt.bundleID, "receipt_type": "ProductionSandbox",
                        "in_app": [
                            lifetime,
                            row(
                                "com.example.pro.monthly", "600000000000001", "600000000000001", purchased: -70,
                                expires: -40),
                            row(
                                "com.example.pro.monthly", "600000000000002", "600000000000001", purchased: -40,
                                expires: -10),
                        ],
                    ],
                    "latest_receipt_info": [lifetime],
                    "pending_renewal_info": [
                        [
                            "original_transaction_id": "600000000000001", "product_id": "com.example.pro.monthly",
                            "auto_renew_product_id": "com.example.pro.monthly", "auto_renew_status": "0",
                            "expiration_intent": "1",
                        ]
                    ],
                ]))

            // When the job checks it
            let first = try await h.run()

            // Then it is a churned subscriber: expired, not entitled, auto-renew off, with its real expiry
            #expect(first.status == .completed)
            #expect(first.counts.failed == 0)
            let changes = try await Self.changes(h, run: first)
            #expect(changes.map(\.event.kind) == [.verified])
            #expect(changes.first?.event.toState == .expired)
            #expect(changes.first?.event.originalTransactionID == "600000000000001")
            let status = try await h.status()
            #expect(status.count == 1)
            let subscription = try #require(status.first)
            #expect(subscription.state == .expired)
            #expect(!subscription.entitled)
            #expect(subscription.autoRenew == false)
            #expect(subscription.originalTransactionID == "600000000000001")
            #expect(subscription.productID == "com.example.pro.monthly")
            #expect(subscription.environment == .sandbox)
            let expiry = AppleDateFormat.milliseconds(now.addingTimeInterval(-10 * 86_400))
            #expect(subscription.expiresAt.map(AppleDateFormat.milliseconds) == expiry)

            // When a later answer shows only an older period in in_app (a stale receipt), the expiry
            // known does not move back
            h.state.advance(by: 86_400)
            h.state.script(
                account: "churned",
                .json([
                    "status": 0, "environment": "Sandbox", "latest_receipt": churned.encoded,
                    "receipt": [
                        "bundle_id": SimulatedReceipt.bundleID,
                        "in_app": [
                            lifetime,
                            row(
                                "com.example.pro.monthly", "600000000000001", "600000000000001", purchased: -70,
                                expires: -40),
                        ],
                    ],
                    "latest_receipt_info": [lifetime],
                ]))
            let second = try await h.run(.backfill(BackfillSelector(all: true)))
            #expect(second.status == .completed)
            #expect(try await Self.changes(h, run: second).isEmpty)
            #expect(try await h.status().first?.expiresAt.map(AppleDateFormat.milliseconds) == expiry)
        }
    }

    @Test(
        """
        renewal info that no transaction in the answer shows (Apple's placeholder ids) creates no subscription: \
        the receipt holds none
        """,
        arguments: Backend.available)
    func renewalInfoAloneCreatesNothing(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let receipt = h.receipt("placeholder", .renewal)
            try await h.importReceipts([("placeholder", receipt)])
            // Given a valid answer with no transaction at all, and renewal info under placeholder ids
            h.state.script(
                account: "placeholder",
                .json([
                    "status": 0, "environment": "Sandbox", "latest_receipt": receipt.encoded,
                    "receipt": ["bundle_id": SimulatedReceipt.bundleID, "in_app": [] as [Any]],
                    "latest_receipt_info": [] as [Any],
                    "pending_renewal_info": [
                        [
                            "original_transaction_id": "original_transaction_id_value",
                            "product_id": "Test_Subscription", "auto_renew_product_id": "Test_Subscription",
                            "auto_renew_status": "1",
                        ]
                    ],
                ]))

            // When the job checks it
            let outcome = try await h.run()

            // Then no subscription is made from the renewal info: the receipt holds none
            #expect(outcome.status == .completed)
            let changes = try await Self.changes(h, run: outcome)
            #expect(changes.map(\.event.kind) == [.noSubscription])
            #expect(!changes.contains { $0.event.originalTransactionID == "original_transaction_id_value" })
            let status = try await h.status()
            #expect(status.count == 1)
            #expect(status.first?.state == .noSubscription)
            #expect(status.first?.originalTransactionID == nil)
        }
    }
}
