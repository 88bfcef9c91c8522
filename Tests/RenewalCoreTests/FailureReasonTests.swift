import Foundation
import Testing

@testable import RenewalCore

/// The failure reasons are stored (`run_failures.reason`), exported as metric labels and charted by
/// reason: their spelling is part of the contract, and the typed value travels as a plain string.
@Suite("FailureReason: typed in code, a plain stable string on the wire")
struct FailureReasonTests {
    @Test("the builders spell Apple's codes the way reports and dashboards already group them")
    func builders() {
        #expect(FailureReason.appleStatus(AppStoreStatus(21005)).rawValue == "apple_status_21005")
        #expect(AppStoreStatus.sharedSecretRejected.reason == .appleStatus(AppStoreStatus(21004)))
        #expect(FailureReason.http(503).rawValue == "http_503")
        #expect(FailureReason.serverAPICode(4_040_002).rawValue == "server_api_4040002")
        #expect(FailureReason.http(503) != .http(502))
    }

    @Test("a stored reason this version does not know reads back as itself and equals its constant")
    func openEnded() {
        let stored = FailureReason(rawValue: "some_future_reason")
        #expect(stored.description == "some_future_reason")
        #expect(FailureReason(rawValue: "timeout") == .timeout)
    }

    @Test("a failure encodes its reason as a bare string and decodes it back")
    func codable() throws {
        let failure = CheckFailure(reason: .wrongBundle, message: "m")
        let json = try #require(String(data: JSONEncoder().encode(failure), encoding: .utf8))
        #expect(json.contains(#""reason":"wrong_bundle""#))
        #expect(try JSONDecoder().decode(CheckFailure.self, from: Data(json.utf8)) == failure)
    }

    @Test("an answer's failure reason: none when verified, Apple's status when rejected, the failure's otherwise")
    func answerReason() {
        let rejected = AppleAnswer.rejected(
            AppleRejection(kind: .notAuthentic, status: AppStoreStatus(21003), environment: .production))
        #expect(rejected.failureReason == .appleStatus(AppStoreStatus(21003)))
        #expect(
            AppleAnswer.transient(CheckFailure(reason: .timeout, message: ""), isOutage: true).failureReason == .timeout
        )
        #expect(
            AppleAnswer.verified(AppleEvidence(environment: nil, bundleID: nil, latestReceipt: nil, subscriptions: []))
                .failureReason == nil)
    }
}
