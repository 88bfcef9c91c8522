import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage
import Testing

/// Work besides the receipt checks that fails (a refund answer Apple refuses): the run ends
/// `completed_with_failures` (exit 3) and counts it in its report, never a quiet exit 0.
@Suite("Failures of a run's other work end with exit 3 and are counted")
struct WorkFailureTests {
    @Test(
        """
        A refund answer that fails (Apple answers 503 after the client's retries) makes the run end \
        completed_with_failures (exit 3), with refund_requests_failed counted in the report
        """,
        arguments: Backend.available)
    func failedRefundAnswer(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // A request an hour from now, from a customer who consented.
            let receipt = h.receipt("rr-failed", .refundRequest, daysAgo: 36 - 1.0 / 24)
            h.state.register([receipt])
            var line = ReceiptImport(userID: "failed", latestReceipt: receipt.encoded, productID: receipt.productID)
            line.consumptionConsent = true
            _ = try await h.store.importReceipts([line], now: h.state.now)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                let first = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(first.status == .completed, "\(first.counts)")
                // The feed brings the request; without operator actions it waits an hour for its next try.
                h.state.advance(by: 2 * 3_600)
                let read = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(read.counts.refundRequests == 1, "\(read.counts)")
                // When it is tried again, Apple is down.
                h.state.advance(by: 3_600 + 60)
                h.state.fault = .outage
                let outcome = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.operatorActions = client
                    $0.reportPath = h.directory + "/failed.json"
                }
                h.state.fault = .none
                #expect(
                    outcome.counts.failed == 0 && outcome.counts.checked == 0, "no receipt failed: \(outcome.counts)")
                #expect(outcome.status == .completedWithFailures, "\(outcome.status) \(outcome.counts)")
                #expect(outcome.status.exitCode == 3)
                let counts = try #require(try h.report(outcome)["counts"] as? [String: Any])
                #expect(counts["refund_requests_failed"] as? Int == 1, "\(counts)")
                #expect(counts["refund_requests_answered"] as? Int == 0, "\(counts)")

                // Apple back: answered, and the run exits 0 again.
                h.state.advance(by: 3_600)
                let again = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.operatorActions = client
                }
                #expect(again.counts.refundRequestsAnswered == 1, "\(again.counts)")
                #expect(again.status == .completed, "\(again.status) \(again.counts)")
            }
        }
    }

    @Test(
        """
        A verified notification whose data is not an object the job can read is marked unreadable (the feed \
        counts it as a failure), not taken for a notification about no subscription
        """)
    func undecodableNotificationData() async throws {
        try await JobHarness.with { h in
            let verifier = SignedDataVerifier(
                rootCertificates: [h.serverAPI.chain.root], bundleID: SimulatedReceipt.bundleID)
            func payload(_ data: Any?) throws -> String {
                var object: [String: Any] = [
                    "notificationType": "DID_RENEW", "notificationUUID": UUID().uuidString, "version": "2.0",
                    "signedDate": Int64(h.state.now.timeIntervalSince1970 * 1_000),
                ]
                object["data"] = data
                return try h.serverAPI.chain.sign(try JSONSerialization.data(withJSONObject: object))
            }
            for garbage: Any in ["not an object", 42, [1, 2]] {
                let read = try await verifier.notification(try payload(garbage), environment: "Production")
                #expect(read.dataUnreadable, "\(garbage)")
                #expect(read.originalTransactionID == nil)
            }
            let without = try await verifier.notification(try payload(nil), environment: "Production")
            #expect(!without.dataUnreadable, "a notification without data (a test notification) is not a failure")
        }
    }

    @Test(
        """
        A Transaction History page Apple fails (503 after the client's retries) makes the run end \
        completed_with_failures (exit 3), with history_failed counted; the next run reads it and exits 0
        """,
        arguments: Backend.available)
    func failedHistoryPage(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("history", h.receipt("wf-history", .renewal, daysAgo: 140))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client)
                func run(allowance: Int) async throws -> RenewalOutcome {
                    try await h.run(.run, verifier: router) {
                        $0.history = client
                        $0.historyRequestsPerRun = allowance
                    }
                }
                let first = try await run(allowance: 0)
                #expect(first.status == .completed, "\(first.counts)")
                h.state.fault = .outage
                let failed = try await run(allowance: 2)
                h.state.fault = .none
                #expect(failed.counts.checked == 0, "nothing was due: \(failed.counts)")
                #expect(failed.counts.historyFailed == 1, "\(failed.counts)")
                #expect(failed.status == .completedWithFailures, "\(failed.status) \(failed.counts)")
                let again = try await run(allowance: 2)
                #expect(again.counts.historyFailed == 0 && again.counts.historyTransactions > 0, "\(again.counts)")
                #expect(again.status == .completed, "\(again.status) \(again.counts)")
            }
        }
    }

    @Test(
        """
        A mass extension whose status Apple does not give (503 after the client's retries) is counted as \
        mass_extensions_failed and ends the run completed_with_failures; the next run follows it again
        """,
        arguments: Backend.available)
    func failedMassExtensionFollowUp(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("mass", h.receipt("wf-mass", .renewal, daysAgo: 5))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                func run() async throws -> RenewalOutcome {
                    try await h.run(.run, verifier: router) { $0.operatorActions = client }
                }
                _ = try await run()
                let mass = RenewalExtensions(
                    store: h.store, extenders: [nil: client], logger: h.logger, now: { h.state.now })
                let request = RenewalExtensions.MassRequest(
                    intent: "wf-mass", days: 5, reason: 3, productID: "com.example.pro.monthly", storefronts: [])
                #expect(try await mass.runMass(request) == .accepted)
                h.state.advance(by: 40 * 60)
                h.state.fault = .outage
                let failed = try await run()
                h.state.fault = .none
                #expect(failed.counts.checked == 0, "nothing was due: \(failed.counts)")
                #expect(failed.counts.massExtensionsFailed == 1, "\(failed.counts)")
                #expect(failed.status == .completedWithFailures, "\(failed.status) \(failed.counts)")
                h.state.advance(by: 60)
                let again = try await run()
                #expect(again.counts.massExtensionsFailed == 0, "\(again.counts)")
                #expect(again.status == .completed, "\(again.status) \(again.counts)")
            }
        }
    }
}
