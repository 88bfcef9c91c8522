import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalSQL
import RenewalStorage
import Testing

/// `claim(originalTransactionIDs:…)`, what `renewal claim --order-id` calls for an order's subscriptions,
/// over purchases the simulator's change feed adopted, on SQLite and PostgreSQL: every subscription is
/// checked before any is claimed, so a refusal part-way leaves none claimed (issue 44).
@Suite("Claiming an order's subscriptions: all or nothing")
struct ClaimAllOrNothingTests {
    @Test(
        """
        Three adopted purchases, the second carol's: claiming all three for bob refuses naming carol and claims \
        none; with the third dave's the refusal names both; a missing one refuses before any claim; with \
        reassign all three are bob's, each move recorded
        """,
        arguments: Backend.available)
    func orderClaimIsAllOrNothing(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("steady", h.receipt("aon-steady", .renewal, daysAgo: 3))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let lost = h.state.makeLostPurchases(count: 3, prefix: "aon", spacing: 600, withToken: false)
                h.state.advance(by: 2 * 3_600)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let ids = lost.map(\.originalTransactionID)
                let claims = try #require(h.store as? any PurchaseClaiming)
                let claim = { (ids: [String], user: String, reassign: Bool) in
                    try await claims.claim(
                        originalTransactionIDs: ids, user: user, reassign: reassign, method: .hand, runID: nil,
                        queueWebhooks: false, now: h.state.now)
                }
                _ = try await claim([ids[1]], "carol", false)
                try await Self.expect(unclaimed: [ids[0], ids[2]], h)

                await #expect(throws: ClaimError.ownedByAnotherUser(originalTransactionID: ids[1], owner: "carol")) {
                    _ = try await claim(ids, "bob", false)
                }
                try await Self.expect(unclaimed: [ids[0], ids[2]], h)

                _ = try await claim([ids[2]], "dave", false)
                await #expect(throws: ClaimError.ownedByOtherUsers(owners: [ids[1]: "carol", ids[2]: "dave"])) {
                    _ = try await claim(ids, "bob", false)
                }
                await #expect(throws: ClaimError.notHeld(originalTransactionID: "aon-missing")) {
                    _ = try await claim([ids[0], "aon-missing"], "bob", false)
                }
                try await Self.expect(unclaimed: [ids[0]], h)
                #expect(try await Self.conflicts(h) == 3, "each refusal is recorded: carol's, then carol's and dave's")

                let moved = try await claim(ids, "bob", true)
                #expect(moved.map(\.previousOwner) == [nil, "carol", "dave"], "\(moved)")
                try await Self.expect(unclaimed: [], h)
                #expect(try await Self.conflicts(h) == 5, "and the two moves")
                let owners = try await DashboardViewsTests.query(h, "SELECT claimed_user_id FROM adopted_purchases")
                #expect(owners.map { $0["claimed_user_id"] } == [.text("bob"), .text("bob"), .text("bob")])
            }
        }
    }

    /// The conflicts recorded with bob as the claimant.
    static func conflicts(_ h: JobHarness) async throws -> Int? {
        let rows = try await DashboardViewsTests.query(
            h, "SELECT COUNT(*) AS n FROM ownership_conflicts WHERE claimant_user_id = 'bob'")
        return rows.first.flatMap { DashboardViewsTests.int($0, "n") }
    }

    /// The purchases still unclaimed are exactly `ids`.
    static func expect(unclaimed ids: [String], _ h: JobHarness) async throws {
        let source = try #require(h.store as? any UnclaimedPurchaseStore)
        let page = try await source.unclaimedPage(after: nil, limit: 100)
        #expect(page.map(\.originalTransactionID).sorted() == ids.sorted())
    }
}
