import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalSQL
import RenewalStorage
import Testing

@testable import RenewalDelivery

/// Issue 44 through a whole run: purchases Apple knows that the app never imported reach the database by
/// the change feed, with Apple's state, their owner when the app registered their token, unclaimed
/// otherwise; forged and repeated notifications add nothing.
@Suite("Lost purchases: adopted from the change feed, claimed by their registered token")
struct LostPurchaseAdoptionTests {
    @Test(
        """
        Purchases registered in the simulator but never imported are adopted by the next run and checked in it \
        with Apple's state; a registered token's is its user's at once, a token registered later claims its \
        purchase; a forged notification and the same notifications listed twice add nothing
        """,
        arguments: Backend.available)
    func lostPurchasesAreAdopted(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("steady", h.receipt("lp-steady", .renewal, daysAgo: 3))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }

                // Four purchases the app's server never stored: three with a token, one without.
                let lost =
                    h.state.makeLostPurchases(count: 3, prefix: "lp-token", spacing: 600)
                    + h.state.makeLostPurchases(count: 1, prefix: "lp-bare", spacing: 600, withToken: false)
                let token0 = try #require(lost[0].accountToken)
                let token1 = try #require(lost[1].accountToken)
                // The app registered the first purchase's token before it happened; a forged notification
                // names a subscription nobody bought; every notification is listed twice.
                let registered = try await h.store.importReceipts(
                    [ReceiptImport(userID: "u-zero", latestReceipt: nil, appAccountToken: token0)], now: h.state.now)
                #expect(registered == [.tokenRecorded])
                let phantom = h.receipt("lp-phantom", .renewal, daysAgo: 1)
                h.state.forgedNotifications = [
                    SimulatedNotification.forgedRefund(of: phantom, at: h.state.now.addingTimeInterval(1_800))
                ]
                h.state.feedDuplicatePercent = 100
                h.state.advance(by: 2 * 3_600)

                let run = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.queueWebhooks = true
                }
                #expect(run.counts.notificationsUnmatched == 0, "\(run.counts)")
                // Each purchase's first webhook says whose it is, with a type of its own.
                let outbox = try #require(h.store as? any WebhookOutboxStore)
                let pending = try await outbox.claimDeliveries(
                    owner: "test", now: h.state.now.addingTimeInterval(60),
                    leaseExpiresAt: h.state.now.addingTimeInterval(600), limit: 100)
                let types = try pending.map {
                    try #require(try JSONSerialization.jsonObject(with: WebhookEvent.body(of: $0)) as? [String: Any])
                }.compactMap { $0["type"] as? String }
                #expect(types.filter { $0 == "purchase.unclaimed" }.count == 3, "\(types)")
                #expect(types.filter { $0 == "purchase.claimed" }.count == 1, "\(types)")
                let receipts = try await h.receipts()
                #expect(receipts.count == 5, "steady and the four lost: \(receipts.map(\.userID))")
                for purchase in lost {
                    let row = try #require(
                        receipts.first { $0.originalTransactionID == purchase.originalTransactionID })
                    #expect(row.lastVerifiedAt != nil, "checked in the run that adopted it")
                    let states = row.subscriptions.map(\.snapshot.state)
                    #expect(states == [.active], "Apple's state: \(purchase.account) \(states)")
                }
                let owners = Dictionary(
                    uniqueKeysWithValues: receipts.compactMap { row in
                        row.originalTransactionID.map { ($0, row.userID) }
                    })
                #expect(owners[lost[0].originalTransactionID] == "u-zero")
                for purchase in lost.dropFirst() {
                    #expect(owners[purchase.originalTransactionID] == "adopted:" + purchase.originalTransactionID)
                }
                #expect(!receipts.contains { $0.originalTransactionID == phantom.originalTransactionID })
                let history = try #require(h.store as? any RunHistoryStore)
                let report = try await history.changes(ofRun: run.runID).map {
                    "\($0.event.kind.rawValue) \($0.userID)"
                }
                #expect(report.filter { $0.hasPrefix("purchase_unclaimed") }.count == 3, "\(report)")
                #expect(report.contains("purchase_claimed u-zero"), "\(report)")
                // The run's own count of changes is the changes it recorded, adoptions included.
                #expect(run.counts.changed == report.count, "\(run.counts) against \(report)")

                // The token of the second arrives later: its purchase becomes that user's.
                let later = try await h.store.importReceipts(
                    [ReceiptImport(userID: "u-one", latestReceipt: nil, appAccountToken: token1)], now: h.state.now)
                #expect(later == [.tokenRecorded])
                let claimed = try await h.receipts().first { $0.originalTransactionID == lost[1].originalTransactionID }
                #expect(claimed?.userID == "u-one")

                // The same window again: nothing adopted twice.
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(try await h.receipts().count == 5)
                let adopted = try await DashboardViewsTests.query(h, "SELECT COUNT(*) AS n FROM adopted_purchases")
                #expect(adopted.first.flatMap { DashboardViewsTests.int($0, "n") } == 4)
            }
        }
    }
}
