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

    /// Limits `endpoint`'s requests of each app to `perSecond` on top of `serverAPIRateLimit`, as Apple limits
    /// each endpoint; nil lifts it. A bucket of `perSecond` requests filled again at `perSecond` a second: a
    /// client spaced at the rate is never refused (a few milliseconds of jitter included), a burst past the
    /// bucket is. Over it: HTTP 429 with `Retry-After` in UNIX milliseconds. No endpoint is limited by default.
    public func setEndpointRateLimit(_ endpoint: String, perSecond: Int?) {
        storage.withLock { $0.endpointRateLimits[endpoint] = perSecond.map { max(1, $0) } }
    }

    /// The per-endpoint limits set so far.
    public var endpointRateLimits: [String: Int] {
        storage.withLock { $0.endpointRateLimits }
    }

    /// Takes one request of `app` to `endpoint` from its bucket; returns when a 429 should lift, if the bucket
    /// is empty.
    func recordEndpointRequest(_ endpoint: String, app: String) -> Date? {
        let now = ContinuousClock.now
        let wall = Date()
        let key = endpoint + "#" + app
        return storage.withLock { storage -> Date? in
            guard let limit = storage.endpointRateLimits[endpoint] else { return nil }
            var bucket = storage.endpointBuckets[key] ?? EndpointBucket(tokens: Double(limit), at: now)
            bucket.tokens = min(Double(limit), bucket.tokens + (now - bucket.at).seconds * Double(limit))
            bucket.at = now
            defer { storage.endpointBuckets[key] = bucket }
            guard bucket.tokens >= 1 else {
                storage.serverAPIStats.rateLimited += 1
                return wall.addingTimeInterval((1 - bucket.tokens) / Double(limit))
            }
            bucket.tokens -= 1
            return nil
        }
    }

    /// The registered receipt whose purchase, or one of whose main subscription's renewals up to now, has
    /// the order ID `orderID`; nil when none has. Renewal orders come from an index of every registered
    /// receipt's renewals up to a little past the clock, built again when receipts are registered or the
    /// clock leaves its window (20,000 receipts take about half a second).
    func registered(orderID: String) -> SimulatedReceipt? {
        let now = self.now
        let (purchase, index) = storage.withLock { storage in
            (
                storage.orders[orderID],
                storage.renewalOrders.flatMap { $0.covers(storage.registryVersion, now) ? $0 : nil }
            )
        }
        if let purchase, let receipt = registered(transactionID: purchase) { return receipt }
        let renewals = index ?? buildRenewalOrderIndex(now: now)
        return renewals.orders[orderID].flatMap { registered(transactionID: $0) }
    }

    private func buildRenewalOrderIndex(now: Date) -> RenewalOrderIndex {
        let version = storage.withLock { $0.registryVersion }
        let receipts = registeredReceipts()
        // A day past the clock, or one period when shorter, so a window holds at most one more renewal each.
        let horizon = min(86_400, receipts.map(\.period).min() ?? 86_400)
        var orders: [String: String] = [:]
        for receipt in receipts {
            for renewal in receipt.renewalOrders(until: now.addingTimeInterval(horizon)) {
                orders[renewal.orderID] = receipt.originalTransactionID
            }
        }
        let index = RenewalOrderIndex(
            version: version, from: now, until: now.addingTimeInterval(horizon), orders: orders)
        storage.withLock { $0.renewalOrders = index }
        return index
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

/// Every registered receipt's renewal orders (order ID to original transaction id) for one registry version
/// and a window of the clock.
struct RenewalOrderIndex: Sendable {
    var version: Int
    var from: Date
    var until: Date
    var orders: [String: String]

    func covers(_ registryVersion: Int, _ now: Date) -> Bool {
        version == registryVersion && now >= from && now < until
    }
}

/// One app's requests left for one limited endpoint, as of `at`.
struct EndpointBucket: Sendable {
    var tokens: Double
    var at: ContinuousClock.Instant
}
