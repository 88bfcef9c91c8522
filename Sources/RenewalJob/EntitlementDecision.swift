import Foundation
import RenewalCore
import RenewalStorage

/// What the job concludes from Apple's answer about one receipt: the rows to write, and how the run
/// counts it. A pure function of (stored rows, answer, owners, now, rules): no I/O, no clock.
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
            feedStreams: Set<FeedStream> = []
        ) {
            self.schedule = schedule
            self.identity = identity
            self.feedStreams = feedStreams
        }
    }

    public var outcome: Outcome
    public var update: ReceiptUpdate

    public var changes: [SubscriptionEvent] { update.changes }
    public var failure: CheckFailure? { update.failure }
}

extension EntitlementDecision.Rules {
    /// `evidence` limited to the receipt's app. Fails when the answer names a bundle other than the
    /// one the receipt is pinned to, a bundle the apps file does not list, or only unknown products.
    public func screen(_ evidence: AppleEvidence, of receipt: StoredReceipt) -> Result<
        AppleEvidence, AppIdentity.ScreeningFailure
    > {
        if let pinned = receipt.bundleID, let found = evidence.bundleID, found != pinned {
            return .failure(
                AppIdentity.ScreeningFailure(
                    reason: .wrongBundle,
                    message:
                        """
                        Apple's answer is for bundle \(found), but the receipt belongs to \(pinned) (its stored \
                        bundle_id); nothing was changed. Re-import the row with the right bundle_id.
                        """
                ))
        }
        guard !apps.isEmpty else { return identity.screen(evidence) }
        guard let bundleID = evidence.bundleID ?? receipt.bundleID, let app = apps[bundleID] else {
            let named = evidence.bundleID.map { "bundle \($0)" } ?? "no bundle"
            return .failure(
                AppIdentity.ScreeningFailure(
                    reason: .wrongBundle,
                    message:
                        """
                        Apple's answer is for \(named), which the apps file does not list; nothing was changed. \
                        Add the app to the apps file if it is yours.
                        """
                ))
        }
        return app.screen(evidence)
    }
}

extension EntitlementDecision {
    /// Decides what to write for `receipt` given Apple's `answer`.
    ///
    /// - Parameters:
    ///   - owners: the owners of the answer's subscriptions that this receipt does not hold yet, read
    ///     in the transaction that writes the result (`SubscriptionStore.save`).
    ///   - random: a value in 0..<1 for failure-backoff jitter.
    public init(
        receipt: StoredReceipt, answer: AppleAnswer, owners: [String: SubscriptionOwner], now: Date, rules: Rules,
        random: Double, runID: String?, leaseOwner: String?
    ) {
        let schedule = rules.schedule
        var update = ReceiptUpdate(unchanged: receipt, runID: runID, checkedAt: now, leaseOwner: leaseOwner)

        func fail(_ failure: CheckFailure, outage: Bool) -> EntitlementDecision {
            update.consecutiveFailures += 1
            update.failure = failure
            update.nextCheckAt = schedule.nextCheckAfterFailure(
                consecutiveFailures: update.consecutiveFailures, now: now, random: random)
            return EntitlementDecision(outcome: .failed(outage: outage), update: update)
        }

        switch answer {
        case .verified(let evidence):
            switch rules.screen(evidence, of: receipt) {
            case .failure(let screening):
                self = fail(screening.checkFailure, outage: false)
            case .success(let evidence):
                self = Self.apply(evidence, to: receipt, update: update, owners: owners, now: now, rules: rules)
            }

        case .rejected(let rejection) where rejection.kind == .accountNotFound:
            self = Self.invalidate(
                receipt, update: update, environment: rejection.environment, now: now, schedule: schedule)

        case .rejected(let rejection):
            // 21002 across many receipts is Apple's trouble as often as the receipt's: it counts
            // toward the breaker. 21003 speaks about this receipt only.
            let outage = rejection.kind == .malformedOrTemporary
            let what =
                """
                Apple answered \(rejection.status.rawValue) \
                (\(rejection.kind == .malformedOrTemporary ? "malformed or temporary" : "not authentic"))
                """
            if receipt.wasVerified {
                update.consecutiveMalformed = 0
                update.rejectedSince = nil
                self = fail(
                    CheckFailure(
                        reason: rejection.reason,
                        message:
                            """
                            \(what) for a receipt Apple verified before; its subscriptions keep their state and \
                            it is retried later.
                            """
                    ),
                    outage: outage)
                return
            }
            update.consecutiveMalformed += 1
            let since = receipt.rejectedSince ?? now
            update.rejectedSince = since
            let days = schedule.rejectionSpanBeforeInvalid / 86_400
            if update.consecutiveMalformed >= schedule.malformedChecksBeforeInvalid,
                now.timeIntervalSince(since) >= schedule.rejectionSpanBeforeInvalid
            {
                self = Self.invalidate(
                    receipt, update: update, environment: rejection.environment, now: now, schedule: schedule)
            } else {
                self = fail(
                    CheckFailure(
                        reason: rejection.reason,
                        message:
                            """
                            \(what) on check \(update.consecutiveMalformed); a never-verified receipt is marked \
                            invalid after \(schedule.malformedChecksBeforeInvalid) such checks over \
                            \(days.formatted()) days.
                            """
                    ),
                    outage: outage)
            }

        case .transient(let failure, let isOutage):
            self = fail(failure, outage: isOutage)

        case .misconfigured(let failure):
            // The run stops on these before writing; should one reach here, it changes nothing.
            self = fail(failure, outage: false)
        }
    }

    /// A valid answer (after screening): every subscription it lists, and every one stored for this
    /// receipt that it no longer lists, derived again.
    private static func apply(
        _ evidence: AppleEvidence, to receipt: StoredReceipt, update: ReceiptUpdate,
        owners: [String: SubscriptionOwner], now: Date, rules: Rules
    ) -> EntitlementDecision {
        let schedule = rules.schedule
        var update = update
        update.status = .verified
        update.environment = evidence.environment ?? receipt.environment
        update.verifiedAt = now
        update.consecutiveFailures = 0
        update.consecutiveMalformed = 0
        update.rejectedSince = nil
        if let latest = evidence.latestReceipt, !latest.isEmpty, latest != receipt.latestReceipt {
            update.newLatestReceipt = latest
        }
        update.source = evidence.source
        // The first valid answer pins a receipt to its app; a pinned receipt keeps its app.
        update.bundleID = receipt.bundleID ?? evidence.bundleID
        update.originalTransactionID = evidence.lookupTransactionID ?? receipt.originalTransactionID
        update.migrated = evidence.source == .serverAPI && receipt.source != .serverAPI
        // The feed announces changes only of what the Server API answers for (verifyReceipt-only rows
        // keep polling), and only while it is healthy; polling's check is kept beside the feed's.
        let mode: SchedulePolicy.Mode =
            evidence.source == .serverAPI
                && update.environment.map {
                    rules.feedStreams.contains(FeedStream($0, app: rules.apps.isEmpty ? nil : update.bundleID))
                } == true
            ? .feed : .polling
        var pollingChecks: [Date] = []
        let stored = Dictionary(
            receipt.subscriptions.map { ($0.snapshot.originalTransactionID, $0) },
            uniquingKeysWith: { first, _ in first })

        var listed: Set<String> = []
        for subscription in evidence.subscriptions {
            let id = subscription.originalTransactionID
            let previous = stored[id]
            if let previous, subscription.basis != .latestTransactions,
                subscription.expiresAt ?? .distantPast < previous.snapshot.expiresAt ?? .distantPast
            {
                // Partial evidence older than what is stored: the subscription counts as unlisted.
                continue
            }
            listed.insert(id)
            if previous == nil, let owner = owners[id], owner.receiptID != receipt.id {
                update.conflicts.append(
                    OwnershipConflict(
                        originalTransactionID: id, ownerUserID: owner.userID, claimantUserID: receipt.userID,
                        productID: subscription.productID))
                continue
            }
            var derived = SubscriptionSnapshot(evidence: subscription, now: now)
            if derived.state == .expired, previous?.snapshot.state == .active,
                subscription.basis == .latestTransactions,
                derived.awaitsRenewal(now: now, window: schedule.renewalPendingWindow)
            {
                // Apple has not posted the renewal yet: no lock-out on thin evidence. (Partial
                // evidence never grants past the expiry it states.)
                derived.state = .active
            }
            update.changes += SubscriptionEvent.events(from: previous?.snapshot, to: derived)
            update.subscriptions.append(
                StoredSubscription(
                    snapshot: derived, lastVerifiedAt: now,
                    nextCheckAt: schedule.nextCheck(for: derived, now: now, mode: mode)))
            pollingChecks.append(schedule.nextCheck(for: derived, now: now))
        }

        for previous in receipt.subscriptions where !listed.contains(previous.snapshot.originalTransactionID) {
            var snapshot = previous.snapshot
            if snapshot.entitled, let end = snapshot.entitlementEndsAt, end <= now {
                update.changes.append(SubscriptionEvent.unlistedExpiry(of: snapshot))
                snapshot.state = .expired
                snapshot.gracePeriodExpiresAt = nil
            }
            update.subscriptions.append(
                StoredSubscription(
                    snapshot: snapshot, lastVerifiedAt: previous.lastVerifiedAt,
                    nextCheckAt: schedule.nextCheck(forUnlisted: snapshot, now: now, mode: mode)))
            pollingChecks.append(schedule.nextCheck(forUnlisted: snapshot, now: now))
        }

        if evidence.subscriptions.isEmpty, receipt.subscriptions.isEmpty {
            if receipt.noSubscriptionSince == nil {
                update.changes.append(
                    SubscriptionEvent.noSubscription(
                        from: receipt.status == .invalid ? .invalid : .unverified, environment: update.environment))
            }
            update.noSubscriptionSince = receipt.noSubscriptionSince ?? now
        } else {
            update.noSubscriptionSince = nil
        }
        update.nextCheckAt =
            update.subscriptions.map(\.nextCheckAt).min()
            ?? now.addingTimeInterval(schedule.dormantInterval)
        if let polling = pollingChecks.min(), polling < update.nextCheckAt { update.pollingCheckAt = polling }
        return EntitlementDecision(outcome: .verified, update: update)
    }

    /// Apple rejects the receipt for good: every stored subscription, or the never-verified
    /// placeholder, becomes `invalid` (not entitled).
    private static func invalidate(
        _ receipt: StoredReceipt, update: ReceiptUpdate, environment: AppStoreEnvironment?, now: Date,
        schedule: SchedulePolicy
    ) -> EntitlementDecision {
        var update = update
        let next = now.addingTimeInterval(schedule.dormantInterval)
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
