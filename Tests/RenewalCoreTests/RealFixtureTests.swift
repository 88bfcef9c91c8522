import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// Real verifyReceipt answers (Fixtures/SOURCES.md), decoded and evaluated at fixed instants.
@Suite struct RealFixtureTests {
    // MARK: exclude-old-transactions answer (auto-renew off, expiration intent 1)

    /// `expires_date_ms` of the only `latest_receipt_info` row: 2021-01-20 13:05:00 UTC.
    static let exceptOldExpiry = Clock.date(ms: 1_611_147_900_000)

    @Test("The exclude-old answer decodes with its status, environment, rows, strings and dates")
    func exceptOldDecodes() throws {
        let response = try Fixture.response(Fixture.exceptOld)

        #expect(response.status == .valid)
        #expect(response.status.disposition(isRetryableFlag: response.isRetryable) == .valid)
        #expect(response.environment == .production)
        #expect(response.isRetryable == nil)
        #expect(response.latestReceiptInfo.count == 1)
        #expect(response.pendingRenewalInfo.count == 1)
        #expect(response.latestExpiredReceiptInfo == nil)
        #expect(response.autoRenewStatus == nil)
        #expect(response.latestReceipt?.isEmpty == false)

        let row = try #require(response.latestReceiptInfo.first)
        #expect(row.productID == "one_month_subscription")
        #expect(row.transactionID == "1000000767477815")
        #expect(row.originalTransactionID == "1000000723811158")
        // Fields the job does not use are not read, so an odd value there can never fail an answer;
        // the ledger's quantity is read, and left out when odd.
        #expect(row.webOrderLineItemID == nil && row.originalPurchaseDate == nil)
        #expect(row.quantity == "1")
        #expect(row.purchaseDate == Clock.date(ms: 1_611_147_600_000))
        #expect(row.expiresDate == Self.exceptOldExpiry)
        #expect(row.cancellationDate == nil)
        #expect(row.isTrialPeriod == false)
        #expect(row.isInIntroOfferPeriod == false)
        #expect(row.isUpgraded == nil)
        #expect(row.inAppOwnershipType == "PURCHASED")
        #expect(row.subscriptionGroupIdentifier == "20667927")

        let pending = try #require(response.pendingRenewalInfo.first)
        #expect(pending.originalTransactionID == "1000000723811158")
        #expect(pending.productID == "month_premium")
        #expect(pending.autoRenewProductID == "one_month_subscription")
        #expect(pending.autoRenewStatus == false)
        #expect(pending.expirationIntent == "1")
        #expect(pending.isInBillingRetryPeriod == false)
        #expect(pending.gracePeriodExpiresDate == nil)

        let receipt = try #require(response.receipt)
        #expect(receipt.receiptType == "ProductionSandbox")
        #expect(receipt.bundleID == "com.some.thing")
        // `in_app` is read only when the answer has no `latest_receipt_info` to go by.
        #expect(receipt.inApp.isEmpty)
        let full = try ReceiptInfo(
            json: JSONDocument(
                JSONSerialization.data(
                    withJSONObject: try #require((Fixture.json(Fixture.exceptOld) as? [String: Any])?["receipt"]))
            ).root, readInApp: true)
        #expect(full.inApp.count == 42)
        let first = try #require(full.inApp.first)
        #expect(first.transactionID == "1000000739289145")
        #expect(first.expiresDate == AppleDateFormat.date(gmt: "2020-10-07 11:06:58 Etc/GMT"))
        #expect(Set(full.inApp.compactMap(\.originalTransactionID)) == ["1000000723811158"])
    }

    @Test("The exclude-old subscription is active one minute before expiry, with auto-renew off")
    func exceptOldActiveBeforeExpiry() throws {
        let response = try Fixture.response(Fixture.exceptOld)
        let now = Self.exceptOldExpiry.addingTimeInterval(-60)

        let verified = DerivedAnswer(response: response, answeredBy: .production, now: now)

        #expect(verified.environment == .production)
        #expect(verified.latestReceipt == response.latestReceipt)
        #expect(verified.subscriptions.count == 1)
        let subscription = try #require(verified.subscriptions.first)
        #expect(subscription.originalTransactionID == "1000000723811158")
        #expect(subscription.state == .active)
        #expect(subscription.entitled)
        #expect(subscription.expiresAt == Self.exceptOldExpiry)
        #expect(subscription.autoRenew == false)
        #expect(subscription.autoRenewProductID == "one_month_subscription")
        #expect(subscription.productID == "one_month_subscription")
        #expect(subscription.latestTransactionID == "1000000767477815")
        #expect(subscription.expirationIntent == nil)
        #expect(subscription.isInBillingRetry == false)
        #expect(subscription.ownershipType == "PURCHASED")
        #expect(!subscription.isFamilyShared)
    }

    @Test(
        "The exclude-old subscription is expired after its expiry, with expiration intent 1",
        arguments: [1, 60, 86_400 * 400] as [TimeInterval])
    func exceptOldExpiredAfterExpiry(secondsAfter: TimeInterval) throws {
        let response = try Fixture.response(Fixture.exceptOld)

        let subscription = try #require(
            DerivedAnswer(
                response: response, answeredBy: .production, now: Self.exceptOldExpiry.addingTimeInterval(secondsAfter)
            )
            .subscriptions.first)

        #expect(subscription.state == .expired)
        #expect(!subscription.entitled)
        #expect(subscription.autoRenew == false)
        #expect(subscription.expirationIntent == "1")
        #expect(subscription.gracePeriodExpiresAt == nil)
    }

    @Test("At exactly the expiry instant the paid period is over")
    func exceptOldAtExpiry() throws {
        let response = try Fixture.response(Fixture.exceptOld)
        let subscription = try #require(
            DerivedAnswer(response: response, answeredBy: nil, now: Self.exceptOldExpiry).subscriptions.first)
        #expect(subscription.state == .expired)
    }

    // MARK: 21007 then sandbox (recorded exchange)

    static let sandboxOriginalID = "1000000248850692"

    @Test("The cassette's production body is a bare 21007 that sends the job to the sandbox")
    func cassetteProductionSaysSandbox() throws {
        let exchanges = try Fixture.cassette(Fixture.sandboxCassette)
        #expect(exchanges.count == 2)
        let production = try #require(exchanges.first)
        #expect(production.request.url == "https://buy.itunes.apple.com/verifyReceipt")
        #expect(production.response.statusCode == 200)

        let body = try production.decodedBody()

        #expect(body.status == .sandboxReceiptOnProduction)
        #expect(body.status.rawValue == 21007)
        #expect(body.status.disposition(isRetryableFlag: body.isRetryable) == .useSandbox)
        #expect(body.environment == nil)
        #expect(body.latestReceiptInfo.isEmpty)
        #expect(body.pendingRenewalInfo.isEmpty)
        #expect(body.receipt == nil)
        #expect(body.latestReceipt == nil)
    }

    @Test("The cassette's sandbox body has no latest_receipt_info, so subscriptions come from receipt.in_app")
    func cassetteSandboxBodyReadsInApp() throws {
        let exchanges = try Fixture.cassette(Fixture.sandboxCassette)
        let sandbox = try #require(exchanges.last)
        #expect(sandbox.request.url == "https://sandbox.itunes.apple.com/verifyReceipt")
        #expect(sandbox.response.statusCode == 200)

        let body = try sandbox.decodedBody()

        #expect(body.status == .valid)
        #expect(body.status.disposition(isRetryableFlag: nil) == .valid)
        #expect(body.environment == .sandbox)
        #expect(body.latestReceiptInfo.isEmpty)
        #expect(body.pendingRenewalInfo.isEmpty)
        #expect(body.latestReceipt?.hasPrefix("MII") == true)
        let receipt = try #require(body.receipt)
        #expect(receipt.receiptType == "ProductionSandbox")
        #expect(receipt.bundleID == "com.sumiapp.GridDiary")
        #expect(receipt.inApp.count == 15)
        let subscriptionRows = receipt.inApp.filter { $0.expiresDate != nil }
        #expect(subscriptionRows.count == 14)
        #expect(Set(subscriptionRows.compactMap(\.originalTransactionID)) == [Self.sandboxOriginalID])
        let nonRenewing = receipt.inApp.filter { $0.expiresDate == nil }
        #expect(nonRenewing.map(\.productID) == ["com.sumiapp.GridDiary.pro"])

        // Request date of the answer: 2018-10-05, long after the 2016 sandbox renewals.
        let verified = DerivedAnswer(response: body, answeredBy: .sandbox, now: Clock.date(ms: 1_538_738_661_611))

        #expect(verified.environment == .sandbox)
        #expect(verified.subscriptions.count == 1)
        let subscription = try #require(verified.subscriptions.first)
        #expect(subscription.originalTransactionID == Self.sandboxOriginalID)
        #expect(subscription.productID == "com.sumiapp.GridDiary.pro.subscription")
        #expect(subscription.latestTransactionID == "1000000248916093")
        #expect(subscription.expiresAt == Clock.date(ms: 1_478_676_892_000))
        #expect(subscription.state == .expired)
        #expect(subscription.autoRenew == nil)
        #expect(subscription.environment == .sandbox)
    }

    @Test(
        "The latest expiry of the sandbox rows is chosen whatever their order",
        arguments: [0, 1, 2, 3, 4, 5] as [UInt64])
    func cassetteRowOrderDoesNotMatter(seed: UInt64) throws {
        var body = try #require(try Fixture.cassette(Fixture.sandboxCassette).last).decodedBody()
        let now = Clock.date(ms: 1_478_676_892_000 - 60_000)  // one minute before the latest expiry
        let expected = DerivedAnswer(response: body, answeredBy: .sandbox, now: now)

        var generator = SeededGenerator(seed: seed)
        switch seed {
        case 0: body.receipt?.inApp.reverse()
        case 1: body.receipt?.inApp.sort { ($0.expiresDate ?? .distantPast) > ($1.expiresDate ?? .distantPast) }
        default: body.receipt?.inApp.shuffle(using: &generator)
        }
        let shuffled = DerivedAnswer(response: body, answeredBy: .sandbox, now: now)

        #expect(shuffled == expected)
        let subscription = try #require(shuffled.subscriptions.first)
        #expect(subscription.state == .active)
        #expect(subscription.latestTransactionID == "1000000248916093")
    }

    @Test("The 21002 cassette records a bare status in an HTTP 200 answer")
    func malformedCassette() throws {
        let exchanges = try Fixture.cassette(Fixture.malformedCassette)
        #expect(exchanges.count == 1)
        let exchange = try #require(exchanges.first)
        #expect(exchange.response.statusCode == 200)

        let body = try exchange.decodedBody()

        #expect(body.status == .malformedOrTemporary)
        #expect(body.status.disposition(isRetryableFlag: body.isRetryable) == .malformedOrTemporary)
        #expect(body.environment == nil)
        #expect(body.latestReceiptInfo.isEmpty)
    }

    // MARK: venice (2014, human-readable expires_date only, mismatched renewal id)

    /// The in_app row's `expires_date`, the only form of its expiry.
    static let veniceExpiry = AppleDateFormat.date(gmt: "2014-06-28 14:47:53 Etc/GMT")!

    @Test("The venice answer's expiry is read from the human-readable expires_date")
    func veniceDecodes() throws {
        let response = try Fixture.response(Fixture.venice)

        #expect(response.status == .valid)
        #expect(response.environment == .production)
        #expect(response.latestReceiptInfo.isEmpty)
        let receipt = try #require(response.receipt)
        #expect(receipt.receiptType == "Production")
        #expect(receipt.bundleID == "com.foo.bar")
        #expect(receipt.inApp.count == 1)
        let row = try #require(receipt.inApp.first)
        #expect(row.expiresDate == Self.veniceExpiry)
        #expect(row.expiresDate == Date(timeIntervalSince1970: 1_403_966_873))
        #expect(row.purchaseDate == Clock.date(ms: 1_401_288_473_000))
        #expect(row.isTrialPeriod == false)
        #expect(row.isInIntroOfferPeriod == nil)
        let pending = try #require(response.pendingRenewalInfo.first)
        #expect(pending.originalTransactionID == "37xxxxxxxxx89")
        #expect(pending.originalTransactionID != row.originalTransactionID)
    }

    @Test("The venice subscription takes its renewal info by product when the ids do not match")
    func veniceDerivation() throws {
        let response = try Fixture.response(Fixture.venice)
        // Request date of the answer: 2014-06-04 23:20:47 UTC.
        let requestDate = Clock.date(ms: 1_401_924_047_883)

        let active = try #require(
            DerivedAnswer(response: response, answeredBy: nil, now: requestDate).subscriptions.first)
        let lapsed = try #require(
            DerivedAnswer(response: response, answeredBy: nil, now: Self.veniceExpiry.addingTimeInterval(1))
                .subscriptions.first)

        #expect(active.originalTransactionID == "1000000061051111")
        #expect(active.state == .active)
        #expect(active.autoRenew == false)
        #expect(active.autoRenewProductID == "com.foo.product1")
        #expect(active.environment == .production)
        #expect(active.expiresAt == Self.veniceExpiry)
        #expect(lapsed.state == .expired)
        #expect(lapsed.expirationIntent == "1")
    }

    // MARK: V1 notification's unified_receipt (54 rows, sandbox, upgrades)

    /// `auto_renew_status_change_date_ms` of the notification: 2020-11-25 08:30:02 UTC.
    static let notificationDate = Clock.date(ms: 1_606_293_002_000)
    /// The latest expiry among the 54 rows: 2020-11-25 08:31:02 UTC.
    static let notificationExpiry = Clock.date(ms: 1_606_293_062_000)

    @Test("The V1 notification's unified_receipt decodes as a verifyReceipt answer with 54 rows")
    func unifiedReceiptDecodes() throws {
        let notification = try Fixture.V1Notification.load()
        let response = notification.unifiedReceipt

        #expect(notification.notificationType == "DID_CHANGE_RENEWAL_STATUS")
        #expect(notification.autoRenewStatus == "false")
        #expect(Clock.date(ms: try #require(Int64(notification.autoRenewStatusChangeDateMs))) == Self.notificationDate)
        #expect(response.status == .valid)
        #expect(response.environment == .sandbox)
        #expect(response.receipt == nil)
        #expect(response.latestReceipt?.hasPrefix("MI") == true)  // base64 of a DER SEQUENCE
        #expect(response.latestReceiptInfo.count == 54)
        #expect(Set(response.latestReceiptInfo.compactMap(\.originalTransactionID)) == ["1000000723811158"])
        #expect(response.latestReceiptInfo.filter { $0.isUpgraded == true }.count == 4)
        #expect(response.latestReceiptInfo.filter { $0.productID == "year_premium" }.count == 6)
        #expect(response.latestReceiptInfo.allSatisfy { $0.expiresDate != nil && $0.purchaseDate != nil })
        #expect(response.latestReceiptInfo.allSatisfy { $0.isTrialPeriod == false })
        let pending = try #require(response.pendingRenewalInfo.first)
        #expect(response.pendingRenewalInfo.count == 1)
        #expect(pending.autoRenewStatus == false)
        #expect(pending.expirationIntent == "1")
        #expect(pending.isInBillingRetryPeriod == false)
    }

    @Test("The unified_receipt subscription is active until its latest row expires, then expired")
    func unifiedReceiptDerivation() throws {
        let notification = try Fixture.V1Notification.load()
        let response = notification.unifiedReceipt

        let atNotification = DerivedAnswer(response: response, answeredBy: nil, now: Self.notificationDate)
        let afterExpiry = DerivedAnswer(
            response: response, answeredBy: nil, now: Self.notificationExpiry.addingTimeInterval(1))

        #expect(atNotification.subscriptions.count == 1)
        let active = try #require(atNotification.subscriptions.first)
        #expect(active.state == .active)
        #expect(active.productID == "month_premium")
        #expect(active.latestTransactionID == "1000000746095599")
        #expect(active.expiresAt == Self.notificationExpiry)
        #expect(active.autoRenew == false)
        #expect(active.environment == .sandbox)
        #expect(active.subscriptionGroupIdentifier == "20667927")
        let expired = try #require(afterExpiry.subscriptions.first)
        #expect(expired.state == .expired)
        #expect(expired.expirationIntent == "1")
    }

    @Test("Shuffling the 54 unified_receipt rows changes nothing", arguments: [7, 11, 13] as [UInt64])
    func unifiedReceiptOrder(seed: UInt64) throws {
        let notification = try Fixture.V1Notification.load()
        var response = notification.unifiedReceipt
        let expected = DerivedAnswer(response: response, answeredBy: nil, now: Self.notificationDate)

        var generator = SeededGenerator(seed: seed)
        response.latestReceiptInfo.shuffle(using: &generator)

        #expect(DerivedAnswer(response: response, answeredBy: nil, now: Self.notificationDate) == expected)
    }

    // MARK: date triples

    @Test(
        "Every date triple in the fixtures decodes to one instant in all three forms",
        arguments: [Fixture.exceptOld, Fixture.venice, Fixture.v1Notification]
    )
    func dateTriplesAgree(path: String) throws {
        var triples = 0
        func visit(_ value: Any) {
            if let array = value as? [Any] { array.forEach(visit); return }
            guard let object = value as? [String: Any] else { return }
            for (key, value) in object {
                if let text = value as? String, let ms = object[key + "_ms"] as? String,
                    let pst = object[key + "_pst"] as? String
                {
                    triples += 1
                    let instant = AppleDateFormat.date(milliseconds: ms)
                    let seconds = instant.map { Date(timeIntervalSince1970: floor($0.timeIntervalSince1970)) }
                    #expect(AppleDateFormat.date(gmt: text) == seconds, "\(key): \(text) vs \(ms)")
                    #expect(instant.map(AppleDateFormat.gmtString) == text, "\(key)")
                    #expect(instant.map(AppleDateFormat.pacificString) == pst, "\(key)_pst")
                }
                visit(value)
            }
        }
        visit(try Fixture.json(path))
        #expect(triples > 3)
    }

    @Test("The cassette body's date triples agree too")
    func cassetteDateTriplesAgree() throws {
        let body = try #require(try Fixture.cassette(Fixture.sandboxCassette).last).response.body
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        let inApp = try #require((json["receipt"] as? [String: Any])?["in_app"] as? [[String: Any]])
        let decoded =
            try #require(try Fixture.cassette(Fixture.sandboxCassette).last).decodedBody().receipt?.inApp ?? []
        #expect(inApp.count == decoded.count)
        for (raw, row) in zip(inApp, decoded) {
            #expect(raw["transaction_id"] as? String == row.transactionID)
            if let ms = raw["expires_date_ms"] as? String, let text = raw["expires_date"] as? String {
                #expect(row.expiresDate == AppleDateFormat.date(milliseconds: ms))
                #expect(row.expiresDate == AppleDateFormat.date(gmt: text))
                #expect(raw["expires_date_pst"] as? String == row.expiresDate.map(AppleDateFormat.pacificString))
            } else {
                #expect(row.expiresDate == nil)
            }
        }
    }

    // MARK: receipt inputs

    @Test(
        "The stored receipt inputs are base64: DER for app receipts, plist text for iOS 6 receipts",
        arguments: [
            ("verify-receipt/receipts/xcode-app-receipt-empty.b64", UInt8(0x30)),
            ("verify-receipt/receipts/xcode-app-receipt-with-transaction.b64", 0x30),
            ("verify-receipt/receipts/ios6-transaction-receipt-sandbox.b64", UInt8(ascii: "{")),
            ("verify-receipt/receipts/ios6-transaction-receipt.apple-lib.b64", UInt8(ascii: "{")),
        ] as [(String, UInt8)]
    )
    func receiptInputs(path: String, firstByte: UInt8) throws {
        let text = String(decoding: try Fixture.data(path), as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)

        let bytes = try #require(Data(base64Encoded: text))

        #expect(bytes.first == firstByte)
        let body = try JSONEncoder().encode(VerifyReceiptRequest(receiptData: text, password: "secret"))
        let json = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(json["receipt-data"] as? String == text)
        #expect(json["password"] as? String == "secret")
        #expect(json["exclude-old-transactions"] as? Bool == true)
    }

    @Test("The wrapped sandbox app receipt is a base64 DER receipt")
    func wrappedReceipt() throws {
        struct Wrapped: Decodable { var transactionReceipt: String }
        let wrapped = try JSONDecoder().decode(
            Wrapped.self, from: Fixture.data("verify-receipt/receipts/sandbox-app-receipt-42-in-app.wrapped.json"))

        let bytes = try #require(Data(base64Encoded: wrapped.transactionReceipt))

        #expect(wrapped.transactionReceipt.hasPrefix("MI"))
        #expect(bytes.first == 0x30)
        #expect(bytes.count > 10_000)
    }
}
