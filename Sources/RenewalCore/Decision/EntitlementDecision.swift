import Foundation

/// What Apple's answer about one receipt means: the rows to write, and how the run counts it. The one
/// place an entitlement is decided, a pure function of (stored rows, screened answer, owners, context):
/// no I/O, no clock. The job takes it once per answer; when the answer claims subscriptions the
/// receipt does not hold yet, storage takes it inside the writing transaction with the owners it read
/// there (`Request`), so exactly one receipt wins a subscription that racing workers both claim.
///
/// The evidence rules (docs/operating.md, "What it guarantees"):
/// - Only a valid answer moves an entitlement; `.transient` answers keep every row as it was.
/// - 21002 and 21003 never take away what a valid answer granted: a receipt verified before is never
///   invalidated by them. A never-verified receipt becomes `invalid` only after
///   `malformedChecksBeforeInvalid` rejections in a row spread over `rejectionSpanBeforeInvalid`.
///   21010 (account gone) invalidates at once.
/// - Every subscription stored for the receipt is derived again on each valid answer; one the answer
///   no longer lists keeps its last known expiry and loses its entitlement when that passes
///   (`expired_unlisted`).
/// - A subscription the latest transactions do not list is derived from the receipt's `in_app` rows
///   or `pending_renewal_info` (a churned subscriber is `expired`, not "no subscription"); such
///   partial evidence never grants access past the expiry it states (no renewal-pending grace), and
///   when it states an earlier expiry than the stored one, the subscription counts as unlisted.
/// - An active subscription whose renewal Apple has not posted yet (expired, auto-renew on, no
///   expiration intent, no billing retry) stays active for `renewalPendingWindow`, checked every
///   `renewalPendingInterval`.
/// - An answer for another bundle, or only for unknown products, changes nothing.
/// - A valid receipt holding no auto-renewable subscription is recorded once (`no_subscription`),
///   not as a failure, and checked rarely.
/// - A subscription another user already owns is not written: it is a `shared_apple_id` conflict.
public struct EntitlementDecision: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        /// Apple answered with evidence; entitlements may or may not have changed.
        case verified
        /// Apple rejects the receipt for good (see the type's rules).
        case invalid
        /// No usable result; the state stays. `outage` feeds the circuit breaker.
        case failed(outage: Bool)
    }

    /// The policies a decision follows, resolved once per run.
    public struct Rules: Sendable, Hashable {
        /// When to check next, and the bounds of the renewal-pending and rejection rules.
        public var schedule: SchedulePolicy
        /// The app's bundle id and products; answers about anything else change nothing. With
        /// several apps (`apps`), unused.
        public var identity: AppIdentity
        /// Several apps (the apps file), by bundle id: an answer must name one of them, and is
        /// screened with that app's products. Empty: one app, `identity`.
        public var apps: [String: AppIdentity] = [:]
        /// The change feeds healthy this run (an environment's, of an app with several): a subscription
        /// there that the App Store Server API answered for is scheduled on the feed's schedule
        /// (`SchedulePolicy.Mode`).
        public var feedStreams: Set<FeedStream>

        public init(
            schedule: SchedulePolicy = SchedulePolicy(), identity: AppIdentity = AppIdentity(),
            apps: [String: AppIdentity] = [:], feedStreams: Set<FeedStream> = []
        ) {
            self.schedule = schedule
            self.identity = identity
            self.apps = apps
            self.feedStreams = feedStreams
        }
    }

    public var outcome: Outcome
    public var update: ReceiptUpdate

    public var changes: [SubscriptionEvent] { update.changes }
    public var failure: CheckFailure? { update.failure }
}

extension EntitlementDecision {
    /// What a decision reads besides the receipt and the answer: the instant, the run, the rules.
    public struct Context: Sendable, Hashable {
        public var now: Date
        /// A value in 0..<1 for failure-backoff jitter.
        public var random: Double
        /// The run writing the result; nil outside a stored run (dry runs).
        public var runID: String?
        /// The worker whose lease must still hold the receipt when the result is written.
        public var leaseOwner: String?
        /// Each change is also queued in the webhook outbox (a webhook URL is set, not a dry run).
        public var queueWebhooks: Bool
        public var rules: Rules

        public init(
            now: Date, random: Double, runID: String?, leaseOwner: String?, queueWebhooks: Bool = false,
            rules: Rules
        ) {
            self.now = now
            self.random = random
            self.runID = runID
            self.leaseOwner = leaseOwner
            self.queueWebhooks = queueWebhooks
            self.rules = rules
        }
    }

    /// A decision waiting for the owners of the subscriptions its answer claims, read in the
    /// transaction that writes it (`claims`).
    public struct Request: Sendable, Hashable {
        public var receipt: StoredReceipt
        public var answer: ScreenedAnswer
        public var context: Context

        public init(receipt: StoredReceipt, answer: ScreenedAnswer, context: Context) {
            self.receipt = receipt
            self.answer = answer
            self.context = context
        }

        /// The subscriptions of the answer this receipt does not hold yet.
        public var claims: [String] { answer.claims(of: receipt) }

        /// The decision, given the owners of the claimed subscriptions that another receipt holds.
        public func decide(owners: [String: SubscriptionOwner]) -> EntitlementDecision {
            EntitlementDecision(receipt: receipt, answer: answer, owners: owners, context: context)
        }
    }

    /// Decides what to write for `receipt` given Apple's screened `answer`.
    ///
    /// - Parameter owners: the owners of the answer's subscriptions that this receipt does not hold
    ///   yet, read in the transaction that writes the result.
    public init(
        receipt: StoredReceipt, answer: ScreenedAnswer, owners: [String: SubscriptionOwner], context: Context
    ) {
        let update = ReceiptUpdate(
            unchanged: receipt, runID: context.runID, checkedAt: context.now, leaseOwner: context.leaseOwner,
            queueWebhooks: context.queueWebhooks)
        switch answer {
        case .verified(let evidence):
            self = Self.apply(evidence, to: receipt, update: update, owners: owners, context: context)
        case .notThisApp(let screening):
            self = Self.fail(update, screening.checkFailure, outage: false, context: context)
        case .rejected(let rejection):
            self = Self.reject(receipt, rejection, update: update, context: context)
        case .transient(let failure, let isOutage):
            self = Self.fail(update, failure, outage: isOutage, context: context)
        case .misconfigured(let failure):
            // The run stops on these before writing; should one reach here, it changes nothing.
            self = Self.fail(update, failure, outage: false, context: context)
        }
    }

    /// No usable result: the state stays, the failure is counted and the receipt retried later.
    private static func fail(_ update: ReceiptUpdate, _ failure: CheckFailure, outage: Bool, context: Context)
        -> EntitlementDecision
    {
        var update = update
        update.consecutiveFailures += 1
        update.failure = failure
        update.nextCheckAt = context.rules.schedule.nextCheckAfterFailure(
            consecutiveFailures: update.consecutiveFailures, now: context.now, random: context.random)
        return EntitlementDecision(outcome: .failed(outage: outage), update: update)
    }

    /// Apple refuses the receipt: 21010 invalidates at once; 21002 and 21003 never take away what a
    /// valid answer granted, and invalidate a never-verified receipt only after enough of them.
    private static func reject(
        _ receipt: StoredReceipt, _ rejection: AppleRejection, update: ReceiptUpdate, context: Context
    ) -> EntitlementDecision {
        let schedule = context.rules.schedule
        let now = context.now
        var update = update
        if rejection.kind == .accountNotFound {
            return invalidate(receipt, update: update, environment: rejection.environment, context: context)
        }
        // 21002 across many receipts is Apple's trouble as often as the receipt's: it counts toward the
        // breaker. 21003 speaks about this receipt only.
        let outage = rejection.kind == .malformedOrTemporary
        let what =
            """
            Apple answered \(rejection.status.rawValue) \
            (\(rejection.kind == .malformedOrTemporary ? "malformed or temporary" : "not authentic"))
            """
        if receipt.wasVerified {
            update.consecutiveMalformed = 0
            update.rejectedSince = nil
            let failure = CheckFailure(
                reason: rejection.reason,
                message:
                    """
                    \(what) for a receipt Apple verified before; its subscriptions keep their state and it is \
                    retried later.
                    """
            )
            return fail(update, failure, outage: outage, context: context)
        }
        update.consecutiveMalformed += 1
        let since = receipt.rejectedSince ?? now
        update.rejectedSince = since
        if update.consecutiveMalformed >= schedule.malformedChecksBeforeInvalid,
            now.timeIntervalSince(since) >= schedule.rejectionSpanBeforeInvalid
        {
            return invalidate(receipt, update: update, environment: rejection.environment, context: context)
        }
        let days = schedule.rejectionSpanBeforeInvalid / 86_400
        let failure = CheckFailure(
            reason: rejection.reason,
            message:
                """
                \(what) on check \(update.consecutiveMalformed); a never-verified receipt is marked invalid after \
                \(schedule.malformedChecksBeforeInvalid) such checks over \(days.formatted()) days.
                """
        )
        return fail(update, failure, outage: outage, context: context)
    }

    /// Apple rejects the receipt for good: every stored subscription, or the never-verified
    /// placeholder, becomes `invalid` (not entitled).
    private static func invalidate(
        _ receipt: StoredReceipt, update: ReceiptUpdate, environment: AppStoreEnvironment?, context: Context
    ) -> EntitlementDecision {
        var update = update
        let now = context.now
        let next = now.addingTimeInterval(context.rules.schedule.dormantInterval)
        // Only verifyReceipt rejects a receipt (the Server API answers about transactions).
        update.source = .verifyReceipt
        update.status = .invalid
        update.environment = receipt.environment ?? environment
        update.verifiedAt = now
        update.consecutiveFailures = 0
        update.nextCheckAt = next
        if receipt.subscriptions.isEmpty, receipt.status != .invalid,
            let event = SubscriptionEvent.invalidation(of: nil)
        {
            update.changes.append(event)
        }
        for stored in receipt.subscriptions {
            if let event = SubscriptionEvent.invalidation(of: stored.snapshot) { update.changes.append(event) }
            var snapshot = stored.snapshot
            snapshot.state = .invalid
            snapshot.gracePeriodExpiresAt = nil
            update.subscriptions.append(StoredSubscription(snapshot: snapshot, lastVerifiedAt: now, nextCheckAt: next))
        }
        return EntitlementDecision(outcome: .invalid, update: update)
    }
}

extension StoredReceipt {
    /// Whether a valid answer was ever read for this receipt (it then holds subscriptions, or was
    /// found to hold none).
    var wasVerified: Bool {
        status == .verified || !subscriptions.isEmpty || noSubscriptionSince != nil
    }
}
