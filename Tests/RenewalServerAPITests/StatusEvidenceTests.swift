import Foundation
import RenewalCore
import Testing

@testable import RenewalServerAPI

@Suite("Status answers mean what verifyReceipt answers mean: states from signed transactions and renewal info")
struct StatusEvidenceTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let day: TimeInterval = 86_400

    static func ms(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970 * 1000) }

    /// A status answer for one subscription, signed by `chain`.
    static func answer(
        chain: SigningChain, status: Int, transaction extra: [String: Any] = [:],
        renewal renewalExtra: [String: Any] = [:],
        expires: Date, environment: String = "Production"
    ) throws -> StatusResponse {
        var transaction: [String: Any] = [
            "transactionId": "3000000000000009", "originalTransactionId": "3000000000000001",
            "bundleId": "com.example.app",
            "productId": "com.example.pro.monthly", "subscriptionGroupIdentifier": "21000001",
            "type": "Auto-Renewable Subscription",
            "purchaseDate": ms(expires.addingTimeInterval(-30 * day)), "expiresDate": ms(expires),
            "signedDate": ms(now),
            "environment": environment, "inAppOwnershipType": "PURCHASED",
        ]
        transaction.merge(extra) { $1 }
        var renewal: [String: Any] = [
            "originalTransactionId": "3000000000000001", "productId": "com.example.pro.monthly",
            "autoRenewProductId": "com.example.pro.monthly",
            "autoRenewStatus": 1, "signedDate": ms(now), "environment": environment,
        ]
        renewal.merge(renewalExtra) { $1 }
        let body: [String: Any] = [
            "environment": environment, "bundleId": "com.example.app", "appAppleId": 1,
            "data": [
                [
                    "subscriptionGroupIdentifier": "21000001",
                    "lastTransactions": [
                        [
                            "status": status, "originalTransactionId": "3000000000000001",
                            "signedTransactionInfo": try chain.sign(
                                JSONSerialization.data(withJSONObject: transaction)),
                            "signedRenewalInfo": try chain.sign(JSONSerialization.data(withJSONObject: renewal)),
                        ]
                    ],
                ]
            ],
        ]
        return try JSONDecoder().decode(StatusResponse.self, from: JSONSerialization.data(withJSONObject: body))
    }

    @Test("Each status and its payloads derive the state verifyReceipt's derivation gives")
    func states() async throws {
        let chain = try SigningChain.generate()
        let verifier = SignedDataVerifier(rootCertificates: [chain.root], bundleID: "com.example.app")
        let future = Self.now.addingTimeInterval(10 * Self.day), past = Self.now.addingTimeInterval(-3 * Self.day)
        let cases: [(String, StatusResponse, SubscriptionState, Bool?)] = [
            ("active", try Self.answer(chain: chain, status: 1, expires: future), .active, true),
            (
                "active, auto-renew off",
                try Self.answer(chain: chain, status: 1, renewal: ["autoRenewStatus": 0], expires: future), .active,
                false
            ),
            (
                "expired, cancelled",
                try Self.answer(
                    chain: chain, status: 2, renewal: ["autoRenewStatus": 0, "expirationIntent": 1], expires: past),
                .expired, false
            ),
            (
                "billing retry",
                try Self.answer(
                    chain: chain, status: 3, renewal: ["isInBillingRetryPeriod": true, "expirationIntent": 2],
                    expires: past), .billingRetry, true
            ),
            (
                "grace period",
                try Self.answer(
                    chain: chain, status: 4,
                    renewal: [
                        "isInBillingRetryPeriod": true,
                        "gracePeriodExpiresDate": Self.ms(Self.now.addingTimeInterval(3 * Self.day)),
                    ],
                    expires: past), .gracePeriod, true
            ),
            (
                "refunded in full",
                try Self.answer(
                    chain: chain, status: 5,
                    transaction: [
                        "revocationDate": Self.ms(past), "revocationReason": 0, "revocationType": "REFUND_FULL",
                    ], expires: future),
                .revoked, true
            ),
            (
                "refunded prorated",
                try Self.answer(
                    chain: chain, status: 5,
                    transaction: [
                        "revocationDate": Self.ms(past), "revocationType": "REFUND_PRORATED",
                        "revocationPercentage": 50000,
                    ], expires: future),
                .revoked, true
            ),
            (
                "status 5 with no revocation date", try Self.answer(chain: chain, status: 5, expires: future), .revoked,
                true
            ),
            (
                "upgraded away",
                try Self.answer(chain: chain, status: 2, transaction: ["isUpgraded": true], expires: future), .expired,
                true
            ),
            (
                "family shared",
                try Self.answer(
                    chain: chain, status: 1, transaction: ["inAppOwnershipType": "FAMILY_SHARED"], expires: future),
                .active, true
            ),
            (
                "commitment: renewal of the commitment off, 8 months still to bill",
                try Self.answer(
                    chain: chain, status: 1,
                    transaction: [
                        "billingPlanType": "MONTHLY_WITH_12_MONTH_COMMITMENT",
                        "commitmentInfo": [
                            "commitmentExpiresDate": Self.ms(Self.now.addingTimeInterval(240 * Self.day)),
                            "commitmentAutoRenewStatus": 0,
                        ],
                    ],
                    renewal: ["autoRenewStatus": 0], expires: future), .active, true
            ),
        ]
        for (name, response, expected, autoRenew) in cases {
            let evidence = try await verifier.evidence(from: response, environment: "Production")
            let subscription = try #require(evidence.subscriptions.first, "\(name)")
            let snapshot = SubscriptionSnapshot(evidence: subscription, now: Self.now)
            #expect(snapshot.state == expected, "\(name): \(snapshot.state)")
            #expect(snapshot.autoRenew == autoRenew, "\(name): auto-renew \(String(describing: snapshot.autoRenew))")
            #expect(
                snapshot.originalTransactionID == "3000000000000001" && snapshot.environment == .production, "\(name)")
            if name == "family shared" { #expect(snapshot.isFamilyShared) }
        }
    }

    @Test("One bad signature fails the whole answer; the answer's environment and bundle must match")
    func wholeAnswerRefused() async throws {
        let chain = try SigningChain.generate(), stranger = try SigningChain.generate()
        let verifier = SignedDataVerifier(rootCertificates: [chain.root], bundleID: "com.example.app")
        let forged = try Self.answer(chain: stranger, status: 1, expires: Self.now.addingTimeInterval(Self.day))
        await #expect(throws: SignedDataFailure.self) {
            _ = try await verifier.evidence(from: forged, environment: "Production")
        }
        let sandbox = try Self.answer(
            chain: chain, status: 1, expires: Self.now.addingTimeInterval(Self.day), environment: "Sandbox")
        await #expect(throws: SignedDataFailure.wrongEnvironment(expected: "Production", found: "Sandbox")) {
            _ = try await verifier.evidence(from: sandbox, environment: "Production")
        }
        #expect(try await verifier.evidence(from: sandbox, environment: "Sandbox").subscriptions.count == 1)
        let otherApp = SignedDataVerifier(rootCertificates: [chain.root], bundleID: "com.example.other")
        await #expect(throws: SignedDataFailure.wrongBundle(expected: "com.example.other", found: "com.example.app")) {
            _ = try await otherApp.evidence(from: sandbox, environment: "Sandbox")
        }
    }

    @Test("Apple's status-response fixture decodes; its placeholder signatures are refused, never trusted")
    func appleFixture() async throws {
        let response = try JSONDecoder().decode(
            StatusResponse.self, from: Fixture.data("server-api/get-all-subscription-statuses.status-response.json"))
        #expect(response.data?.count == 2)
        #expect(response.data?.first?.lastTransactions?.map(\.status) == [1, 5])
        let verifier = SignedDataVerifier(rootCertificates: [try SigningChain.generate().root], bundleID: "com.example")
        await #expect(throws: SignedDataFailure.self) {
            _ = try await verifier.evidence(from: response, environment: "LocalTesting")
        }
    }
}
