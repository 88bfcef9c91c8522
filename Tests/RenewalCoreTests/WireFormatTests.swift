import Foundation
import Testing

@testable import RenewalCore

/// The shapes Apple sends beyond the common case: iOS 6 answers, numbers instead of strings,
/// both spellings of the retry flag, unknown codes and fields, and broken values.
@Suite struct WireFormatTests {
    let now = Clock.now

    // MARK: iOS 6-style transaction receipts

    /// An iOS 6-style answer for an active subscription: `latest_receipt_info` is one object whose
    /// `expires_date` holds milliseconds, and `auto_renew_status` is a top-level number.
    static let ios6Active = """
        {
          "status": 0,
          "auto_renew_status": 1,
          "latest_receipt": "ewoJInNpZ25hdHVyZSIgPSAiQXBNVUJDODZBbHpOaWtWNVl0clpBTWlKUWJLOEVkZVhrNjNrV0JBWHpsQzhkWGd1anZMSWxrYUZBZQ==",
          "receipt": {
            "original_purchase_date_pst": "2023-11-01 06:00:00 America/Los_Angeles",
            "original_transaction_id": "1000000046178817",
            "original_purchase_date_ms": "1698843600000",
            "transaction_id": "1000000046178817",
            "quantity": "1",
            "product_id": "com.example.monthly",
            "bvrs": "1.0",
            "bid": "com.example.app",
            "expires_date": "1701435600000",
            "expires_date_formatted": "2023-12-01 13:00:00 Etc/GMT",
            "purchase_date_ms": "1698843600000",
            "purchase_date": "2023-11-01 13:00:00 Etc/GMT",
            "item_id": "521129812"
          },
          "latest_receipt_info": {
            "original_purchase_date_pst": "2023-11-01 06:00:00 America/Los_Angeles",
            "original_transaction_id": "1000000046178817",
            "original_purchase_date_ms": "1698843600000",
            "transaction_id": "1000000046178999",
            "quantity": "1",
            "product_id": "com.example.monthly",
            "bvrs": "1.0",
            "bid": "com.example.app",
            "web_order_line_item_id": "1000000026812043",
            "expires_date": "1701435600000",
            "expires_date_formatted": "2023-12-01 13:00:00 Etc/GMT",
            "expires_date_formatted_pst": "2023-12-01 05:00:00 America/Los_Angeles",
            "purchase_date_ms": "1698843600000",
            "purchase_date": "2023-11-01 13:00:00 Etc/GMT",
            "item_id": "521129812",
            "unique_vendor_identifier": "00000000-0000-0000-0000-000000000000"
          }
        }
        """

    /// An iOS 6-style answer for a lapsed subscription: status 21006, `latest_expired_receipt_info`.
    static let ios6Expired = """
        {
          "status": 21006,
          "auto_renew_status": 0,
          "receipt": {
            "original_transaction_id": "1000000046178817",
            "transaction_id": "1000000046178817",
            "product_id": "com.example.monthly",
            "bid": "com.example.app",
            "expires_date": "1696165200000",
            "purchase_date_ms": "1693573200000"
          },
          "latest_expired_receipt_info": {
            "original_transaction_id": "1000000046178817",
            "transaction_id": "1000000046178900",
            "quantity": "1",
            "product_id": "com.example.monthly",
            "bid": "com.example.app",
            "expires_date": "1696165200000",
            "expires_date_formatted": "2023-10-01 13:00:00 Etc/GMT",
            "purchase_date_ms": "1693573200000",
            "purchase_date": "2023-09-01 13:00:00 Etc/GMT"
          }
        }
        """

    @Test("An iOS 6 answer with a single-object latest_receipt_info and numeric auto_renew_status decodes")
    func ios6ActiveDecodes() throws {
        let response = try decodeAnswer(Self.ios6Active)

        #expect(response.status == .valid)
        #expect(response.environment == nil)
        #expect(response.autoRenewStatus == true)
        #expect(response.latestReceiptInfo.count == 1)
        #expect(response.pendingRenewalInfo.isEmpty)
        let row = try #require(response.latestReceiptInfo.first)
        #expect(row.transactionID == "1000000046178999")
        #expect(row.expiresDate == Clock.date(ms: 1_701_435_600_000))
        #expect(row.expiresDate == AppleDateFormat.date(gmt: "2023-12-01 13:00:00 Etc/GMT"))
        #expect(row.purchaseDate == Clock.date(ms: 1_698_843_600_000))
        #expect(response.receipt?.bundleID == "com.example.app")
        #expect(response.receipt?.inApp.isEmpty == true)
    }

    @Test("An iOS 6 subscription takes auto-renew from the top level and its expiry from expires_date")
    func ios6ActiveDerives() throws {
        let subscription = try deriveOne(Self.ios6Active, now: now, answeredBy: .production)

        #expect(subscription.originalTransactionID == "1000000046178817")
        #expect(subscription.latestTransactionID == "1000000046178999")
        #expect(subscription.state == .active)
        #expect(subscription.autoRenew == true)
        #expect(subscription.expiresAt == Clock.date(ms: 1_701_435_600_000))
        #expect(subscription.environment == .production)
    }

    @Test("Status 21006 is valid, and latest_expired_receipt_info gives an expired subscription")
    func ios6Expired() throws {
        let response = try decodeAnswer(Self.ios6Expired)

        #expect(response.status == .validButExpired)
        #expect(response.status.disposition(isRetryableFlag: nil) == .valid)
        #expect(response.latestReceiptInfo.isEmpty)
        let expiredRow = try #require(response.latestExpiredReceiptInfo)
        #expect(expiredRow.expiresDate == Clock.date(ms: 1_696_165_200_000))
        #expect(response.autoRenewStatus == false)

        let subscription = try deriveOne(Self.ios6Expired, now: now, answeredBy: .sandbox)

        #expect(subscription.state == .expired)
        #expect(subscription.autoRenew == false)
        #expect(subscription.latestTransactionID == "1000000046178900")
        #expect(subscription.environment == .sandbox)
    }

    @Test("When both iOS 6 objects are present the later expiry is current")
    func ios6BothObjects() throws {
        var response = try decodeAnswer(Self.ios6Active)
        response.latestExpiredReceiptInfo = try decodeAnswer(Self.ios6Expired).latestExpiredReceiptInfo

        let verified = DerivedAnswer(response: response, answeredBy: nil, now: now)

        #expect(verified.subscriptions.count == 1)
        #expect(verified.subscriptions.first?.latestTransactionID == "1000000046178999")
        #expect(verified.subscriptions.first?.state == .active)
    }

    // MARK: numbers instead of strings

    @Test("Numbers and flags sent as JSON numbers and booleans read like their string forms")
    func numbersInsteadOfStrings() throws {
        let answer = """
            {
              "status": 0,
              "environment": "Production",
              "latest_receipt_info": [{
                "quantity": 1,
                "product_id": "com.example.monthly",
                "transaction_id": 1000000000000002,
                "original_transaction_id": 1000000000000001,
                "web_order_line_item_id": 2000000000000002,
                "purchase_date_ms": 1699000000000,
                "expires_date_ms": 1701000000000,
                "cancellation_reason": 0,
                "is_trial_period": false,
                "is_in_intro_offer_period": 1,
                "is_upgraded": 0
              }],
              "pending_renewal_info": [{
                "original_transaction_id": 1000000000000001,
                "product_id": "com.example.monthly",
                "auto_renew_status": 1,
                "is_in_billing_retry_period": false,
                "expiration_intent": 2,
                "grace_period_expires_date_ms": 1702000000000.5
              }]
            }
            """

        let response = try decodeAnswer(answer)

        let row = try #require(response.latestReceiptInfo.first)
        #expect(row.transactionID == "1000000000000002")
        #expect(row.originalTransactionID == "1000000000000001")
        #expect(row.purchaseDate == Clock.date(ms: 1_699_000_000_000))
        #expect(row.expiresDate == Clock.date(ms: 1_701_000_000_000))
        #expect(row.isTrialPeriod == false)
        #expect(row.isInIntroOfferPeriod == true)
        #expect(row.isUpgraded == false)
        let pending = try #require(response.pendingRenewalInfo.first)
        #expect(pending.originalTransactionID == "1000000000000001")
        #expect(pending.autoRenewStatus == true)
        #expect(pending.isInBillingRetryPeriod == false)
        #expect(pending.expirationIntent == "2")
        let grace = try #require(pending.gracePeriodExpiresDate)
        #expect(abs(grace.timeIntervalSince1970 - 1_702_000_000.0005) < 0.000_01)

        let subscription = try #require(
            DerivedAnswer(response: response, answeredBy: nil, now: now).subscriptions.first)
        #expect(subscription.originalTransactionID == "1000000000000001")
        #expect(subscription.state == .active)
        #expect(subscription.autoRenew == true)
        #expect(subscription.isInIntroOfferPeriod)
    }

    @Test("A status sent as a string is read as the same code")
    func statusAsString() throws {
        #expect(try decodeAnswer(#"{"status": "21007"}"#).status == .sandboxReceiptOnProduction)
    }

    @Test(
        "An answer without a numeric status is rejected",
        arguments: [#"{}"#, #"{"status": "ok"}"#, #"{"status": null}"#])
    func missingStatus(json: String) {
        #expect(throws: AppleAnswerError.self) { try decodeAnswer(json) }
    }

    // MARK: retry flag, status codes, unknown fields

    @Test(
        "Both spellings of the retry flag are read, in every form Apple may send",
        arguments: [
            (#"{"status": 21100, "is-retryable": true}"#, true),
            (#"{"status": 21100, "is_retryable": true}"#, true),
            (#"{"status": 21100, "is-retryable": false}"#, false),
            (#"{"status": 21100, "is_retryable": false}"#, false),
            (#"{"status": 21100, "is_retryable": 1}"#, true),
            (#"{"status": 21100, "is-retryable": "1"}"#, true),
            (#"{"status": 21100, "is_retryable": "false"}"#, false),
            (#"{"status": 21100}"#, nil),
        ] as [(String, Bool?)]
    )
    func retryFlag(json: String, expected: Bool?) throws {
        let response = try decodeAnswer(json)

        #expect(response.isRetryable == expected)
        #expect(
            response.status.disposition(isRetryableFlag: response.isRetryable)
                == (expected == true ? AppStoreStatus.Disposition.temporary : .permanentError))
    }

    @Test("An unknown status code is kept as its number")
    func unknownStatusKept() throws {
        let permanent = try decodeAnswer(#"{"status": 21199, "is_retryable": false}"#)
        let retryable = try decodeAnswer(#"{"status": 21199, "is-retryable": true}"#)
        let future = try decodeAnswer(#"{"status": 21300, "environment": "Production"}"#)

        #expect(permanent.status.rawValue == 21199)
        #expect(permanent.status.description == "21199")
        #expect(permanent.status.disposition(isRetryableFlag: permanent.isRetryable) == .permanentError)
        #expect(retryable.status.disposition(isRetryableFlag: retryable.isRetryable) == .temporary)
        #expect(future.status == AppStoreStatus(21300))
        #expect(future.status.disposition(isRetryableFlag: nil) == .permanentError)
        let encoded = try JSONEncoder().encode(future)
        #expect(try decodeAnswer(String(decoding: encoded, as: UTF8.self)).status.rawValue == 21300)
    }

    @Test("Unknown fields at every level are ignored")
    func unknownFieldsIgnored() throws {
        let row = Wire.row(
            transaction: "1001", purchased: Clock.at(-Clock.day), expires: Clock.at(29 * Clock.day),
            extra:
                #""offer_code_ref_name": "SPRING", "promotional_offer_id": "p1", "app_account_token": "6d1b1e9c-3f5e-4b0a-9a57-1c1c1c1c1c1c", "future_field": {"nested": [1, 2, {"x": null}]}"#
        )
        let answer = """
            {
              "status": 0,
              "environment": "Production",
              "future_top_level": [true, 1.5, "x"],
              "receipt": {"receipt_type": "Production", "adam_id": 123, "app_item_id": 456, "download_id": 7,
                          "version_external_identifier": 8, "bundle_id": "com.example", "future": {}, "in_app": []},
              "latest_receipt_info": [\(row)],
              "pending_renewal_info": [{"original_transaction_id": "1000000000000001", "product_id": "com.example.monthly",
                                        "auto_renew_status": "1", "price_consent_status": "1", "price_increase_status": "0",
                                        "offer_code_ref_name": "X", "future": [null]}]
            }
            """

        let response = try decodeAnswer(answer)
        let subscription = try #require(
            DerivedAnswer(response: response, answeredBy: nil, now: now).subscriptions.first)

        #expect(response.receipt?.bundleID == "com.example")
        #expect(response.pendingRenewalInfo.first?.priceIncreaseStatus == nil, "not used by the job, so not read")
        #expect(subscription.state == .active)
        #expect(subscription.autoRenew == true)
    }

    // MARK: broken values

    static let garbageDates: [(String, String)] = {
        let good = Wire.row(transaction: "1001", purchased: Clock.at(-Clock.day), expires: Clock.at(29 * Clock.day))
        let bad = { (field: String, value: String) in
            good.replacingOccurrences(
                of: #""\#(field)": "[^"]*""#, with: #""\#(field)": \#(value)"#, options: .regularExpression)
        }
        return [
            ("expires_date_ms as a word", Wire.answer(rows: [bad("expires_date_ms", #""soon""#)])),
            ("expires_date_ms negative", Wire.answer(rows: [bad("expires_date_ms", #""-5""#)])),
            ("expires_date_ms empty", Wire.answer(rows: [bad("expires_date_ms", #""""#)])),
            ("purchase_date_ms with letters", Wire.answer(rows: [bad("purchase_date_ms", #""12ab""#)])),
            ("expires_date_ms as an object", Wire.answer(rows: [bad("expires_date_ms", #"{"ms": 1}"#)])),
            (
                "a human date in an unknown form",
                Wire.answer(rows: [
                    #"{"original_transaction_id": "1", "transaction_id": "1", "expires_date": "next Tuesday"}"#
                ])
            ),
            (
                "a date in another zone without _ms",
                Wire.answer(rows: [
                    #"{"original_transaction_id": "1", "transaction_id": "1", "expires_date": "2023-11-14 10:00:00 America/Los_Angeles"}"#
                ])
            ),
            (
                "a 13th month",
                Wire.answer(rows: [
                    #"{"original_transaction_id": "1", "transaction_id": "1", "expires_date": "2023-13-14 10:00:00 Etc/GMT"}"#
                ])
            ),
            (
                "a garbage grace period end",
                Wire.answer(
                    rows: [good],
                    pending: [
                        #"{"original_transaction_id": "1000000000000001", "grace_period_expires_date_ms": "tomorrow"}"#
                    ])
            ),
            (
                "a garbage date in receipt.in_app when it is the only source of rows",
                #"{"status": 0, "receipt": {"bundle_id": "com.example", "in_app": [{"original_transaction_id": "1", "transaction_id": "1", "expires_date_ms": "soon"}]}}"#
            ),
            (
                "a garbage date in a single-object latest_receipt_info",
                #"{"status": 0, "latest_receipt_info": {"original_transaction_id": "1", "expires_date": "soon"}}"#
            ),
            (
                "a garbage date in latest_expired_receipt_info",
                #"{"status": 21006, "latest_expired_receipt_info": {"original_transaction_id": "1", "expires_date": "soon"}}"#
            ),
        ]
    }()

    @Test("A garbage date is an unreadable field, not a silently missing date", arguments: garbageDates)
    func garbageDatesThrow(label: String, json: String) {
        #expect(throws: AppleAnswerError.self, "\(label)") { try decodeAnswer(json) }
    }

    @Test(
        "A garbage flag is an unreadable field", arguments: [#""is_trial_period": "maybe""#, #""is_upgraded": "yes""#])
    func garbageFlagsThrow(flag: String) {
        let row = Wire.row(
            transaction: "1001", purchased: Clock.at(-Clock.day), expires: Clock.at(Clock.day), extra: flag
        )
        .replacingOccurrences(of: #""is_trial_period": "false","#, with: "")
        #expect(throws: AppleAnswerError.self) { try decodeAnswer(Wire.answer(rows: [row])) }
    }

    // MARK: round trip (the simulator writes answers with these encoders)

    @Test("An encoded answer decodes to the same value")
    func encodeRoundTrip() throws {
        let grace = Date(timeIntervalSince1970: 1_700_500_000.123)
        let response = VerifyReceiptResponse(
            status: .valid, environment: .sandbox, isRetryable: false, latestReceipt: "MIIabc",
            latestReceiptInfo: [
                LatestReceiptInfo(
                    productID: "p", transactionID: "2", originalTransactionID: "1", webOrderLineItemID: "9",
                    purchaseDate: Date(timeIntervalSince1970: 1_699_000_000),
                    originalPurchaseDate: Date(timeIntervalSince1970: 1_690_000_000),
                    expiresDate: Date(timeIntervalSince1970: 1_701_000_000),
                    cancellationDate: Date(timeIntervalSince1970: 1_700_000_001),
                    cancellationReason: "1", isTrialPeriod: true, isInIntroOfferPeriod: false, isUpgraded: true,
                    inAppOwnershipType: "FAMILY_SHARED", subscriptionGroupIdentifier: "g")
            ],
            pendingRenewalInfo: [
                PendingRenewalInfo(
                    originalTransactionID: "1", productID: "p", autoRenewProductID: "q", autoRenewStatus: false,
                    expirationIntent: "2", isInBillingRetryPeriod: true, gracePeriodExpiresDate: grace,
                    priceIncreaseStatus: "1")
            ],
            receipt: ReceiptInfo(receiptType: "ProductionSandbox", bundleID: "com.example", inApp: []),
            autoRenewStatus: nil)

        let data = try JSONEncoder().encode(response)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let row = try #require((json["latest_receipt_info"] as? [[String: Any]])?.first)

        // What the job reads survives the round trip (fields it does not use are not read back).
        let decoded = try VerifyReceiptResponse(json: data)
        #expect(
            AppleEvidence(verifyReceipt: decoded, answeredBy: nil)
                == AppleEvidence(verifyReceipt: response, answeredBy: nil))
        #expect(decoded.latestReceiptInfo.map(\.expiresDate) == response.latestReceiptInfo.map(\.expiresDate))
        #expect(row["expires_date_ms"] as? String == "1701000000000")
        #expect(row["expires_date"] as? String == "2023-11-26 12:00:00 Etc/GMT")
        #expect(row["is_trial_period"] as? String == "true")
        #expect((json["pending_renewal_info"] as? [[String: Any]])?.first?["auto_renew_status"] as? String == "0")
    }
}
