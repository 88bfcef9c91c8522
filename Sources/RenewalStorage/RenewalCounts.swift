/// The counts of one run, as the report, the `runs` table and the log summary show them.
public struct RenewalCounts: Sendable, Hashable, Codable {
    /// Receipts Apple was asked about (one call per receipt, whatever it holds).
    public var checked = 0
    /// Entitlement change events (the length of the report's `changes`).
    public var changed = 0
    /// Receipts whose check changed at least one entitlement.
    public var receiptsChanged = 0
    /// Receipts checked with no change.
    public var unchanged = 0
    /// Receipts that could not be verified (the length of `failures`); they keep their state.
    public var failed = 0
    /// Receipts Apple rejects (21003, 21010, persistent 21002).
    public var invalid = 0
    /// `shared_apple_id` conflicts (the length of `conflicts`).
    public var conflicts = 0
    /// Receipts claimed but left exactly as they were (circuit breaker, shutdown, 21004).
    public var skipped = 0
    /// Results not written because the receipt's lease had passed to another worker (this one was
    /// slower than its lease, or was presumed dead); that worker's check stands.
    public var leaseLost = 0
    /// Leases taken back at start (and during the run) from processes that died holding them.
    public var recoveredLeases = 0
    /// Due receipts no lease held when the run ended: work left behind that it could have taken.
    public var dueLeft = 0
    /// Due receipts when a `run` began (nil for backfills and dry runs): the backlog it started from.
    public var dueAtStart: Int?
    /// Receipts this run moved to the App Store Server API (their first valid answer from it).
    public var migrated = 0
    /// Notifications this run read from Apple's change feed (Notification History) for the first
    /// time, verified.
    public var notifications = 0
    /// Of those, notifications whose signed data this run applied to their subscription without
    /// asking Apple again (their changes count in `changed`; they are not checks, so `checked`,
    /// `receipts_changed` and `unchanged` leave them out).
    /// The others about known subscriptions were older than the database (nothing to do) or made
    /// their receipt due for a check.
    public var notificationsApplied = 0
    /// Of those, notifications about a subscription the database does not know (a receipt never
    /// imported): counted and listed, never fatal.
    public var notificationsUnmatched = 0
    /// How far behind the change feed is when the run starts its checks: now minus where the last
    /// completed read ends, the largest over the environments (about 0 after a good read; the age of
    /// the last good one when the read failed). Whole milliseconds; nil when the run read no feed.
    public var feedLagSeconds: Double?
    /// The environments this run polled on today's schedule instead of the change feed's, and why
    /// (`not_configured`, `pull_failed`, `rate_limited`, `lagging`, `gap`, `silent`); empty when
    /// the feed was healthy everywhere, nil for runs that judge no feed (dry runs).
    public var feedFallback: [String: String]?
    /// Webhooks this run delivered (2xx); nil when it delivered none because none are configured.
    public var delivered: Int?
    /// Webhook attempts this run made that did not deliver (retried later, or given up).
    public var deliveryFailed: Int?
    /// How long the oldest change still undelivered after the run has waited, in seconds (0 when none).
    public var oldestUndeliveredSeconds: Double?
    /// Apps (of several in the apps file) whose credentials Apple rejected in this run, with why
    /// (`shared_secret_rejected`: 21004; `credentials_rejected`: HTTP 401 from the App Store Server
    /// API). Their rows were left untouched; the other apps' were checked. Nil when none was stopped.
    public var appsStopped: [String: String]?
    /// Transactions read from Get Transaction History after the due work and recorded in the ledger
    /// (mostly earlier periods it lacked; one it held already is brought up to date, never doubled).
    public var historyTransactions = 0
    /// Subscriptions whose history this run completed (Apple said there was no more).
    public var historyCompleted = 0
    /// Refund requests (`CONSUMPTION_REQUEST`) this run read from the change feed for the first time.
    public var refundRequests = 0
    /// Refund requests this run answered (Apple accepted the consumption information).
    public var refundRequestsAnswered = 0
    /// Refund requests this run left unanswered because the app recorded no consent for the customer.
    public var refundRequestsUnanswered = 0
    /// Refund requests whose 12 hours passed without an answer, found by this run: alerted on.
    public var refundRequestsMissed = 0
    /// Mass renewal-date extensions (`renewal extend --product`) Apple reported complete to this run.
    public var massExtensionsCompleted = 0
    /// Refund request answers this run tried that failed: Apple refused them (a 4xx, recorded, not sent
    /// again), or an outage, a rate limit or a missing key left them for a later run.
    public var refundRequestsFailed = 0
    /// Get Transaction History reads that failed in this run (Apple failed or refused a page); the next run
    /// resumes where each stopped.
    public var historyFailed = 0
    /// Mass renewal-date extensions this run could not follow (Apple did not give their status, or did not
    /// accept a request sent again); the next run asks again.
    public var massExtensionsFailed = 0
    /// Verified notifications from the change feed whose `data` could not be decoded: they changed nothing.
    public var notificationsFailed = 0

    /// Failures of the run's work besides the receipt checks (refund answers failed or missed, history
    /// reads, mass-extension follow-ups, undecodable notifications): any ends the run
    /// `completed_with_failures`.
    public var otherFailures: Int {
        refundRequestsFailed + refundRequestsMissed + historyFailed + massExtensionsFailed + notificationsFailed
    }

    public init() {}

    enum CodingKeys: String, CodingKey {
        case checked, changed, unchanged, failed, invalid, conflicts, skipped
        case receiptsChanged = "receipts_changed"
        case leaseLost = "lease_lost"
        case recoveredLeases = "recovered_leases"
        case dueLeft = "due_left"
        case dueAtStart = "due_at_start"
        case migrated, notifications
        case notificationsUnmatched = "notifications_unmatched"
        case notificationsApplied = "notifications_applied"
        case feedLagSeconds = "feed_lag_seconds"
        case feedFallback = "feed_fallback"
        case delivered
        case deliveryFailed = "delivery_failed"
        case oldestUndeliveredSeconds = "oldest_undelivered_seconds"
        case appsStopped = "apps_stopped"
        case historyTransactions = "history_transactions"
        case historyCompleted = "history_completed"
        case refundRequests = "refund_requests"
        case refundRequestsAnswered = "refund_requests_answered"
        case refundRequestsUnanswered = "refund_requests_unanswered"
        case refundRequestsMissed = "refund_requests_missed"
        case massExtensionsCompleted = "mass_extensions_completed"
        case refundRequestsFailed = "refund_requests_failed"
        case historyFailed = "history_failed"
        case massExtensionsFailed = "mass_extensions_failed"
        case notificationsFailed = "notifications_failed"
    }
}

extension RenewalCounts {
    /// `feedFallback` as `runs.feed_fallback` holds it: `Environment=reason` pairs joined by commas,
    /// sorted (`Production=pull_failed,Sandbox=silent`); empty when healthy everywhere.
    package var feedFallbackText: String? {
        get { feedFallback.map(Self.pairsText) }
        set { feedFallback = newValue.map(Self.pairs) }
    }

    /// `appsStopped` as `runs.apps_stopped` holds it: `bundle=reason` pairs, like `feedFallbackText`.
    package var appsStoppedText: String? {
        get { appsStopped.map(Self.pairsText) }
        set { appsStopped = newValue.map(Self.pairs) }
    }

    private static func pairsText(_ pairs: [String: String]) -> String {
        pairs.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
    }

    private static func pairs(_ text: String) -> [String: String] {
        Dictionary(
            text.split(separator: ",").compactMap { pair -> (String, String)? in
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { return nil }
                return (String(parts[0]), String(parts[1]))
            },
            uniquingKeysWith: { first, _ in first })
    }
}
