import Foundation
import RenewalCore
import RenewalServerAPI

/// A token Set App Account Token bound to one subscription: from `at` on, its transactions and renewal
/// info carry `token` instead of the one set at purchase.
public struct SimulatedTokenChange: Codable, Sendable, Hashable {
    public var at: Date
    public var originalTransactionID: String
    /// A lowercased UUID.
    public var token: String

    public init(at: Date, originalTransactionID: String, token: String) {
        self.at = at
        self.originalTransactionID = originalTransactionID
        self.token = token
    }
}

/// Who bought it and on which order: the `appAccountToken` Apple carries in a subscription's transactions,
/// and the order ID on the customer's e-mailed receipt that Look Up Order ID is asked by. Support needs both
/// to find a purchase the app's server never stored.
extension SimulatedReceipt {
    /// The receipt with an `appAccountToken` set at purchase: `token` (lowercased), or by default the one
    /// derived from the account (`appAccountToken`), so tests can tell customers apart by it.
    public func withAppAccountToken(_ token: String? = nil) -> SimulatedReceipt {
        var receipt = self
        receipt.accountToken = (token ?? appAccountToken).lowercased()
        return receipt
    }

    /// The token Apple holds for the subscription `originalID` at `date`: the last Set App Account Token at
    /// or before it, else the one set at purchase; nil when there is none.
    public func appAccountToken(of originalID: String, at date: Date) -> String? {
        let changes = (accountTokenChanges ?? []).filter { $0.originalTransactionID == originalID && $0.at <= date }
        return changes.last?.token ?? accountToken
    }

    /// The order ID of the purchase of the main subscription, as on Apple's e-mailed receipt: ten characters,
    /// `M` then nine of `A`–`Z` and `2`–`9`, derived from the account.
    public var orderID: String { Self.orderCode("order#" + account) }

    /// The order ID of one of this customer's transactions: `orderID` for the purchase, else the transaction's
    /// own order (a renewal's, an add-on's).
    public func orderID(ofTransaction transactionID: String) -> String {
        originalTransactionIDs.contains(transactionID) ? orderID : Self.orderCode("order#" + transactionID)
    }

    /// The order IDs of this customer's renewals of the main subscription whose periods start by `until`
    /// (by the plain schedule, extensions aside), with each renewal's period index.
    public func renewalOrders(until: Date) -> [(orderID: String, index: Int)] {
        let periods = max(0, Int(until.timeIntervalSince(start) / period))
        guard periods >= 1 else { return [] }
        return (1...periods).map {
            (Self.orderCode("order#" + SimulatedIdentifier.id(account, "transaction", "", String($0))), $0)
        }
    }

    /// The Look Up Order ID answer for `orderID` at `now`: `{"status": 0, "signedTransactions": […]}` with the
    /// order's transactions signed by `signer` when this customer's order lists any on `sandboxEndpoint`'s
    /// environment, else `{"status": 1}` (Apple's "invalid order id"). A purchase or renewal the answer at
    /// `now` no longer lists (a scenario that shows only the current period) is taken from the answer of
    /// its own time.
    func lookupAnswer(orderID: String, at now: Date, sandboxEndpoint: Bool, signer: SigningChain) -> ServerAPIAnswer {
        let invalid = ServerAPIAnswer.json(Self.json(["status": 1]))
        let isSandbox = scenario == .sandbox
        guard isSandbox == sandboxEndpoint else { return invalid }
        switch scenario {
        case .accountNotFound, .notAuthentic, .malformed, .outage, .html200: return invalid
        default: break
        }
        var rows = orderRows(orderID, listedAt: now)
        if rows.isEmpty, orderID == self.orderID {
            rows = orderRows(orderID, listedAt: start)
        } else if rows.isEmpty, let renewal = renewalOrders(until: now).first(where: { $0.orderID == orderID }) {
            let during = start.addingTimeInterval((Double(renewal.index) + 0.5) * period)
            rows = during <= now ? orderRows(orderID, listedAt: during) : []
        }
        let environment = isSandbox ? "Sandbox" : "Production"
        let signed = rows.compactMap { row in
            try? signer.sign(Self.json(transactionPayload(row, environment: environment, now: now)))
        }
        guard !signed.isEmpty else { return invalid }
        return .json(Self.json(["status": 0, "signedTransactions": signed]))
    }

    /// The rows of order `orderID` that the answer at `date` (with history) lists, oldest first.
    private func orderRows(_ orderID: String, listedAt date: Date) -> [LatestReceiptInfo] {
        response(at: date, withHistory: true).latestReceiptInfo
            .filter { row in row.transactionID.map { self.orderID(ofTransaction: $0) == orderID } ?? false }
            .sorted {
                ($0.purchaseDate ?? .distantPast, $0.transactionID ?? "")
                    < ($1.purchaseDate ?? .distantPast, $1.transactionID ?? "")
            }
    }

    /// Ten characters shaped like Apple's order IDs, from FNV-1a of `seed`.
    static func orderCode(_ seed: String) -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var bits = SimulatedIdentifier.fnv1a(seed)
        var code = "M"
        for _ in 0..<9 {
            code.append(alphabet[Int(bits % 32)])
            bits /= 32
        }
        return code
    }

    /// Whether `text` is a UUID as Set App Account Token takes it (36 characters, hex and hyphens).
    static func isAppAccountToken(_ text: String) -> Bool {
        text.count == 36 && UUID(uuidString: text) != nil
    }
}
