import AppStoreSimulator
import Foundation
@testable import RenewalAppStore
@testable import RenewalAppleAPI
import RenewalCore
import Testing

@Suite("AppStoreSimulator timelines and control routes, through the client")
struct AppStoreSimulatorTests {
    let day = TestSupport.day
    let period = TestSupport.period

    /// Verifies `scenario`'s receipt with the clock `offset` seconds after the receipt's start.
    func answer(_ scenario: Scenario, at offset: TimeInterval) async throws -> VerifyReceiptResponse {
        try await TestSupport.withSimulatorAndClient { state, _, client in
            let receipt = TestSupport.receipt(scenario)
            state.set(receipt.start.addingTimeInterval(offset))
            return try #require(await client.wireAnswer(receipt: receipt.encoded), "\(scenario) gave no Apple answer")
        }
    }

    @Test("A receipt survives its encoded form, and garbage does not decode")
    func receiptRoundTrip() {
        let receipt = TestSupport.receipt(.upgrade)
        #expect(SimulatedReceipt(encoded: receipt.encoded) == receipt)
        #expect(SimulatedReceipt(encoded: "MIIT...not-ours") == nil)
        #expect(receipt.encoded == TestSupport.receipt(.upgrade).encoded)
    }

    @Test("Renewal: each period has its own transaction id and the same original id")
    func renewalPeriods() async throws {
        let first = try await answer(.renewal, at: 0.5 * period)
        let third = try await answer(.renewal, at: 2.5 * period)
        let row1 = try #require(first.latestReceiptInfo.first)
        let row3 = try #require(third.latestReceiptInfo.first)
        #expect(row1.originalTransactionID == row3.originalTransactionID)
        #expect(row1.transactionID == row1.originalTransactionID)
        #expect(row1.transactionID != row3.transactionID)
        #expect(row1.originalTransactionID?.count == 15)
        #expect(row3.expiresDate == TestSupport.receipt(.renewal).start.addingTimeInterval(3 * period))
        #expect(third.pendingRenewalInfo.first?.autoRenewStatus == true)
        #expect(third.latestReceipt.flatMap(SimulatedReceipt.init(encoded:))?.generation == 2)
    }

    @Test("Voluntary expiry: auto-renew off, then expiration intent 1")
    func voluntaryExpiry() async throws {
        let before = try await answer(.voluntaryExpiry, at: 0.5 * period)
        let after = try await answer(.voluntaryExpiry, at: 1.2 * period)
        #expect(before.pendingRenewalInfo.first?.autoRenewStatus == false)
        #expect(before.pendingRenewalInfo.first?.expirationIntent == nil)
        #expect(after.pendingRenewalInfo.first?.expirationIntent == "1")
    }

    @Test("Billing retry and grace period: retry flag for 60 days, grace end at 16 days")
    func billingRetryAndGrace() async throws {
        let start = TestSupport.receipt(.gracePeriod).start
        let retrying = try await answer(.billingRetry, at: period + 5 * day)
        let givenUp = try await answer(.billingRetry, at: period + 61 * day)
        let grace = try await answer(.gracePeriod, at: period + 5 * day)
        #expect(retrying.pendingRenewalInfo.first?.isInBillingRetryPeriod == true)
        #expect(retrying.pendingRenewalInfo.first?.expirationIntent == "2")
        #expect(retrying.pendingRenewalInfo.first?.gracePeriodExpiresDate == nil)
        #expect(givenUp.pendingRenewalInfo.first?.isInBillingRetryPeriod == false)
        #expect(grace.pendingRenewalInfo.first?.gracePeriodExpiresDate == start.addingTimeInterval(period + 16 * day))
    }

    @Test("Billing recovery: a new period starts when payment is collected")
    func billingRecovery() async throws {
        let start = TestSupport.receipt(.billingRecovery).start
        let recovered = try await answer(.billingRecovery, at: period + 4 * day)
        let row = try #require(recovered.latestReceiptInfo.first)
        #expect(row.purchaseDate == start.addingTimeInterval(period + 3 * day))
        #expect(row.expiresDate == start.addingTimeInterval(2 * period + 3 * day))
        #expect(recovered.pendingRenewalInfo.first?.isInBillingRetryPeriod == nil)
    }

    @Test("Refund: the period containing s+1.5p is cancelled and auto-renew is off")
    func refund() async throws {
        let start = TestSupport.receipt(.refund).start
        let refunded = try await answer(.refund, at: 1.6 * period)
        let row = try #require(refunded.latestReceiptInfo.first)
        #expect(row.cancellationDate == start.addingTimeInterval(1.5 * period))
        #expect(row.expiresDate == start.addingTimeInterval(2 * period))
        #expect(refunded.pendingRenewalInfo.first?.autoRenewStatus == false)
    }

    @Test("Upgrade: the old row is upgraded and the premium row shares the original id")
    func upgrade() async throws {
        let upgraded = try await answer(.upgrade, at: 1.6 * period)
        #expect(upgraded.latestReceiptInfo.count == 2)
        let old = try #require(upgraded.latestReceiptInfo.first { $0.isUpgraded == true })
        let new = try #require(upgraded.latestReceiptInfo.first { $0.isUpgraded != true })
        #expect(old.productID == "com.example.pro.monthly")
        #expect(new.productID == "com.example.pro.monthly.premium")
        #expect(old.originalTransactionID == new.originalTransactionID)
        #expect(old.cancellationDate == new.purchaseDate)
        #expect(upgraded.pendingRenewalInfo.first?.productID == "com.example.pro.monthly.premium")
    }

    @Test("Family sharing, trial and two subscription groups show in the rows")
    func ownershipTrialAndGroups() async throws {
        let family = try await answer(.familyShared, at: 1)
        let trial = try await answer(.trial, at: 1)
        let trialLater = try await answer(.trial, at: 1.5 * period)
        let multiple = try await answer(.multipleSubscriptions, at: 1.5 * period)
        #expect(family.latestReceiptInfo.first?.inAppOwnershipType == "FAMILY_SHARED")
        #expect(trial.latestReceiptInfo.first?.isTrialPeriod == true)
        #expect(trialLater.latestReceiptInfo.first?.isTrialPeriod == false)
        #expect(Set(multiple.latestReceiptInfo.compactMap(\.originalTransactionID)).count == 2)
        let addon = try #require(multiple.pendingRenewalInfo.first { $0.productID == "com.example.pro.monthly.addon" })
        #expect(addon.autoRenewStatus == false)
        #expect(addon.expirationIntent == "1")
    }

    @Test("iOS 6 shape: one object, numeric auto-renew, then 21006 with the expired row")
    func legacy() async throws {
        let start = TestSupport.receipt(.legacyIOS6).start
        let active = try await answer(.legacyIOS6, at: 0.5 * period)
        let expired = try await answer(.legacyIOS6, at: 1.5 * period)
        #expect(active.status == .valid)
        #expect(active.autoRenewStatus == false)
        #expect(active.latestReceiptInfo.first?.expiresDate == start.addingTimeInterval(period))
        #expect(expired.status == .validButExpired)
        #expect(expired.latestReceiptInfo.isEmpty)
        #expect(expired.latestExpiredReceiptInfo?.expiresDate == start.addingTimeInterval(period))
    }

    @Test("Advancing the clock through the control route renews and bumps latest_receipt")
    func clockRoute() async throws {
        try await TestSupport.withSimulatorAndClient { state, endpoints, client in
            let receipt = TestSupport.receipt(.renewal)
            let before = try #require(await client.wireAnswer(receipt: receipt.encoded))
            #expect(before.latestReceipt == receipt.encoded)

            let clock = try await TestSupport.control(endpoints, "/clock", post: #"{"advance_seconds": 2678400}"#)
            #expect(clock.status == 200)
            #expect(
                (clock.body["now_ms"] as? Int64).map { $0 } ?? (clock.body["now_ms"] as? Int).map(Int64.init)
                    == AppleDateFormat.milliseconds(TestSupport.now.addingTimeInterval(31 * day)))
            #expect(state.now == TestSupport.now.addingTimeInterval(31 * day))

            let after = try #require(await client.wireAnswer(receipt: receipt.encoded))
            let newer = try #require(after.latestReceipt)
            #expect(newer != receipt.encoded)
            #expect(SimulatedReceipt(encoded: newer)?.generation == 1)

            // The job would now send the newer receipt; the simulator shows what it received.
            _ = await client.verify(receipt: newer, logger: TestSupport.quiet)
            let received = try await TestSupport.control(endpoints, "/received/\(receipt.account)")
            #expect(received.status == 200)
            #expect(received.body["receipt_data"] as? String == newer)
            #expect(try await TestSupport.control(endpoints, "/received/nobody").status == 404)

            let set = try await TestSupport.control(endpoints, "/clock", post: #"{"now_ms": 1700000000000}"#)
            #expect(set.status == 200)
            #expect(state.now == TestSupport.now)
        }
    }

    @Test("The fault and stats routes drive and report the simulator")
    func faultAndStatsRoutes() async throws {
        try await TestSupport.withSimulatorAndClient(adjust: { $0.maxAttempts = 1 }) { state, endpoints, client in
            let receipt = TestSupport.receipt(.renewal).encoded
            #expect(try await TestSupport.control(endpoints, "/fault", post: #"{"mode": "html_200"}"#).status == 200)
            #expect(state.fault == .html200)
            #expect(await client.verify(receipt: receipt, logger: TestSupport.quiet).failure?.isOutage == true)
            #expect(try await TestSupport.control(endpoints, "/fault", post: #"{"mode": "bogus"}"#).status == 400)
            #expect(try await TestSupport.control(endpoints, "/fault", post: #"{"mode": "none"}"#).status == 200)
            #expect(await client.verify(receipt: receipt, logger: TestSupport.quiet).evidence != nil)
            _ = await client.verify(receipt: TestSupport.receipt(.sandbox).encoded, logger: TestSupport.quiet)

            let stats = try await TestSupport.control(endpoints, "/stats")
            #expect(stats.body["requests"] as? Int == 4)
            #expect(stats.body["production"] as? Int == 3)
            #expect(stats.body["sandbox"] as? Int == 1)
        }
    }
}
