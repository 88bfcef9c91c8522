import Foundation
import RenewalCore
import Synchronization

/// The simulator's mutable state, shared by the HTTP routes and in-process users (tests, the demo).
///
/// Thread-safe: everything sits behind one `Mutex`.
public final class SimulatorState: Sendable {
    /// A fault applied to every verifyReceipt request, whatever the receipt.
    public enum Fault: String, Codable, Sendable, CaseIterable {
        /// Answer normally.
        case none
        /// HTTP 503 with an HTML body.
        case outage
        /// HTTP 200 with an HTML page.
        case html200 = "html_200"
        /// HTTP 200 `{"status":21005}`.
        case status21005 = "status_21005"
    }

    /// A fixed answer for one account, replacing its scenario's (tests of odd or hostile answers).
    public struct ScriptedAnswer: Sendable, Hashable {
        public var httpStatus: Int
        public var contentType: String
        /// The bytes sent, as they are: they need not be UTF-8 or JSON.
        public var body: Data

        public init(httpStatus: Int = 200, contentType: String = "application/json", body: String) {
            self.init(httpStatus: httpStatus, contentType: contentType, bytes: Data(body.utf8))
        }

        public init(httpStatus: Int = 200, contentType: String = "application/json", bytes: Data) {
            self.httpStatus = httpStatus
            self.contentType = contentType
            self.body = bytes
        }

        /// A JSON object answered with HTTP 200 (`JSONSerialization` output of `object`).
        public static func json(_ object: [String: Any]) -> ScriptedAnswer {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return ScriptedAnswer(bytes: data)
        }
    }

    /// Request counters.
    public struct Stats: Codable, Sendable, Hashable {
        /// verifyReceipt requests on both endpoints.
        public var requests: Int
        /// Requests to the production endpoint.
        public var production: Int
        /// Requests to the sandbox endpoint.
        public var sandbox: Int
    }

    /// One Send Consumption Information request Apple accepted (HTTP 202).
    public struct ConsumptionAnswer: Sendable, Hashable {
        public var transactionID: String
        /// The body as sent, decoded.
        public var customerConsented: Bool?
        public var deliveryStatus: String?
        public var sampleContentProvided: Bool?
        public var consumptionPercentage: Int?
        public var refundPreference: String?
        /// The simulator clock when it arrived.
        public var receivedAt: Date
    }

    struct Storage {
        var base: Date?
        var offset: TimeInterval
        var fault: Fault = .none
        var latency: Duration = .zero
        var stats = Stats(requests: 0, production: 0, sandbox: 0)
        var attempts: [String: Int] = [:]
        var received: [String: String] = [:]
        var scripts: [String: ScriptedAnswer] = [:]
        var registry: [String: SimulatedReceipt] = [:]
        var serverAPIStats = ServerAPIStats()
        var serverAPIAttempts: [String: Int] = [:]
        /// Per app (the token's `bid`): Apple's limits are per app.
        var arrivals: [String: [ContinuousClock.Instant]] = [:]
        var arrivalDates: [Date] = []
        var arrivalsByApp: [String: [Date]] = [:]
        var serverAPIRateLimit: Int?
        var notificationDelay: TimeInterval = 0
        var feedFault: FeedFault = .none
        var feedRequests = 0
        var feedDuplicatePercent = 0
        var askedForHistory: [String: Bool] = [:]
        var forgedNotifications: [SimulatedNotification] = []
        var unreadableNotifications: [SimulatedNotification] = []
        var historyPageSize = 20
        var historyRevisions: [String?] = []
        var consumptionAnswers: [ConsumptionAnswer] = []
        /// Every Extend a Subscription Renewal Date request's identifier, in order, repeats included.
        var extensionRequests: [String] = []
        /// The answer given to each request identifier, so a repeated one gets it again.
        var extensionAnswers: [String: ServerAPIAnswer] = [:]
        var extensionAnswerDelay: Duration = .zero
        var massExtensions: [SimulatedMassExtension] = []
        var massExtensionDuration: TimeInterval = 2 * 3_600
        /// Each registered purchase's order ID, to the original transaction id of its main subscription.
        var orders: [String: String] = [:]
        /// Bumped by every `register`; the renewal orders' index is of one version and clock window.
        var registryVersion = 0
        var renewalOrders: RenewalOrderIndex?
        /// Set App Account Token's changes, by original transaction id, oldest first.
        var tokenChanges: [String: [SimulatedTokenChange]] = [:]
        /// Per-endpoint limits (`SimulatorState.Endpoint`), each a bucket per app.
        var endpointRateLimits: [String: Int] = [:]
        var endpointBuckets: [String: EndpointBucket] = [:]
    }

    /// A fault of Notification History alone (the status endpoint keeps answering).
    public enum FeedFault: String, Sendable, Codable, CaseIterable {
        case none
        /// HTTP 503 with an HTML page.
        case outage
        /// HTTP 429 with `Retry-After` a minute ahead.
        case rateLimited = "rate_limited"
        /// Empty history: an app with no Server Notifications V2 URL, whose history Apple leaves empty.
        case silent
        /// Every notification listed twice, one after the other (across a page break too).
        case duplicated
        /// Newest first: a page may hold a notification before the ones that preceded it.
        case reordered
    }

    let storage: Mutex<Storage>

    /// Creates the state.
    /// - Parameters:
    ///   - now: a fixed clock start; nil (the default) follows the wall clock.
    ///   - offset: seconds added to the clock (the executable's `--clock-offset-seconds`).
    public init(now: Date? = nil, offset: TimeInterval = 0) {
        storage = Mutex(Storage(base: now, offset: offset))
    }

    /// The simulator clock: the fixed start (or the wall clock) plus every `advance(by:)`.
    public var now: Date {
        storage.withLock { ($0.base ?? Date()).addingTimeInterval($0.offset) }
    }

    /// Moves the clock forward (or back, with a negative interval).
    public func advance(by interval: TimeInterval) {
        storage.withLock { $0.offset += interval }
    }

    /// Sets the clock to `date` and freezes it there.
    public func set(_ date: Date) {
        storage.withLock {
            $0.base = date
            $0.offset = 0
        }
    }

    /// The global fault for every verifyReceipt request (for circuit-breaker tests).
    public var fault: Fault {
        get { storage.withLock { $0.fault } }
        set { storage.withLock { $0.fault = newValue } }
    }

    /// Extra delay before every verifyReceipt answer.
    public var latency: Duration {
        get { storage.withLock { $0.latency } }
        set { storage.withLock { $0.latency = newValue } }
    }

    /// The request counters so far.
    public var stats: Stats {
        storage.withLock { $0.stats }
    }

    /// The last `receipt-data` received for `account`, nil if none.
    public func lastReceived(account: String) -> String? {
        storage.withLock { $0.received[account] }
    }

    /// How many verifyReceipt requests named `account` so far.
    public func attempts(account: String) -> Int {
        storage.withLock { $0.attempts[account] ?? 0 }
    }

    /// Answers every request for `account` with `answer` (after the shared-secret check) until
    /// cleared with nil.
    public func script(account: String, _ answer: ScriptedAnswer?) {
        storage.withLock { $0.scripts[account] = answer }
    }

    /// The scripted answer for `account`, if any.
    func scripted(account: String) -> ScriptedAnswer? {
        storage.withLock { $0.scripts[account] }
    }

    /// Counts one verifyReceipt request.
    func recordRequest(sandbox: Bool) {
        storage.withLock {
            $0.stats.requests += 1
            if sandbox { $0.stats.sandbox += 1 } else { $0.stats.production += 1 }
        }
    }

    /// Whether the last verifyReceipt request for `account` asked for every transaction
    /// (`exclude-old-transactions` false); nil before the first.
    public func askedForHistory(account: String) -> Bool? {
        storage.withLock { $0.askedForHistory[account] }
    }

    /// Records a receipt for its account and returns the attempt number (1 for the first request).
    func recordReceipt(account: String, receiptData: String, withHistory: Bool = false) -> Int {
        storage.withLock {
            $0.received[account] = receiptData
            $0.askedForHistory[account] = withHistory
            let attempt = ($0.attempts[account] ?? 0) + 1
            $0.attempts[account] = attempt
            return attempt
        }
    }

    // MARK: - App Store Server API

    /// Makes `receipts` known by their original transaction ids, as Apple knows every transaction it
    /// issued. verifyReceipt requests register their receipt too.
    public func register(_ receipts: [SimulatedReceipt]) {
        storage.withLock { storage in
            for receipt in receipts {
                for id in receipt.originalTransactionIDs { storage.registry[id] = receipt }
                storage.orders[receipt.orderID] = receipt.originalTransactionID
            }
            storage.registryVersion += 1
        }
    }

    /// Every registered receipt, once each.
    func registeredReceipts() -> [SimulatedReceipt] {
        storage.withLock { storage in
            var seen: Set<String> = []
            return storage.registry.values.filter { seen.insert($0.account).inserted }
                .map { storage.withTokenChanges($0) }
        }
    }

    /// Seconds between a notification's `signedDate` and its appearance in Notification History
    /// (Apple indexes some late).
    public var notificationDelay: TimeInterval {
        get { storage.withLock { $0.notificationDelay } }
        set { storage.withLock { $0.notificationDelay = newValue } }
    }

    /// A fault of the Notification History endpoint alone.
    public var feedFault: FeedFault {
        get { storage.withLock { $0.feedFault } }
        set { storage.withLock { $0.feedFault = newValue } }
    }

    /// Transactions per page of Get Transaction History (Apple's is 20).
    public var historyPageSize: Int {
        get { storage.withLock { $0.historyPageSize } }
        set { storage.withLock { $0.historyPageSize = max(1, newValue) } }
    }

    /// The revision of each Get Transaction History request answered so far, in order (nil: a first page).
    public var historyRevisions: [String?] {
        storage.withLock { $0.historyRevisions }
    }

    func recordHistoryRequest(revision: String?) {
        storage.withLock {
            $0.historyRevisions.append(revision)
            $0.serverAPIStats.history += 1
        }
    }

    /// The registered receipt one of whose transactions (the purchase or a renewal) is `transactionID`.
    func registered(anyTransactionID transactionID: String) -> SimulatedReceipt? {
        if let receipt = registered(transactionID: transactionID) { return receipt }
        let now = self.now
        return registeredReceipts().first { $0.owns(transactionID: transactionID, at: now) }
    }

    /// The share of notifications (0–100, chosen by uuid) Notification History lists twice.
    public var feedDuplicatePercent: Int {
        get { storage.withLock { $0.feedDuplicatePercent } }
        set { storage.withLock { $0.feedDuplicatePercent = newValue } }
    }

    /// Notifications Apple never sent, listed in Notification History beside the real ones, signed by
    /// a chain nobody trusts (`SimulatedNotification.forgedRefund(of:at:)`).
    public var forgedNotifications: [SimulatedNotification] {
        get { storage.withLock { $0.forgedNotifications } }
        set { storage.withLock { $0.forgedNotifications = newValue } }
    }

    /// Notifications Apple signed whose signed transaction the job cannot decode, listed in Notification
    /// History beside the real ones (`SimulatedNotification.unreadable(of:at:)`).
    public var unreadableNotifications: [SimulatedNotification] {
        get { storage.withLock { $0.unreadableNotifications } }
        set { storage.withLock { $0.unreadableNotifications = newValue } }
    }

    /// Notification History requests answered so far (any answer).
    public var feedRequests: Int { storage.withLock { $0.feedRequests } }

    func countFeedRequest() { storage.withLock { $0.feedRequests += 1 } }

    /// The receipt holding `transactionID`, if registered.
    func registered(transactionID: String) -> SimulatedReceipt? {
        storage.withLock { storage in storage.registry[transactionID].map { storage.withTokenChanges($0) } }
    }

    /// Server API request counters so far.
    public var serverAPIStats: ServerAPIStats {
        storage.withLock { $0.serverAPIStats }
    }

    /// The wall-clock arrival time of every Server API request (the last 100,000), oldest first,
    /// whatever it was answered: what a rate-limit test counts per second.
    public var serverAPIArrivals: [Date] {
        storage.withLock { $0.arrivalDates }
    }

    /// `serverAPIArrivals` by app (the bundle id the request's token named).
    public var serverAPIArrivalsByApp: [String: [Date]] {
        storage.withLock { $0.arrivalsByApp }
    }

    /// Apple's limit, simulated: more than this many Server API requests of one app in any second are
    /// answered HTTP 429 with `Retry-After` in UNIX milliseconds. Nil (the default): no limit.
    public var serverAPIRateLimit: Int? {
        get { storage.withLock { $0.serverAPIRateLimit } }
        set { storage.withLock { $0.serverAPIRateLimit = newValue } }
    }

    /// Counts one Server API request of `app`; returns when a 429 should lift, if this one is over
    /// the app's limit.
    func recordServerAPIRequest(sandbox: Bool, app: String = SimulatedReceipt.bundleID) -> Date? {
        let now = ContinuousClock.now
        let wall = Date()
        return storage.withLock { storage -> Date? in
            storage.serverAPIStats.requests += 1
            if sandbox { storage.serverAPIStats.sandbox += 1 } else { storage.serverAPIStats.production += 1 }
            storage.arrivalDates.append(wall)
            if storage.arrivalDates.count > 100_000 { storage.arrivalDates.removeFirst(10_000) }
            storage.arrivalsByApp[app, default: []].append(wall)
            if storage.arrivalsByApp[app, default: []].count > 100_000 {
                storage.arrivalsByApp[app, default: []].removeFirst(10_000)
            }
            if let limit = storage.serverAPIRateLimit {
                let windowStart = now - .seconds(1)
                let recent = storage.arrivals[app, default: []].reversed().prefix { $0 > windowStart }
                if recent.count >= limit, let oldest = recent.last {
                    storage.serverAPIStats.rateLimited += 1
                    return wall.addingTimeInterval((oldest + .seconds(1) - now).seconds)
                }
            }
            storage.arrivals[app, default: []].append(now)
            if storage.arrivals[app, default: []].count > 100_000 {
                storage.arrivals[app, default: []].removeFirst(10_000)
            }
            return nil
        }
    }

    enum ServerAPIRefusal { case unauthorized, notFound }

    func countServerAPI(_ refusal: ServerAPIRefusal) {
        storage.withLock {
            switch refusal {
            case .unauthorized: $0.serverAPIStats.unauthorized += 1
            case .notFound: $0.serverAPIStats.notFound += 1
            }
        }
    }

    /// Server API status requests that named `account` so far.
    public func serverAPIRequests(account: String) -> Int {
        storage.withLock { $0.serverAPIAttempts[account] ?? 0 }
    }

    /// The Server API request number for `account` (1 for the first).
    func recordServerAPIAttempt(account: String) -> Int {
        storage.withLock {
            let attempt = ($0.serverAPIAttempts[account] ?? 0) + 1
            $0.serverAPIAttempts[account] = attempt
            return attempt
        }
    }
}
