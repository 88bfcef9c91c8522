import Foundation
import RenewalCore
import Synchronization

/// Purchases the app's server never stored, as support meets them: orders looked up by the ID on the
/// customer's e-mailed receipt, tokens bound after the fact, and bulk purchases for tests and the demo.
extension SimulatorState {
    /// The Server API endpoints with a limit of their own (`setEndpointRateLimit(_:perSecond:)`).
    public enum Endpoint {
        /// Look Up Order ID (Apple: 10 requests per second in production).
        public static let lookup = "lookup"
        /// Set App Account Token (Apple: 20 requests per second in production).
        public static let appAccountToken = "appAccountToken"
    }

    /// Limits `endpoint`'s requests to `perSecond` per app over its own one-second window, on top of
    /// `serverAPIRateLimit`, as Apple limits each endpoint; nil lifts it. Over it: HTTP 429 with
    /// `Retry-After` in UNIX milliseconds. No endpoint is limited by default.
    public func setEndpointRateLimit(_ endpoint: String, perSecond: Int?) {
        storage.withLock { $0.endpointRateLimits[endpoint] = perSecond.map { max(1, $0) } }
    }

    /// The per-endpoint limits set so far.
    public var endpointRateLimits: [String: Int] {
        storage.withLock { $0.endpointRateLimits }
    }

    /// Counts one request of `app` to `endpoint` against its own limit; returns when a 429 should lift,
    /// if this one is over it.
    func recordEndpointRequest(_ endpoint: String, app: String) -> Date? {
        let now = ContinuousClock.now
        let wall = Date()
        let key = endpoint + "#" + app
        return storage.withLock { storage -> Date? in
            guard let limit = storage.endpointRateLimits[endpoint] else { return nil }
            let windowStart = now - .seconds(1)
            storage.endpointArrivals[key, default: []].removeAll { $0 <= windowStart }
            let recent = storage.endpointArrivals[key, default: []]
            if recent.count >= limit, let oldest = recent.first {
                storage.serverAPIStats.rateLimited += 1
                return wall.addingTimeInterval((oldest + .seconds(1) - now).seconds)
            }
            storage.endpointArrivals[key, default: []].append(now)
            return nil
        }
    }

    /// The registered receipt whose purchase, or one of whose main subscription's renewals up to now, has
    /// the order ID `orderID`; nil when none has.
    func registered(orderID: String) -> SimulatedReceipt? {
        if let original = storage.withLock({ $0.orders[orderID] }), let receipt = registered(transactionID: original) {
            return receipt
        }
        let now = self.now
        return registeredReceipts().first { $0.mayHoldRenewalOrder(orderID, at: now) }
    }

    /// Binds `token` to the subscription `originalTransactionID` from the simulator clock's now on (Set App
    /// Account Token): its later transactions, renewal info and notifications carry it.
    public func setAppAccountToken(originalTransactionID: String, token: String) {
        let change = SimulatedTokenChange(
            at: now, originalTransactionID: originalTransactionID, token: token.lowercased())
        storage.withLock { $0.tokenChanges[originalTransactionID, default: []].append(change) }
    }

    /// Every token Set App Account Token bound to `originalTransactionID`, oldest first.
    public func appAccountTokenChanges(of originalTransactionID: String) -> [SimulatedTokenChange] {
        storage.withLock { $0.tokenChanges[originalTransactionID] ?? [] }
    }

    func countOrderLookup() { storage.withLock { $0.serverAPIStats.orderLookups += 1 } }

    func countAppAccountTokenSet() { storage.withLock { $0.serverAPIStats.appAccountTokenSets += 1 } }

    /// Makes and registers `count` purchases the app never imports, as Apple knows them: accounts
    /// `prefix-0` … (`renewal` subscriptions by default, bought at `start`, default the clock's now, each an
    /// hour after the previous one), with the derived `appAccountToken` when `withToken`. Notification
    /// History lists each from its `SUBSCRIBED` `INITIAL_BUY` on; `orderID` and `accountToken` of the
    /// returned receipts are what a support agent would be given.
    @discardableResult
    public func makeLostPurchases(
        count: Int, prefix: String = "lost", scenario: Scenario = .renewal, start: Date? = nil,
        spacing: TimeInterval = 3_600, withToken: Bool = true, period: TimeInterval = 30 * 86_400
    ) -> [SimulatedReceipt] {
        let first = start ?? now
        let receipts = (0..<max(0, count)).map { index in
            let receipt = SimulatedReceipt(
                account: "\(prefix)-\(index)", scenario: scenario,
                start: first.addingTimeInterval(Double(index) * spacing), period: period)
            return withToken ? receipt.withAppAccountToken() : receipt
        }
        register(receipts)
        return receipts
    }
}

extension SimulatorState.Storage {
    /// `receipt` with the tokens Set App Account Token bound to its subscriptions.
    func withTokenChanges(_ receipt: SimulatedReceipt) -> SimulatedReceipt {
        guard !tokenChanges.isEmpty else { return receipt }
        let changes = receipt.originalTransactionIDs.flatMap { tokenChanges[$0] ?? [] }.sorted { $0.at < $1.at }
        guard !changes.isEmpty else { return receipt }
        var changed = receipt
        changed.accountTokenChanges = changes
        return changed
    }
}
