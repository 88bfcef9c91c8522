import AppStoreSimulator
import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalPostgres
import RenewalSQL
import RenewalSQLite
import RenewalServerAPI
import RenewalStorage
import Testing

@testable import RenewalDelivery

/// Issue 44's "Done when": a simulated month in which a twentieth of the purchases never reach the
/// database. Runs every 12 hours read Apple's change feed (some notifications listed twice, one forged,
/// another app's purchase registered at Apple); at the end every lost purchase is held with Apple's
/// state, those whose token the app registered are their users', the rest are unclaimed until a claim by
/// order id attaches them. Then `Discovery` on a database that imported nothing finds every subscription
/// with a notification in the last 30 days.
@Suite("Lost purchases over a month: adopted, claimed, and found again by discover")
struct LostPurchaseMonthTests {
    static let day: TimeInterval = 86_400
    static let scenarios: [Scenario] = [
        .renewal, .voluntaryExpiry, .billingRetry, .refund, .gracePeriodRecovery, .billingRecovery,
    ]

    /// A lost purchase: its receipt, the run step it happens at, and the user whose token the app
    /// registered (at the start, or at `registeredAt`, a step during the month); nil when none.
    struct Lost {
        var receipt: SimulatedReceipt
        var step: Int
        var user: String?
        var registeredAt: Int?
    }

    /// Ten lost purchases over the month's 60 steps: five with a token (three registered before the
    /// month, two during it, after the purchase was adopted), five without.
    static func lostPurchases(start: Date) -> [Lost] {
        (0..<10).map { index in
            let step = 3 + index * 5
            let date = start.addingTimeInterval(Double(step) * 12 * 3_600 + 3_600)
            if index < 5 {
                let receipt = SimulatedReceipt(
                    account: "month-lost-token-\(index)", scenario: .renewal, start: date, period: 30 * Self.day
                ).withAppAccountToken()
                return Lost(
                    receipt: receipt, step: step, user: "month-user-\(index)",
                    registeredAt: index < 3 ? nil : step + 4)
            }
            let receipt = SimulatedReceipt(
                account: "month-lost-bare-\(index)", scenario: Self.scenarios[index % 3], start: date,
                period: 30 * Self.day)
            return Lost(receipt: receipt, step: step, user: nil, registeredAt: nil)
        }
    }

    @Test(
        """
        A month of 12-hourly runs with 1 in 20 purchases never imported: every lost one is held with Apple's \
        state, registered tokens' are their users' without a command, the rest unclaimed until claimed by order \
        id; forged, other-app and repeated notifications add nothing; discover on an empty database finds every \
        subscription with a notification in its window
        """,
        arguments: Backend.available)
    func lostPurchasesOverAMonth(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let start = h.state.now
            // 190 imported subscribers whose periods renew, lapse, are refunded or retried during the month.
            let imported = (0..<190).map { index in
                (
                    user: "month-\(index)",
                    receipt: h.receipt(
                        "month-\(index)", Self.scenarios[index % Self.scenarios.count],
                        daysAgo: Double(1 + index % 25))
                )
            }
            try await h.importReceipts(imported)
            let lost = Self.lostPurchases(start: start)
            for purchase in lost where purchase.registeredAt == nil {
                guard let user = purchase.user else { continue }
                try await Self.registerToken(of: purchase, user: user, h)
            }
            // Another app's purchase: Apple lists it only in that app's Notification History.
            var otherApp = h.receipt("month-other-app", .renewal, daysAgo: 0)
            otherApp.bundle = "com.example.other"
            let phantom = h.receipt("month-phantom", .renewal, daysAgo: 1)
            h.state.feedDuplicatePercent = 20

            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                var month = RenewalCounts()
                for step in 0..<60 {
                    for purchase in lost where purchase.step == step { h.state.register([purchase.receipt]) }
                    if step == 7 { h.state.register([otherApp]) }
                    if step == 11 {
                        h.state.forgedNotifications = [
                            SimulatedNotification.forgedRefund(of: phantom, at: h.state.now.addingTimeInterval(3_600)),
                            SimulatedNotification.forgedRefund(
                                of: imported[0].receipt, at: h.state.now.addingTimeInterval(7_200)),
                        ]
                    }
                    for purchase in lost where purchase.registeredAt == step {
                        guard let user = purchase.user else { continue }
                        try await Self.registerToken(of: purchase, user: user, h)
                    }
                    h.state.advance(by: 12 * 3_600)
                    let run = try await h.run(.run, verifier: router) { $0.feed = client }
                    #expect(run.counts.notificationsUnmatched == 0, "step \(step): \(run.counts)")
                    #expect(run.counts.feedFallback?.isEmpty ?? false, "step \(step): \(run.counts)")
                    month.notifications += run.counts.notifications
                    month.checked += run.counts.checked
                    month.changed += run.counts.changed
                }
                // Each genuine notification of the month is read once, however often it is listed (Apple
                // lists one signed at the very end of the read window in the next read).
                let genuine = (imported.map(\.receipt) + lost.map(\.receipt)).flatMap {
                    $0.notifications(until: h.state.now).filter { $0.signedDate > start && $0.signedDate < h.state.now }
                }
                #expect(month.notifications == genuine.count, "\(month)")
                #expect(month.changed > 100, "renewals, lapses, refunds and retries: \(month)")
                try await Self.checkEnd(h, client: client, lost: lost, imported: imported.map(\.receipt))
                #expect(
                    !(try await h.receipts()).contains {
                        [phantom.originalTransactionID, otherApp.originalTransactionID].contains(
                            $0.originalTransactionID)
                    })
                // The forged refund of a subscriber who renews changed nothing: Apple's state stands.
                let victim = try await h.receipts().first {
                    $0.originalTransactionID == imported[0].receipt.originalTransactionID
                }
                #expect(victim?.subscriptions.map(\.snapshot.state) == [.active])
                let all = imported.map(\.receipt) + lost.map(\.receipt)
                try await Self.discoverOnEmptyDatabase(h, backend: backend, client: client, registered: all)
            }
        }
    }

    static func registerToken(of purchase: Lost, user: String, _ h: JobHarness) async throws {
        let token = try #require(purchase.receipt.accountToken)
        let outcome = try await h.store.importReceipts(
            [ReceiptImport(userID: user, latestReceipt: nil, appAccountToken: token)], now: h.state.now)
        #expect(outcome == [.tokenRecorded], "\(user): \(outcome)")
    }

    /// The end of the month: every lost purchase held and checked, owners right, claims by order id.
    static func checkEnd(
        _ h: JobHarness, client: ServerAPIClient, lost: [Lost], imported: [SimulatedReceipt]
    ) async throws {
        let receipts = try await h.receipts()
        #expect(receipts.count == imported.count + lost.count, "\(receipts.count) rows")
        let adopted = try await DashboardViewsTests.query(h, "SELECT COUNT(*) AS n FROM adopted_purchases")
        #expect(adopted.first.flatMap { DashboardViewsTests.int($0, "n") } == lost.count, "adopted once each")
        let claims = try #require(h.store as? any PurchaseClaiming)
        for purchase in lost {
            let id = purchase.receipt.originalTransactionID
            let row = try #require(receipts.first { $0.originalTransactionID == id }, "\(purchase.receipt.account)")
            #expect(row.lastVerifiedAt != nil, "\(purchase.receipt.account) checked with Apple")
            let states = row.subscriptions.map(\.snapshot.state)
            #expect(!states.isEmpty, "\(purchase.receipt.account): Apple's state")
            // Bought 6 to 29 days before the end with 30-day periods: each is in its first paid period
            // (auto-renew off, or a billing retry still ahead), active as Apple says.
            #expect(states == [.active], "\(purchase.receipt.account) (\(purchase.receipt.scenario)): \(states)")
            if let user = purchase.user {
                #expect(row.userID == user, "\(purchase.receipt.account): its token's user")
                continue
            }
            #expect(row.userID == "adopted:" + id, "\(purchase.receipt.account) unclaimed")
            // Support's claim by the order id on the customer's receipt (what `renewal claim` does).
            let support = "month-support-" + purchase.receipt.account
            let lookup = await client.lookUpOrder(orderID: purchase.receipt.orderID, logger: h.logger)
            guard case .success(.found(_, let transactions, let refused)) = lookup else {
                Issue.record("order \(purchase.receipt.orderID): \(lookup)")
                continue
            }
            #expect(refused.isEmpty)
            let ids = Set(transactions.compactMap(\.originalTransactionId))
            #expect(ids == [id], "order \(purchase.receipt.orderID): \(ids)")
            for found in ids {
                let result = try await claims.claim(
                    originalTransactionID: found, user: support, reassign: false, method: .hand, runID: nil,
                    queueWebhooks: false, now: h.state.now)
                #expect(result.changed && result.previousOwner == nil, "\(result)")
            }
        }
        let after = try await h.receipts()
        for purchase in lost where purchase.user == nil {
            let row = after.first { $0.originalTransactionID == purchase.receipt.originalTransactionID }
            #expect(row?.userID == "month-support-" + purchase.receipt.account)
        }
        #expect(after.count == receipts.count, "claims add no rows")
    }

    /// A database that imported nothing: discover over the last 30 days adopts exactly the subscriptions
    /// with a notification in that window.
    static func discoverOnEmptyDatabase(
        _ h: JobHarness, backend: Backend, client: ServerAPIClient, registered: [SimulatedReceipt]
    ) async throws {
        let now = h.state.now
        let since = 30 * Self.day
        let expected = Set(
            registered.filter { receipt in
                receipt.notifications(until: now).contains {
                    $0.signedDate >= now.addingTimeInterval(-since) && $0.signedDate < now
                }
            }.map(\.originalTransactionID))
        #expect(expected.count > 100, "the window holds most of the population: \(expected.count)")
        try await Self.withEmptyStore(backend, directory: h.directory) { store in
            let progress = try #require(store as? any DiscoveryProgressStore)
            let held = try #require(store as? any HeldSubscriptionReading)
            let discovery = Discovery(
                feeds: [(app: nil, feed: client)], store: store, progress: progress, held: held,
                rules: EntitlementDecision.Rules(), queueWebhooks: false, logger: h.logger, clock: { now })
            let outcome = try await discovery.discover(since: since, now: now)
            #expect(outcome.failed.isEmpty, "\(outcome.failed)")
            // The two forged notifications are in the window too: refused, never adopted.
            #expect(outcome.refused == [.jwsUntrustedChain, .jwsUntrustedChain], "\(outcome.refused)")
            #expect(outcome.adopted == expected.count, "adopted \(outcome.adopted) of \(expected.count)")
            var found: Set<String> = []
            var cursor: ReceiptCursor?
            while true {
                let page = try await store.nextBatch(
                    .backfill(BackfillSelector(all: true)), after: cursor, limit: 100, lease: nil)
                found.formUnion(page.compactMap(\.originalTransactionID))
                guard let last = page.last else { break }
                cursor = last.cursor
            }
            #expect(found == expected, "missing \(expected.subtracting(found)), extra \(found.subtracting(expected))")
        }
    }

    /// A second, migrated database next to the harness's (a file on SQLite, a schema on PostgreSQL).
    static func withEmptyStore(
        _ backend: Backend, directory: String, _ body: (any SubscriptionStore) async throws -> Void
    ) async throws {
        switch backend {
        case .sqlite:
            let store = try SQLiteSubscriptionStore.open(path: directory + "/discover.sqlite", create: true)
            _ = try await store.migrate()
            try await body(store)
        case .postgres:
            let base = try #require(PostgresWorkersHarness.baseURL)
            let schema = "renewal_month_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
            let admin = try PostgresDatabase(url: base)
            // The name is ours (hex digits), so splicing it is safe; identifiers cannot be bound.
            _ = try await admin.withConnection { try $0.execute("CREATE SCHEMA \(schema)", []) }
            do {
                let store = try PostgresSubscriptionStore.open(url: url)
                _ = try await store.migrate()
                try await body(store)
            } catch {
                _ = try? await admin.withConnection { try $0.execute("DROP SCHEMA \(schema) CASCADE", []) }
                throw error
            }
            _ = try await admin.withConnection { try $0.execute("DROP SCHEMA \(schema) CASCADE", []) }
        }
    }
}
