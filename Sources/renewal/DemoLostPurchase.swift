import AppStoreSimulator
import Foundation
import RenewalJob
import RenewalReports
import RenewalServerAPI
import RenewalSQL
import RenewalStorage

/// The demo's lost purchase (issue 44): a customer pays, but the app never sends the purchase to the
/// server, so the database holds no receipt and no token of hers. The next run adopts it from Apple's
/// change feed (`purchase_unclaimed`); support then finds it by the order ID on her e-mailed receipt
/// (`renewal lookup --order-id`) and attaches it to her (`renewal claim --order-id --user`).
extension DemoScript {
    /// The demo's customer whose purchase never reached the server.
    static let lostCustomer = "vera"

    /// Before run 9: the customer buys; Apple knows the purchase, the database does not.
    func losePurchase() -> SimulatedReceipt? {
        let lost = state.makeLostPurchases(count: 1, prefix: Self.lostCustomer, withToken: false).first
        print("")
        print(
            "\(Self.lostCustomer) buys com.example.pro.monthly on day 24; the app crashes before it sends the purchase "
                + "(no receipt, no appAccountToken): only Apple's change feed tells")
        return lost
    }

    /// After run 9: the customer writes to support with her order ID; support looks it up (unclaimed) and
    /// claims it for her, as `renewal lookup` and `renewal claim` do, on the demo's clock.
    func lookUpAndClaim(_ receipt: SimulatedReceipt, serverAPI: ServerAPIClient) async throws {
        let orderID = receipt.orderID
        let budget = LocalRequestBudget(rates: RequestRates())
        let order = try await OrderSupport.lookUp(
            orderID: orderID, clients: [nil: serverAPI], budget: budget, logger: logger)
        let held = try await OrderSupport.held(order, store: store)
        print("")
        print("\(Self.lostCustomer) writes to support: \"I paid but have no access\", order ID \(orderID)")
        print("renewal lookup --order-id \(orderID)")
        print(
            OrderOutput.text(order, held: held).split(separator: "\n").map { "  " + Self.trimmingTrailingSpaces($0) }
                .joined(separator: "\n"))
        print("renewal claim --order-id \(orderID) --user \(Self.lostCustomer)")
        for id in order.subscriptionIDs {
            let result = try await store.claim(
                originalTransactionID: id, user: Self.lostCustomer, reassign: false, method: .hand, runID: nil,
                queueWebhooks: false, now: state.now)
            print(
                "  Claimed \(id) for \(Self.lostCustomer): \(ClaimWork.describe(result)); "
                    + "purchase_claimed recorded, she is entitled")
        }
    }

    private static func trimmingTrailingSpaces(_ line: Substring) -> String {
        var line = line
        while line.last == " " { line.removeLast() }
        return String(line)
    }
}
