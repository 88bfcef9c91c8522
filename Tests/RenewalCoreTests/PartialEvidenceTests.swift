import Foundation
import Testing

@testable import RenewalCore

/// Subscriptions `latest_receipt_info` does not list, read from the receipt's `in_app` rows; renewal info
/// that no transaction backs. The answers are built from Apple's documented fields, in the shape a real
/// sandbox answer had: `latest_receipt_info` lists only a non-consumable, while the subscription
/// (its last period over, auto-renew off, expiration intent 1) shows in `in_app` and
/// `pending_renewal_info` only.
@Suite("Partial evidence: a subscription only in_app shows is still a subscription; renewal info alone is none")
struct PartialEvidenceTests {
    static let subscriptionID = "2000000000000010"
    static let firstPeriod = Clock.at(-90 * Clock.day)
    /// End of the last period `in_app` shows: 30 days before `Clock.now`.
    static let lastExpiry = Clock.at(-30 * Clock.day)

    static func row(product: String, transaction: String, original: String, purchased: Date, expires: Date?) -> [String:
        Any]
    {
        var row: [String: Any] = [
            "quantity": "1", "product_id": product, "transaction_id": transaction, "original_transaction_id": original,
            "purchase_date_ms": String(Clock.ms(purchased)), "is_trial_period": "false",
        ]
        if let expires { row["expires_date_ms"] = String(Clock.ms(expires)) }
        return row
    }

    static var lifetime: [String: Any] {
        row(
            product: "com.example.app.lifetime", transaction: "2000000000000001", original: "2000000000000001",
            purchased: Clock.at(-200 * Clock.day), expires: nil)
    }

    /// The subscription's two periods as `in_app` lists them, the later one first.
    static var subscriptionRows: [[String: Any]] {
        [
            row(
                product: "com.example.pro.monthly", transaction: "2000000000000011", original: subscriptionID,
                purchased: firstPeriod.addingTimeInterval(30 * Clock.day), expires: lastExpiry),
            row(
                product: "com.example.pro.monthly", transaction: subscriptionID, original: subscriptionID,
                purchased: firstPeriod, expires: firstPeriod.addingTimeInterval(30 * Clock.day)),
        ]
    }

    static var churnedRenewal: [String: Any] {
        [
            "original_transaction_id": subscriptionID, "product_id": "com.example.pro.monthly",
            "auto_renew_product_id": "com.example.pro.monthly", "auto_renew_status": "0", "expiration_intent": "1",
            "is_in_billing_retry_period": "0",
        ]
    }

    static func answer(inApp: [[String: Any]], latest: [[String: Any]], pending: [[String: Any]]) throws
        -> AppleEvidence
    {
        let object: [String: Any] = [
            "status": 0, "environment": "Sandbox", "latest_receipt": "MIIBexampleonly",
            "receipt": ["receipt_type": "ProductionSandbox", "bundle_id": "com.example.app", "in_app": inApp],
            "latest_receipt_info": latest, "pending_renewal_info": pending,
        ]
        let response = try VerifyReceiptResponse(json: JSONSerialization.data(withJSONObject: object))
        return AppleEvidence(verifyReceipt: response, answeredBy: .sandbox)
    }

    @Test(
        """
        a subscriber who churned, shown only by in_app and pending_renewal_info, is expired with its real expiry, \
        not 'no subscription'
        """
    )
    func churnedSubscriberInReceiptOnly() throws {
        let evidence = try Self.answer(
            inApp: [Self.lifetime] + Self.subscriptionRows, latest: [Self.lifetime], pending: [Self.churnedRenewal])

        let subscription = try #require(evidence.subscriptions.first)
        #expect(evidence.subscriptions.count == 1)
        #expect(evidence.otherPurchases == 1)
        #expect(subscription.originalTransactionID == Self.subscriptionID)
        #expect(subscription.basis == .receiptTransactions)
        #expect(subscription.productID == "com.example.pro.monthly")
        #expect(subscription.expiresAt == Self.lastExpiry)
        #expect(subscription.latestTransactionID == "2000000000000011")
        #expect(subscription.autoRenew == false)
        #expect(subscription.expirationIntent == "1")
        #expect(evidence.lookupTransactionID == Self.subscriptionID)

        let snapshot = SubscriptionSnapshot(evidence: subscription, now: Clock.now)
        #expect(snapshot.state == .expired)
        #expect(!snapshot.entitled)
        #expect(snapshot.autoRenew == false)
        #expect(snapshot.environment == .sandbox)
        #expect(SubscriptionEvent.events(from: nil, to: snapshot).map(\.toState) == [.expired])
    }

    @Test("in_app alone grants access up to the expiry it states, and no further")
    func receiptRowsGrantOnlyTheirPeriod() throws {
        let current = Self.row(
            product: "com.example.pro.monthly", transaction: "2000000000000012", original: Self.subscriptionID,
            purchased: Clock.at(-10 * Clock.day), expires: Clock.at(20 * Clock.day))
        var renewing = Self.churnedRenewal
        renewing["auto_renew_status"] = "1"
        renewing["expiration_intent"] = nil
        let evidence = try Self.answer(inApp: [Self.lifetime, current], latest: [Self.lifetime], pending: [renewing])
        let subscription = try #require(evidence.subscriptions.first)
        #expect(SubscriptionSnapshot(evidence: subscription, now: Clock.now).state == .active)
        #expect(SubscriptionSnapshot(evidence: subscription, now: Clock.at(21 * Clock.day)).state == .expired)
    }

    @Test(
        """
        renewal info alone is no evidence of a purchase: a pending_renewal_info entry no transaction in the answer \
        shows creates no subscription, and is named for the debug log
        """
    )
    func renewalInfoOnlyIsNoSubscription() throws {
        let evidence = try Self.answer(inApp: [Self.lifetime], latest: [Self.lifetime], pending: [Self.churnedRenewal])
        #expect(evidence.subscriptions.isEmpty)
        #expect(evidence.otherPurchases == 1)
        #expect(evidence.unmatchedRenewalInfo == [Self.subscriptionID])

        // In billing retry with a grace period: still nothing without a transaction to show a purchase.
        var retrying = Self.churnedRenewal
        retrying["expiration_intent"] = "2"
        retrying["is_in_billing_retry_period"] = "1"
        retrying["grace_period_expires_date_ms"] = String(Clock.ms(Clock.at(5 * Clock.day)))
        #expect(try Self.answer(inApp: [], latest: [Self.lifetime], pending: [retrying]).subscriptions.isEmpty)

        // Apple's documented example: placeholder ids that no transaction carries.
        let placeholder: [String: Any] = [
            "original_transaction_id": "original_transaction_id_value", "product_id": "Test_Subscription",
            "auto_renew_product_id": "Test_Subscription", "auto_renew_status": "1",
        ]
        let documented = try Self.answer(inApp: [], latest: [], pending: [placeholder])
        #expect(documented.subscriptions.isEmpty)
        #expect(documented.unmatchedRenewalInfo == ["original_transaction_id_value"])
        #expect(documented.lookupTransactionID == nil)
    }

    @Test(
        """
        the latest transactions win: in_app rows of a listed subscription add nothing, and renewal info under an \
        id that does not line up adds no second subscription
        """
    )
    func latestTransactionsWin() throws {
        let latest = Self.row(
            product: "com.example.pro.monthly", transaction: "2000000000000013", original: Self.subscriptionID,
            purchased: Clock.at(-5 * Clock.day), expires: Clock.at(25 * Clock.day))
        var misnamed = Self.churnedRenewal
        misnamed["original_transaction_id"] = "9999999999999999"
        misnamed["auto_renew_status"] = "1"
        misnamed["expiration_intent"] = nil
        let evidence = try Self.answer(inApp: Self.subscriptionRows, latest: [latest], pending: [misnamed])
        let subscription = try #require(evidence.subscriptions.first)
        #expect(evidence.subscriptions.count == 1)
        #expect(subscription.basis == .latestTransactions)
        #expect(subscription.expiresAt == Clock.at(25 * Clock.day))
        #expect(subscription.autoRenew == true, "the renewal info is matched by product")
    }

    @Test("in_app is read only when the latest transactions miss a subscription")
    func inAppReadOnlyWhenNeeded() throws {
        let latest = Self.row(
            product: "com.example.pro.monthly", transaction: "2000000000000013", original: Self.subscriptionID,
            purchased: Clock.at(-5 * Clock.day), expires: Clock.at(25 * Clock.day))
        func response(latest: [[String: Any]], pending: [[String: Any]]) throws -> VerifyReceiptResponse {
            let object: [String: Any] = [
                "status": 0, "receipt": ["bundle_id": "com.example.app", "in_app": Self.subscriptionRows],
                "latest_receipt_info": latest, "pending_renewal_info": pending,
            ]
            return try VerifyReceiptResponse(json: JSONSerialization.data(withJSONObject: object))
        }
        #expect(try response(latest: [latest], pending: [Self.churnedRenewal]).receipt?.inApp.isEmpty == true)
        #expect(try response(latest: [Self.lifetime], pending: []).receipt?.inApp.count == 2)
        var other = Self.churnedRenewal
        other["original_transaction_id"] = "2000000000000099"
        #expect(try response(latest: [latest], pending: [Self.churnedRenewal, other]).receipt?.inApp.count == 2)
    }
}
