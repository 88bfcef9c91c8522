import AppStoreSimulator
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalServerAPI
import RenewalStorage
import Synchronization
import Testing

/// Refund requests a killed run left claimed, on SQLite and PostgreSQL against the simulator.
@Suite("Refund request claims: only the request being sent, and a dead run's claims taken at once")
struct RefundRequestClaimTests {
    /// The real Server API client, with a look at the database each time an answer is about to go out: how
    /// many requests a live run holds then.
    struct WatchedClient: OperatorActions {
        let client: ServerAPIClient
        let harness: JobHarness
        let claimsAtSend: Claims

        func sendConsumptionInformation(
            _ information: ConsumptionInformation, transactionID: String, environment: AppStoreEnvironment,
            logger: Logger
        ) async -> Result<Void, AppleAPIError> {
            let rows = try? await DashboardViewsTests.query(
                harness,
                """
                SELECT COUNT(*) AS n FROM refund_requests
                WHERE claimed_until IS NOT NULL AND run_id <> '\(RefundRequestClaimTests.killedRun)'
                """)
            let held = rows?.first.flatMap { DashboardViewsTests.int($0, "n") } ?? -1
            claimsAtSend.seen.withLock { $0.append(held) }
            return await client.sendConsumptionInformation(
                information, transactionID: transactionID, environment: environment, logger: logger)
        }

        func extendRenewalDate(
            originalTransactionID: String, days: Int, reason: Int, requestIdentifier: String,
            environment: AppStoreEnvironment, logger: Logger
        ) async -> Result<RenewalDateExtended, AppleAPIError> {
            await client.extendRenewalDate(
                originalTransactionID: originalTransactionID, days: days, reason: reason,
                requestIdentifier: requestIdentifier, environment: environment, logger: logger)
        }

        func massExtendRenewalDates(
            productID: String, storefronts: [String], days: Int, reason: Int, requestIdentifier: String,
            environment: AppStoreEnvironment, logger: Logger
        ) async -> Result<Void, AppleAPIError> {
            await client.massExtendRenewalDates(
                productID: productID, storefronts: storefronts, days: days, reason: reason,
                requestIdentifier: requestIdentifier, environment: environment, logger: logger)
        }

        func massExtensionStatus(
            productID: String, requestIdentifier: String, environment: AppStoreEnvironment, logger: Logger
        ) async -> Result<MassExtensionStatus, AppleAPIError> {
            await client.massExtensionStatus(
                productID: productID, requestIdentifier: requestIdentifier, environment: environment, logger: logger)
        }
    }

    /// How many requests a live run held at each answer sent.
    final class Claims: Sendable {
        let seen = Mutex<[Int]>([])
    }

    static let killedRun = "run-killed-while-answering"

    @Test(
        """
        Refund requests left claimed by a run killed while answering them are answered by the next run at once, \
        not when the claims lapse; each answer claims only the request being sent
        """,
        arguments: Backend.available)
    func killedRunsClaimsTakenAtOnce(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Four consented requests an hour from now.
            let receipts = (0..<4).map { h.receipt("rr-claim-\($0)", .refundRequest, daysAgo: 36 - 1.0 / 24) }
            h.state.register(receipts)
            _ = try await h.store.importReceipts(
                receipts.enumerated().map { index, receipt in
                    var line = ReceiptImport(
                        userID: "claim-\(index)", latestReceipt: receipt.encoded, productID: receipt.productID)
                    line.consumptionConsent = true
                    return line
                }, now: h.state.now)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                h.state.advance(by: 2 * 3_600)
                // The feed brings the requests; without operator actions the run cannot answer them.
                let read = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(read.counts.refundRequests == 4, "\(read.counts)")

                // A run killed while answering: its row still `running`, its worker gone (no session holds
                // its liveness lock; on SQLite the next run holds the run lock), its claims 10 minutes long.
                try await h.store.beginRun(
                    RunRecord(
                        id: Self.killedRun, command: "run", startedAt: h.state.now, host: "gone", processID: 1,
                        workerID: "worker-killed-while-answering"))
                let claimedUntil = Int64(h.state.now.addingTimeInterval(600).timeIntervalSince1970 * 1_000)
                let due = Int64(h.state.now.timeIntervalSince1970 * 1_000)
                _ = try await DashboardViewsTests.query(
                    h,
                    """
                    UPDATE refund_requests SET claimed_until = \(claimedUntil), next_attempt_at = \(due),
                        run_id = '\(Self.killedRun)'
                    """)
                h.state.advance(by: 60)

                let watched = WatchedClient(client: client, harness: h, claimsAtSend: Claims())
                let next = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.operatorActions = watched
                }
                #expect(next.counts.refundRequestsAnswered == 4, "taken at once from the dead run: \(next.counts)")
                #expect(h.state.consumptionAnswers.count == 4)
                let claims = watched.claimsAtSend.seen.withLock { $0 }
                #expect(claims == [1, 1, 1, 1], "only the request being sent is claimed: \(claims)")
            }
            let states = try await DashboardViewsTests.query(h, "SELECT state FROM refund_requests")
            #expect(states.allSatisfy { DashboardViewsTests.text($0, "state") == "answered" })
        }
    }
}
