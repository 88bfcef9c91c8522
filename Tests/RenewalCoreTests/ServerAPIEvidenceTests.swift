import Foundation
import Testing

@testable import RenewalCore

/// What the App Store Server API's status codes, renewal info, commitment plans and revocations mean for
/// entitlement, on plain decoded values (no JWS: the adapter checks signatures before Core sees them).
/// Every case states the result a wrong mapping would not give: a status read as another, a fallback
/// dropped, a commitment ignored or applied where it must not be.
@Suite("Server API evidence: status codes, renewal info, commitments and revocations, as plain values")
struct ServerAPIEvidenceTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let day: TimeInterval = 86_400
    static let future = now.addingTimeInterval(10 * day)
    static let past = now.addingTimeInterval(-3 * day)
    static let original = "3000000000000001"

    /// A monthly subscription's latest signed transaction, expiring at `expires`, signed `now`.
    static func transaction(expires: Date?, _ edit: (inout JWSTransaction) -> Void = { _ in }) -> JWSTransaction {
        var transaction = JWSTransaction()
        transaction.transactionId = "3000000000000009"
        transaction.originalTransactionId = original
        transaction.bundleId = "com.example.app"
        transaction.productId = "com.example.pro.monthly"
        transaction.subscriptionGroupIdentifier = "21000001"
        transaction.type = "Auto-Renewable Subscription"
        transaction.purchaseDate = (expires ?? now).addingTimeInterval(-30 * day)
        transaction.expiresDate = expires
        transaction.signedDate = now
        transaction.environment = "Production"
        transaction.inAppOwnershipType = "PURCHASED"
        edit(&transaction)
        return transaction
    }

    /// Renewal info with auto-renew on and nothing else said, signed `now`.
    static func renewal(_ edit: (inout JWSRenewalInfo) -> Void = { _ in }) -> JWSRenewalInfo {
        var renewal = JWSRenewalInfo()
        renewal.originalTransactionId = original
        renewal.productId = "com.example.pro.monthly"
        renewal.autoRenewProductId = "com.example.pro.monthly"
        renewal.autoRenewStatus = 1
        renewal.signedDate = now
        renewal.environment = "Production"
        edit(&renewal)
        return renewal
    }

    /// A status answer's item, read as evidence.
    static func evidence(status: Int?, _ transaction: JWSTransaction, _ renewal: JWSRenewalInfo?) throws
        -> SubscriptionEvidence
    {
        let facts = ServerAPISubscriptionFacts(
            status: status, originalTransactionID: original, subscriptionGroupIdentifier: "21000001",
            transaction: transaction, renewal: renewal)
        return try #require(try facts.statusAnswerEvidence(environment: .production))
    }

    static func snapshot(_ evidence: SubscriptionEvidence) -> SubscriptionSnapshot {
        SubscriptionSnapshot(evidence: evidence, now: now)
    }

    @Test("The five status codes, and no code or an unknown one, as Apple numbers them")
    func statusCodes() {
        #expect(ServerAPIStatus(rawValue: 1) == .active)
        #expect(ServerAPIStatus(rawValue: 2) == .expired)
        #expect(ServerAPIStatus(rawValue: 3) == .billingRetry)
        #expect(ServerAPIStatus(rawValue: 4) == .gracePeriod)
        #expect(ServerAPIStatus(rawValue: 5) == .revoked)
        #expect(ServerAPIStatus(rawValue: 0) == nil)
        #expect(ServerAPIStatus(rawValue: 6) == nil)
    }

    struct StatusCase: CustomTestStringConvertible, Sendable {
        var name: String
        var status: Int?
        var expires: Date
        /// Renewal info's `isInBillingRetryPeriod`; nil leaves it out, so the status decides.
        var retryFlag: Bool?
        var grace: Date?
        var withRenewal = true
        var state: SubscriptionState
        var isInBillingRetry: Bool
        var cancelledAt: Date?
        var testDescription: String { name }
    }

    static let statusCases: [StatusCase] = [
        StatusCase(
            name: "1 active", status: 1, expires: future, state: .active, isInBillingRetry: false),
        StatusCase(
            name: "2 expired", status: 2, expires: past, state: .expired, isInBillingRetry: false),
        StatusCase(
            name: "3 billing retry, renewal info silent", status: 3, expires: past, state: .billingRetry,
            isInBillingRetry: true),
        StatusCase(
            name: "3 billing retry, no renewal info", status: 3, expires: past, withRenewal: false,
            state: .billingRetry, isInBillingRetry: true),
        StatusCase(
            name: "4 grace period, renewal info silent on retry", status: 4, expires: past,
            grace: now.addingTimeInterval(3 * day), state: .gracePeriod, isInBillingRetry: true),
        StatusCase(
            name: "4 grace period, no renewal info: retrying, grace end unknown", status: 4, expires: past,
            withRenewal: false, state: .billingRetry, isInBillingRetry: true),
        StatusCase(
            name: "5 revoked, no revocation date: revoked when Apple signed it", status: 5, expires: future,
            state: .revoked, isInBillingRetry: false, cancelledAt: now),
        StatusCase(
            name: "no status (older notifications)", status: nil, expires: past, state: .expired,
            isInBillingRetry: false),
        StatusCase(
            name: "unknown status 6 is no status", status: 6, expires: past, state: .expired, isInBillingRetry: false),
        StatusCase(
            name: "unknown status 0 is no status", status: 0, expires: future, state: .active, isInBillingRetry: false),
        StatusCase(
            name: "renewal info's retry flag beats status 3", status: 3, expires: past, retryFlag: false,
            state: .expired, isInBillingRetry: false),
        StatusCase(
            name: "renewal info's retry flag beats status 2", status: 2, expires: past, retryFlag: true,
            state: .billingRetry, isInBillingRetry: true),
    ]

    @Test("Each status code, with renewal info that does or does not say, derives its state", arguments: statusCases)
    func statuses(_ item: StatusCase) throws {
        let renewal = Self.renewal {
            $0.isInBillingRetryPeriod = item.retryFlag
            $0.gracePeriodExpiresDate = item.grace
        }
        let evidence = try Self.evidence(
            status: item.status, Self.transaction(expires: item.expires), item.withRenewal ? renewal : nil)
        #expect(evidence.isInBillingRetry == item.isInBillingRetry)
        #expect(evidence.cancelledAt == item.cancelledAt)
        #expect(evidence.gracePeriodExpiresAt == (item.withRenewal ? item.grace : nil))
        #expect(Self.snapshot(evidence).state == item.state)
    }

    struct CommitmentCase: CustomTestStringConvertible, Sendable {
        var name: String
        /// Days from now the commitment ends; nil: `commitmentInfo` without `commitmentExpiresDate`.
        var commitmentEndsIn: Double?
        var hasCommitmentInfo = true
        var expires: Date? = future
        var autoRenewStatus: Int? = 0
        var withRenewal = true
        var revoked = false
        var commitmentAutoRenewStatus: Int? = 0
        var autoRenew: Bool?
        var testDescription: String { name }
    }

    static let commitmentCases: [CommitmentCase] = [
        CommitmentCase(
            name: "8 months still to bill, next commitment off: renews", commitmentEndsIn: 240, autoRenew: true),
        CommitmentCase(
            name: "8 months still to bill, auto-renew on", commitmentEndsIn: 240, autoRenewStatus: 1, autoRenew: true),
        CommitmentCase(
            name: "8 months still to bill, no renewal info: renews", commitmentEndsIn: 240, withRenewal: false,
            autoRenew: true),
        CommitmentCase(
            name: "last month of the commitment: the customer's choice", commitmentEndsIn: 10, autoRenew: false),
        CommitmentCase(
            name: "last month, next commitment on: auto-renew status decides", commitmentEndsIn: 10,
            autoRenewStatus: 1, commitmentAutoRenewStatus: 1, autoRenew: true),
        CommitmentCase(
            name: "commitment ended before the period: the customer's choice", commitmentEndsIn: 5, autoRenew: false),
        CommitmentCase(
            name: "refunded inside the commitment: no renewal forced", commitmentEndsIn: 240, revoked: true,
            autoRenew: false),
        CommitmentCase(
            name: "commitmentInfo without an end date: the customer's choice", commitmentEndsIn: nil, autoRenew: false
        ),
        CommitmentCase(
            name: "billing plan named but no commitmentInfo: the customer's choice", commitmentEndsIn: nil,
            hasCommitmentInfo: false, autoRenew: false),
        CommitmentCase(
            name: "transaction without an expiry: the customer's choice", commitmentEndsIn: 240, expires: nil,
            autoRenew: false),
        CommitmentCase(
            name: "no commitment, no renewal info: not said", commitmentEndsIn: nil, hasCommitmentInfo: false,
            withRenewal: false, autoRenew: nil),
    ]

    @Test("A monthly plan in a 12-month commitment renews until the commitment ends", arguments: commitmentCases)
    func commitments(_ item: CommitmentCase) throws {
        let transaction = Self.transaction(expires: item.expires) {
            $0.billingPlanType = "MONTHLY_WITH_12_MONTH_COMMITMENT"
            if item.hasCommitmentInfo {
                $0.commitmentInfo = CommitmentInfo(
                    commitmentExpiresDate: item.commitmentEndsIn.map { Self.now.addingTimeInterval($0 * Self.day) },
                    commitmentAutoRenewStatus: item.commitmentAutoRenewStatus, billingPeriodsRemaining: 8)
            }
            if item.revoked {
                $0.revocationDate = Self.past
                $0.revocationType = "REFUND_FULL"
            }
        }
        let renewal = Self.renewal { $0.autoRenewStatus = item.autoRenewStatus }
        let evidence = try Self.evidence(
            status: item.revoked ? 5 : 1, transaction, item.withRenewal ? renewal : nil)
        #expect(evidence.autoRenew == item.autoRenew)
        #expect(Self.snapshot(evidence).autoRenew == item.autoRenew)
        if !item.revoked, item.expires != nil { #expect(Self.snapshot(evidence).state == .active) }
    }

    struct RevocationCase: CustomTestStringConvertible, Sendable {
        var name: String
        var status: Int?
        var revocationDate: Date?
        var revocationType: String?
        var revocationPercentage: Int?
        var revocationReason: Int?
        var ownership = "PURCHASED"
        var revokedSeats: Int?
        var cancelledAt: Date?
        var state: SubscriptionState
        var testDescription: String { name }
    }

    static let revocationCases: [RevocationCase] = [
        RevocationCase(
            name: "refunded in full", status: 5, revocationDate: past, revocationType: "REFUND_FULL",
            revocationReason: 0, cancelledAt: past, state: .revoked),
        RevocationCase(
            name: "refunded prorated, half", status: 5, revocationDate: past, revocationType: "REFUND_PRORATED",
            revocationPercentage: 50_000, revocationReason: 1, cancelledAt: past, state: .revoked),
        RevocationCase(
            name: "family sharing revoked", status: 5, revocationDate: past, revocationType: "FAMILY_REVOKE",
            ownership: "FAMILY_SHARED", cancelledAt: past, state: .revoked),
        RevocationCase(
            name: "revocation date under status 1 (the summary lags): revoked", status: 1, revocationDate: past,
            revocationType: "REFUND_FULL", cancelledAt: past, state: .revoked),
        RevocationCase(
            name: "revocation date without a status: revoked", status: nil, revocationDate: past,
            revocationType: "REFUND_FULL", cancelledAt: past, state: .revoked),
        RevocationCase(
            name: "status 5 without a date: revoked when signed", status: 5, cancelledAt: now, state: .revoked),
        RevocationCase(
            name: "two of five seats refunded: the purchaser stays entitled", status: 1, revokedSeats: 2,
            state: .active),
    ]

    @Test("Revocations end the entitlement at the revocation; seat refunds do not", arguments: revocationCases)
    func revocations(_ item: RevocationCase) throws {
        let transaction = Self.transaction(expires: Self.future) {
            $0.revocationDate = item.revocationDate
            $0.revocationType = item.revocationType
            $0.revocationPercentage = item.revocationPercentage
            $0.revocationReason = item.revocationReason
            $0.inAppOwnershipType = item.ownership
            if let seats = item.revokedSeats {
                $0.quantity = 5
                $0.multiSeatInfo = MultiSeatInfo(invitationManagement: "APPLE", revokedSeatQuantity: seats)
            }
        }
        let evidence = try Self.evidence(status: item.status, transaction, Self.renewal())
        #expect(evidence.cancelledAt == item.cancelledAt)
        #expect(Self.snapshot(evidence).state == item.state)
        let ledger = try #require(evidence.transactions.first)
        #expect(evidence.transactions.count == 1)
        #expect(ledger.revokedAt == item.revocationDate)
        #expect(ledger.revocationType == item.revocationType)
        #expect(ledger.revocationPercentage == item.revocationPercentage)
        #expect(ledger.revocationReason == item.revocationReason)
        #expect(ledger.revokedSeatQuantity == item.revokedSeats)
        #expect(ledger.quantity == (item.revokedSeats == nil ? 1 : 5))
        #expect(ledger.origin == .statusAnswer)
    }

    @Test("Expiration intent and auto-renew status read as verifyReceipt's")
    func renewalFields() throws {
        for intent in 1...5 {
            let evidence = try Self.evidence(
                status: 2, Self.transaction(expires: Self.past),
                Self.renewal {
                    $0.autoRenewStatus = 0
                    $0.expirationIntent = intent
                })
            #expect(evidence.expirationIntent == String(intent))
            #expect(evidence.autoRenew == false)
            #expect(Self.snapshot(evidence).expirationIntent == String(intent))
        }
        let on = try Self.evidence(status: 1, Self.transaction(expires: Self.future), Self.renewal())
        #expect(on.autoRenew == true && on.expirationIntent == nil)
        #expect(on.autoRenewProductID == "com.example.pro.monthly")
        let unknown = try Self.evidence(
            status: 1, Self.transaction(expires: Self.future), Self.renewal { $0.autoRenewStatus = 2 })
        #expect(unknown.autoRenew == false)
        let silent = try Self.evidence(
            status: 1, Self.transaction(expires: Self.future), Self.renewal { $0.autoRenewStatus = nil })
        #expect(silent.autoRenew == nil)
        let none = try Self.evidence(status: 2, Self.transaction(expires: Self.past), nil)
        #expect(none.autoRenew == nil && none.expirationIntent == nil && none.autoRenewProductID == nil)
        // Intent 1 with the period still running is a subscriber who turned auto-renew off: still active.
        let voluntary = try Self.evidence(
            status: 1, Self.transaction(expires: Self.future),
            Self.renewal {
                $0.autoRenewStatus = 0
                $0.expirationIntent = 1
            })
        #expect(Self.snapshot(voluntary).state == .active)
    }

    @Test("Offers: a free trial, an introductory price, and other offers that are neither")
    func offers() throws {
        let cases: [(Int?, String?, trial: Bool, intro: Bool)] = [
            (1, "FREE_TRIAL", true, false), (1, "PAY_AS_YOU_GO", false, true), (1, "PAY_UP_FRONT", false, true),
            (1, nil, false, true), (2, "FREE_TRIAL", false, false), (3, "PAY_UP_FRONT", false, false),
            (nil, nil, false, false),
        ]
        for (offerType, discount, trial, intro) in cases {
            let evidence = try Self.evidence(
                status: 1,
                Self.transaction(expires: Self.future) {
                    $0.offerType = offerType
                    $0.offerDiscountType = discount
                }, Self.renewal())
            let label = "\(offerType.map(String.init) ?? "-") \(discount ?? "-")"
            #expect(evidence.isTrialPeriod == trial, "\(label)")
            #expect(evidence.isInIntroOfferPeriod == intro, "\(label)")
            #expect(evidence.transactions.first?.isTrial == trial, "\(label)")
            #expect(evidence.transactions.first?.offerType == offerType, "\(label)")
        }
    }

    @Test("The subscription's identity, product, group, upgrade and signing time come from the signed data")
    func identity() throws {
        let signedLater = Self.now.addingTimeInterval(60)
        let evidence = try Self.evidence(
            status: 1,
            Self.transaction(expires: Self.future) {
                $0.subscriptionGroupIdentifier = nil
                $0.inAppOwnershipType = "FAMILY_SHARED"
                $0.price = 9990
                $0.currency = "EUR"
            }, Self.renewal { $0.signedDate = signedLater })
        #expect(evidence.originalTransactionID == Self.original)
        #expect(evidence.productID == "com.example.pro.monthly")
        #expect(evidence.expiresAt == Self.future)
        #expect(evidence.latestTransactionID == "3000000000000009")
        #expect(
            evidence.subscriptionGroupIdentifier == "21000001", "the status group's, when the transaction names none")
        #expect(evidence.environment == .production)
        #expect(evidence.basis == .latestTransactions)
        #expect(evidence.signedAt == signedLater, "the later of the two signing times")
        #expect(evidence.ownershipType == "FAMILY_SHARED")
        #expect(Self.snapshot(evidence).isFamilyShared)
        #expect(evidence.transactions.first?.priceMilliunits == 9990)
        #expect(evidence.transactions.first?.currency == "EUR")

        let upgraded = try Self.evidence(
            status: 2, Self.transaction(expires: Self.future) { $0.isUpgraded = true }, Self.renewal())
        #expect(upgraded.isUpgraded)
        #expect(Self.snapshot(upgraded).state == .expired, "upgraded away: no access from this one")
        #expect(upgraded.transactions.first?.isUpgraded == true)

        let noID = try Self.evidence(
            status: 1, Self.transaction(expires: Self.future) { $0.transactionId = nil }, Self.renewal())
        #expect(noID.transactions.isEmpty, "no ledger row without a transaction id")
    }

    @Test("A status item: other purchases are counted apart; its ids must agree with the signed transaction")
    func statusItems() throws {
        func facts(claimed: String?, _ edit: (inout JWSTransaction) -> Void) -> ServerAPISubscriptionFacts {
            ServerAPISubscriptionFacts(
                status: 1, originalTransactionID: claimed, subscriptionGroupIdentifier: nil,
                transaction: Self.transaction(expires: Self.future, edit), renewal: Self.renewal())
        }
        for type in ["Non-Renewing Subscription", "Consumable", "Non-Consumable"] {
            #expect(
                try facts(claimed: Self.original) { $0.type = type }.statusAnswerEvidence(environment: .production)
                    == nil)
        }
        let untyped = try facts(claimed: Self.original) { $0.type = nil }.statusAnswerEvidence(environment: .sandbox)
        #expect(untyped?.originalTransactionID == Self.original && untyped?.environment == .sandbox)
        let claimedOnly = try facts(claimed: "3000000000000002") { $0.originalTransactionId = nil }
            .statusAnswerEvidence(environment: .production)
        #expect(claimedOnly?.originalTransactionID == "3000000000000002")
        #expect(claimedOnly?.transactions.first?.originalTransactionID == "3000000000000002")
        #expect(throws: ServerAPIAnswerProblem.self) {
            try facts(claimed: nil) { $0.originalTransactionId = nil }.statusAnswerEvidence(environment: .production)
        }
        #expect(
            throws: ServerAPIAnswerProblem(
                detail: "the status item's originalTransactionId 3000000000000002 differs from its signed "
                    + "transaction's \(Self.original)")
        ) {
            try facts(claimed: "3000000000000002") { _ in }.statusAnswerEvidence(environment: .production)
        }
    }

    @Test("A notification speaks for its subscription only with renewal info of that subscription")
    func notifications() throws {
        func evidence(_ renewal: JWSRenewalInfo?, status: Int? = nil, expires: Date = ServerAPIEvidenceTests.future)
            -> SubscriptionEvidence?
        {
            ServerAPISubscriptionFacts(
                status: status, originalTransactionID: nil, subscriptionGroupIdentifier: nil,
                transaction: Self.transaction(expires: expires), renewal: renewal
            ).notificationEvidence(environment: .production)
        }
        #expect(evidence(nil) == nil, "no renewal info: not the subscription's whole state")
        #expect(evidence(Self.renewal { $0.originalTransactionId = "3000000000000002" }) == nil)
        let unnamed = try #require(evidence(Self.renewal { $0.originalTransactionId = nil }))
        #expect(unnamed.originalTransactionID == Self.original)
        let refunded = try #require(evidence(Self.renewal(), status: 5))
        #expect(refunded.cancelledAt == Self.now)
        #expect(refunded.transactions.first?.origin == .notification)
        #expect(refunded.subscriptionGroupIdentifier == "21000001")
        let retrying = try #require(evidence(Self.renewal(), status: 3, expires: Self.past))
        #expect(Self.snapshot(retrying).state == .billingRetry)
        let withoutOriginal = ServerAPISubscriptionFacts(
            status: 1, originalTransactionID: nil, subscriptionGroupIdentifier: nil,
            transaction: Self.transaction(expires: Self.future) { $0.originalTransactionId = nil },
            renewal: Self.renewal())
        #expect(withoutOriginal.notificationEvidence(environment: .production) == nil)
    }

    @Test("Which signed transactions are auto-renewable subscriptions")
    func subscriptionTypes() {
        #expect(Self.transaction(expires: nil).isAutoRenewableSubscription)
        #expect(Self.transaction(expires: nil) { $0.type = nil }.isAutoRenewableSubscription)
        #expect(!Self.transaction(expires: nil) { $0.type = "Non-Renewing Subscription" }.isAutoRenewableSubscription)
        #expect(!Self.transaction(expires: nil) { $0.type = "Consumable" }.isAutoRenewableSubscription)
    }
}
