import AppStoreSimulator
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalServerAPI
import Testing

/// Get Notification History through the real Server API client against the simulator over
/// loopback: pages, verified payloads, the delay before a notification is listed, the kept span.
@Suite("Notification History: the simulator's feed read and verified by the job's client")
struct NotificationHistoryTests {
    static let quiet = Logger(label: "feed", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Every page of `[start, end)` in `environment`, each payload verified.
    static func pull(
        _ client: ServerAPIClient, _ environment: AppStoreEnvironment, start: Date, end: Date
    ) async throws -> (notifications: [VerifiedNotification], pages: [Int]) {
        var token: String?
        var notifications: [VerifiedNotification] = []
        var pages: [Int] = []
        repeat {
            let page = try await client.notificationHistory(
                environment: environment, start: start, end: end, token: token, logger: Self.quiet
            ).get()
            let records = page.notificationHistory ?? []
            pages.append(records.count)
            for record in records {
                let payload = try #require(record.signedPayload)
                notifications.append(try await client.verifier.notification(payload, environment: environment.rawValue))
            }
            token = page.nextToken
        } while token != nil
        return (notifications, pages)
    }

    @Test(
        """
        A refund, an auto-renew change, a billing failure, a recovery and renewals come back verified, in order, \
        20 a page, each once, naming their subscription
        """)
    func pagesOfVerifiedNotifications() async throws {
        try await JobHarness.with { h in
            let refund = h.receipt("feed-refund", .refund, daysAgo: 50)
            let recovery = h.receipt("feed-recovery", .billingRecovery, daysAgo: 40)
            let lapse = h.receipt("feed-lapse", .voluntaryExpiry, daysAgo: 40)
            let renewals = (0..<12).map { h.receipt("feed-renew-\($0)", .renewal, daysAgo: 59) }
            let tester = h.receipt("feed-tester", .sandbox, daysAgo: 20)
            h.state.register([refund, recovery, lapse, tester] + renewals)
            try await h.withServerAPIClient { client in
                let start = h.state.now.addingTimeInterval(-60 * 86_400)
                let (production, pages) = try await Self.pull(client, .production, start: start, end: h.state.now)
                #expect(pages.count >= 2 && pages.allSatisfy { $0 <= 20 }, "\(pages)")
                #expect(Set(production.map(\.uuid)).count == production.count, "each notification once")
                #expect(production.map(\.signedDate) == production.map(\.signedDate).sorted(), "oldest first")
                let expected = [refund, recovery, lapse] + renewals
                #expect(production.count == expected.flatMap { $0.notifications(until: h.state.now) }.count)

                func kinds(_ receipt: SimulatedReceipt) -> [String] {
                    production.filter { $0.originalTransactionID == receipt.originalTransactionID }
                        .map { [$0.type, $0.subtype].compactMap { $0 }.joined(separator: "/") }
                }
                #expect(
                    kinds(refund) == [
                        "SUBSCRIBED/INITIAL_BUY", "DID_RENEW", "REFUND",
                        "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED",
                    ])
                #expect(
                    kinds(recovery) == ["SUBSCRIBED/INITIAL_BUY", "DID_FAIL_TO_RENEW", "DID_RENEW/BILLING_RECOVERY"])
                #expect(
                    kinds(lapse) == [
                        "SUBSCRIBED/INITIAL_BUY", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED", "EXPIRED/VOLUNTARY",
                    ])
                // The refund's own signed transaction carries the revocation.
                let refunded = try #require(production.first { $0.type == "REFUND" })
                #expect(refunded.transaction?.revocationDate != nil)

                // The sandbox keeps 30 days.
                let (sandbox, _) = try await Self.pull(
                    client, .sandbox, start: h.state.now.addingTimeInterval(-25 * 86_400), end: h.state.now)
                #expect(Set(sandbox.map(\.originalTransactionID)) == [tester.originalTransactionID])
            }
        }
    }

    @Test("a notification is listed only once Apple has indexed it; a window older than the kept span is refused")
    func delayAndRetention() async throws {
        try await JobHarness.with { h in
            // Renewed an hour ago.
            let renewed = SimulatedReceipt(
                account: "feed-recent", scenario: .renewal, start: h.state.now.addingTimeInterval(-30 * 86_400 - 3_600))
            h.state.register([renewed])
            try await h.withServerAPIClient { client in
                let start = h.state.now.addingTimeInterval(-2 * 86_400)
                h.state.notificationDelay = 2 * 3_600
                var (listed, _) = try await Self.pull(client, .production, start: start, end: h.state.now)
                #expect(listed.isEmpty, "not indexed yet: \(listed.map(\.type))")
                h.state.notificationDelay = 60
                (listed, _) = try await Self.pull(client, .production, start: start, end: h.state.now)
                #expect(listed.map(\.type) == ["DID_RENEW"])

                let tooOld = await client.notificationHistory(
                    environment: .production, start: h.state.now.addingTimeInterval(-181 * 86_400), end: h.state.now,
                    token: nil, logger: Self.quiet)
                guard case .failure(.httpStatus(400, let code)) = tooOld else {
                    Issue.record("expected a 400, got \(tooOld)")
                    return
                }
                #expect(code == 4_000_012)
            }
        }
    }

    @Test("a notification signed by a chain the job does not trust is refused with jws_untrusted_chain")
    func forgedNotificationIsRefused() async throws {
        try await JobHarness.with { h in
            let refund = h.receipt("feed-forged", .refund, daysAgo: 50)
            let forger = try SigningChain.generate(name: "forger")
            let notification = try #require(refund.notifications(until: h.state.now).first { $0.type == "REFUND" })
            let forged = try notification.signedPayload(signer: forger)
            let genuine = try notification.signedPayload(signer: h.serverAPI.chain)
            let verifier = SignedDataVerifier(
                rootCertificates: [h.serverAPI.chain.root], bundleID: SimulatedReceipt.bundleID)
            #expect(try await verifier.notification(genuine, environment: "Production").type == "REFUND")
            do {
                _ = try await verifier.notification(forged, environment: "Production")
                Issue.record("a forged notification was accepted")
            } catch let error as SignedDataFailure {
                #expect(error.reason == .jwsUntrustedChain)
            }
            do {
                _ = try await verifier.notification(genuine, environment: "Sandbox")
                Issue.record("a production notification was accepted as the sandbox's")
            } catch let error as SignedDataFailure {
                #expect(error.reason == .jwsWrongEnvironment)
            }
        }
    }
}
