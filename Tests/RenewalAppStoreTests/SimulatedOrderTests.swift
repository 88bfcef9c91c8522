import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RenewalCore
import RenewalServerAPI
import Testing

/// The simulator's side of purchases the app's server never stored (issue 44), over real HTTP: order IDs and
/// Look Up Order ID, Set App Account Token, and the purchases tests make in bulk.
@Suite("Simulated lost purchases: order IDs, Look Up Order ID, Set App Account Token")
struct SimulatedOrderTests {
    let day = TestSupport.day
    let now = TestSupport.now

    @Test(
        "Order IDs look like Apple's (M and nine of A-Z, 2-9), stay the same for a receipt and differ between receipts")
    func orderIDs() {
        let receipts = (0..<2_000).map {
            SimulatedReceipt(account: "order-id-\($0)", scenario: .renewal, start: now)
        }
        let ids = receipts.map(\.orderID)
        #expect(Set(ids).count == ids.count)
        let allowed = Set("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        #expect(ids.allSatisfy { $0.count == 10 && $0.hasPrefix("M") && $0.allSatisfy(allowed.contains) })
        #expect(receipts[7].withAppAccountToken().orderID == ids[7])
        #expect(receipts[7].orderID(ofTransaction: receipts[7].originalTransactionID) == ids[7])
    }

    @Test(
        """
        Look Up Order ID answers status 0 with the order's verified transactions (the purchase's, a renewal's, \
        with the token the receipt has or none), status 1 for an unknown order or another environment's, 401 \
        without a token, and 429 with Retry-After past its own per-app limit
        """)
    func lookUpOrder() async throws {
        let state = SimulatorState(now: now)
        let tokened = SimulatedReceipt(account: "order-a", scenario: .renewal, start: now - 40 * day)
            .withAppAccountToken()
        let plain = SimulatedReceipt(account: "order-b", scenario: .renewal, start: now - 5 * day)
        let sandbox = SimulatedReceipt(account: "order-c", scenario: .sandbox, start: now - 5 * day)
        state.register([tokened, plain, sandbox])
        try await SimulatedAPICaller.with(state) { api in
            let purchase = try await api.lookUp(tokened.orderID)
            #expect(purchase.status == 0)
            #expect(purchase.transactions.map(\.transactionId) == [tokened.originalTransactionID])
            #expect(purchase.transactions.first?.transactionReason == "PURCHASE")
            #expect(purchase.transactions.first?.appAccountToken == tokened.accountToken)
            #expect(tokened.accountToken == tokened.appAccountToken)
            let renewalID = try #require(
                tokened.response(at: now, withHistory: true).latestReceiptInfo.compactMap(\.transactionID)
                    .first { $0 != tokened.originalTransactionID })
            let renewal = try await api.lookUp(tokened.orderID(ofTransaction: renewalID))
            #expect(renewal.status == 0)
            #expect(renewal.transactions.map(\.transactionId) == [renewalID])
            let untokened = try await api.lookUp(plain.orderID)
            #expect(untokened.status == 0 && untokened.transactions.count == 1)
            #expect(untokened.transactions.first?.appAccountToken == nil)
            let unknown = try await api.lookUp("MZZZZZZZZZ")
            #expect(unknown.status == 1 && unknown.body["signedTransactions"] == nil)
            #expect(try await api.lookUp(sandbox.orderID).status == 1)
            #expect(try await api.lookUp(sandbox.orderID, sandbox: true).status == 0)
            #expect(try await api.lookUp(plain.orderID, sandbox: true).status == 1)
            let path = "/inApps/v1/lookup/" + plain.orderID
            #expect(try await api.call(.GET, path, authorized: false).status == 401)
            #expect(state.serverAPIStats.orderLookups == 7)

            state.setEndpointRateLimit(SimulatorState.Endpoint.lookup, perSecond: 2)
            var answers: [(status: Int, headers: HTTPHeaders, sentAt: Int64)] = []
            for _ in 0..<10 {
                // The moment each was sent: a machine short of CPU may read the answers seconds later.
                let sentAt = AppleDateFormat.milliseconds(Date())
                let answer = try await api.call(.GET, path).statusAndHeaders
                answers.append((answer.status, answer.headers, sentAt))
            }
            #expect(answers.prefix(2).map(\.status) == [200, 200])
            let refused = try #require(answers.first { $0.status == 429 }, "\(answers.map(\.status))")
            let retryAfter = try #require(refused.headers.first(name: "Retry-After").flatMap(Int64.init))
            #expect(retryAfter >= refused.sentAt, "Retry-After is no earlier than the refused request")
        }
    }

    @Test(
        """
        For every scenario and age, Look Up Order ID finds the purchase's order (status 0, its transaction) when \
        Apple answers for the receipt, even once the answer lists only the current period, and each renewal's \
        order when the subscription renewed; an order of a renewal that never happened is invalid (status 1)
        """)
    func everyScenarioOrder() async throws {
        let state = SimulatorState(now: now)
        let receipts = Scenario.allCases.flatMap { scenario in
            [5.0, 40, 100].map {
                SimulatedReceipt(account: "every-\(scenario.rawValue)-\($0)", scenario: scenario, start: now - $0 * day)
            }
        }
        state.register(receipts)
        let silent: Set<Scenario> = [.accountNotFound, .notAuthentic, .malformed, .outage, .html200]
        let renewing: Set<Scenario> = [.renewal, .trial, .familyShared, .sandbox, .multiseat, .billingRecovery]
        let lapsed: Set<Scenario> = [.voluntaryExpiry, .legacyIOS6, .billingRetry, .gracePeriod]
        try await SimulatedAPICaller.with(state) { api in
            for receipt in receipts {
                let sandbox = receipt.scenario == .sandbox
                let purchase = try await api.lookUp(receipt.orderID, sandbox: sandbox)
                let expected = silent.contains(receipt.scenario) ? 1 : 0
                #expect(purchase.status == expected, "\(receipt.account)")
                if expected == 0 {
                    #expect(
                        purchase.transactions.map(\.transactionId) == [receipt.originalTransactionID],
                        "\(receipt.account)")
                }
                for renewal in receipt.renewalOrders(until: now) {
                    let status = try await api.lookUp(renewal.orderID, sandbox: sandbox).status
                    if renewing.contains(receipt.scenario) {
                        #expect(status == 0, "\(receipt.account) \(renewal.index)")
                    }
                    if lapsed.contains(receipt.scenario) { #expect(status == 1, "\(receipt.account) \(renewal.index)") }
                }
            }
        }
    }

    @Test(
        """
        Set App Account Token answers 200 and binds the token from then on: Get Transaction History and later \
        notifications carry it, earlier notifications keep none; a malformed id (4000008), a malformed UUID \
        (4000183), a renewal's id (4000187) and an unknown id (404, 4040010) are refused as Apple refuses them
        """)
    func setAppAccountToken() async throws {
        let state = SimulatorState(now: now)
        let receipt = SimulatedReceipt(account: "token-a", scenario: .renewal, start: now - 40 * day)
        state.register([receipt])
        let token = UUID().uuidString.lowercased()
        let original = receipt.originalTransactionID
        try await SimulatedAPICaller.with(state) { api in
            let before = try await api.historyTransactions(original)
            #expect(!before.isEmpty && before.allSatisfy { $0["appAccountToken"] == nil })
            let set = try await api.call(
                .PUT, "/inApps/v1/transactions/\(original)/appAccountToken", body: #"{"appAccountToken":"\#(token)"}"#)
            #expect(set.status == 200 && set.data.isEmpty)
            #expect(state.appAccountTokenChanges(of: original).map(\.token) == [token])
            state.advance(by: 25 * day)
            let after = try await api.historyTransactions(original)
            #expect(!after.isEmpty && after.allSatisfy { $0["appAccountToken"] as? String == token })
            let renewalInfo = try await api.statusRenewalInfo(original)
            #expect(renewalInfo.count == 1 && renewalInfo.allSatisfy { $0["appAccountToken"] as? String == token })
            let notified = try await api.notificationTransactions(from: now - 50 * day, to: now + 25 * day)
            let tokens = notified.map { ($0.type, $0.signedDate > now, $0.transaction["appAccountToken"] as? String) }
            #expect(tokens.count == 3, "\(tokens)")
            #expect(tokens.allSatisfy { _, later, seen in seen == (later ? token : nil) }, "\(tokens)")

            let renewalID = try #require(
                receipt.response(at: now, withHistory: true).latestReceiptInfo.compactMap(\.transactionID)
                    .first { $0 != original })
            let refusals: [(String, String, Int, Int)] = [
                ("abc", token, 400, 4_000_008), (original, "not-a-uuid", 400, 4_000_183),
                (renewalID, token, 400, 4_000_187), ("100000000000001", token, 404, 4_040_010),
            ]
            for (id, value, status, code) in refusals {
                let answer = try await api.call(
                    .PUT, "/inApps/v1/transactions/\(id)/appAccountToken", body: #"{"appAccountToken":"\#(value)"}"#)
                #expect(answer.status == status, "\(id) \(value)")
                #expect(answer.json["errorCode"] as? Int == code, "\(id) \(value)")
            }
            #expect(state.appAccountTokenChanges(of: original).count == 1)
        }
    }

    @Test(
        """
        Purchases the app never imports, made over the control route (without a token) and in Swift (with one), \
        are listed in Notification History as SUBSCRIBED INITIAL_BUY with their token, and found by their order ID
        """)
    func lostPurchases() async throws {
        let state = SimulatorState(now: now)
        let start = now - 2 * day
        let made = state.makeLostPurchases(count: 2, prefix: "lost-swift", start: start)
        #expect(made.allSatisfy { $0.accountToken == $0.appAccountToken })
        try await SimulatedAPICaller.with(state) { api in
            let ask =
                #"{"count": 3, "prefix": "lost-http", "with_token": false, "start_ms": \#(AppleDateFormat.milliseconds(start)), "spacing_seconds": 60}"#
            let answer = try await TestSupport.control(api.endpoints, "/lost-purchases", post: ask)
            let purchases = try #require(answer.body["purchases"] as? [[String: Any]])
            #expect(answer.status == 200 && purchases.count == 3)
            #expect(purchases.allSatisfy { $0["app_account_token"] == nil && ($0["order_id"] as? String)?.count == 10 })
            let expected = Dictionary(
                uniqueKeysWithValues: made.map { ($0.originalTransactionID, $0.accountToken) }
                    + purchases.compactMap { ($0["original_transaction_id"] as? String).map { ($0, String?.none) } })
            let notified = try await api.notificationTransactions(from: now - 3 * day, to: now)
            let bought = notified.filter { $0.type == "SUBSCRIBED/INITIAL_BUY" }
            #expect(bought.count == 5, "\(notified.map(\.type))")
            for item in bought {
                let id = try #require(item.transaction["originalTransactionId"] as? String)
                #expect(expected[id] == .some(item.transaction["appAccountToken"] as? String), "\(id)")
            }
            for order in made.map(\.orderID) + purchases.compactMap({ $0["order_id"] as? String }) {
                #expect(try await api.lookUp(order).status == 0, "\(order)")
            }
        }
    }
}
