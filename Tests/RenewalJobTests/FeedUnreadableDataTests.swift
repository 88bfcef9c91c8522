import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage
import Testing

/// A verified notification from the change feed whose signed data the job cannot decode: a failure of
/// the run (notifications_failed, exit 3), never a notification about no subscription, and the
/// subscription it still names is made due so the run that read it checks it with Apple.
@Suite("Change feed: a verified notification whose data cannot be decoded is a failure and makes its subscription due")
struct FeedUnreadableDataTests {
    @Test(
        """
        A notification Apple signed whose signed transaction has no signedDate counts as notifications_failed \
        (completed_with_failures) and makes the subscription named in it due, so the same run checks it
        """,
        arguments: Backend.available)
    func unreadableTransactionMakesItsSubscriptionDue(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let customer = h.receipt("fu-unreadable", .renewal, daysAgo: 5)
            try await h.importReceipts([("unreadable", customer)])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client)
                let first = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(first.counts.checked == 1 && first.status == .completed, "\(first.counts)")

                h.state.unreadableNotifications = [
                    SimulatedNotification.unreadable(of: customer, at: h.state.now.addingTimeInterval(600))
                ]
                h.state.advance(by: 3_600)
                let read = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(read.counts.notificationsFailed == 1, "\(read.counts)")
                #expect(read.counts.notificationsUnmatched == 0, "not taken for one about no subscription")
                #expect(read.counts.checked == 1, "the subscription it names was made due and checked: \(read.counts)")
                #expect(read.status == .completedWithFailures, "\(read.status)")
            }
        }
    }

    @Test("the verifier marks undecodable signed data unreadable and reads the subscription it names")
    func verifierReadsTheNamedSubscription() async throws {
        try await JobHarness.with { h in
            let verifier = SignedDataVerifier(
                rootCertificates: [h.serverAPI.chain.root], bundleID: SimulatedReceipt.bundleID)
            let customer = h.receipt("fu-verifier", .renewal, daysAgo: 5)
            let notification = SimulatedNotification.unreadable(of: customer, at: h.state.now)
            let read = try await verifier.notification(
                try notification.signedPayload(signer: h.serverAPI.chain), environment: "Production")
            #expect(read.dataUnreadable)
            #expect(read.originalTransactionID == customer.originalTransactionID)

            // `signedTransactionInfo` sent as something other than a string is unreadable too.
            let object: [String: Any] = [
                "notificationType": "DID_RENEW", "notificationUUID": UUID().uuidString, "version": "2.0",
                "signedDate": Int64(h.state.now.timeIntervalSince1970 * 1_000),
                "data": [
                    "environment": "Production", "bundleId": SimulatedReceipt.bundleID,
                    "signedTransactionInfo": ["x": 1],
                ],
            ]
            let odd = try await verifier.notification(
                try h.serverAPI.chain.sign(try JSONSerialization.data(withJSONObject: object)),
                environment: "Production")
            #expect(odd.dataUnreadable)
            #expect(odd.originalTransactionID == nil)
        }
    }
}
