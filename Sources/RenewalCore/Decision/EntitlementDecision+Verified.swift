import Foundation

/// A valid answer (after screening): the receipt is verified, and every subscription it lists, and
/// every one stored for the receipt that it no longer lists, is derived again.
extension EntitlementDecision {
    static func apply(
        _ evidence: AppleEvidence, to receipt: StoredReceipt, update: ReceiptUpdate,
        owners: [String: SubscriptionOwner], context: Context
    ) -> EntitlementDecision {
        let (schedule, now) = (context.rules.schedule, context.now)
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

        var derivation = Derivation(
            receipt: receipt, context: context, mode: scheduleMode(of: evidence, update: update, rules: context.rules))
        derivation.deriveListed(evidence.subscriptions, owners: owners)
        switch evidence.scope {
        case .receipt: derivation.deriveUnlisted()
        case .subscription: derivation.keepUnlisted()
        }
        update.subscriptions = derivation.subscriptions
        update.changes = derivation.changes
        update.conflicts = derivation.conflicts
        update.transactions = derivation.transactions

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
        if let polling = derivation.pollingChecks.min(), polling < update.nextCheckAt {
            update.pollingCheckAt = polling
        }
        if let outage = derivation.outageChecks.min(), outage < update.nextCheckAt {
            update.outageCheckAt = outage
        }
        return EntitlementDecision(outcome: .verified, update: update)
    }

    /// The feed announces every change of a subscription of an app with Server API credentials, only
    /// while it is healthy, and the job can act on it only for subscriptions it can ask the Server API
    /// about: those the Server API answered for, and receipts verifyReceipt answered whose original
    /// transaction id is known (their first signed data moves them to the Server API). Polling's check
    /// is kept beside the feed's.
    private static func scheduleMode(of evidence: AppleEvidence, update: ReceiptUpdate, rules: Rules)
        -> SchedulePolicy.Mode
    {
        guard evidence.source == .serverAPI || update.originalTransactionID != nil,
            let environment = update.environment
        else { return .polling }
        let stream = FeedStream(environment, app: rules.apps.isEmpty ? nil : update.bundleID)
        return rules.feedStreams.contains(stream) ? .feed : .polling
    }

    /// The subscriptions of one valid answer, derived one by one.
    private struct Derivation {
        let receipt: StoredReceipt
        let context: Context
        let mode: SchedulePolicy.Mode
        var subscriptions: [StoredSubscription] = []
        var changes: [SubscriptionEvent] = []
        var conflicts: [OwnershipConflict] = []
        /// When the polling schedule would check each subscription.
        var pollingChecks: [Date] = []
        /// When a feed outage must check each subscription (`SchedulePolicy.outageCheck`).
        var outageChecks: [Date] = []
        /// The transactions of the subscriptions written (not of conflicts or of older partial evidence),
        /// less those the ledger already holds as the answer shows them.
        var transactions: [LedgerTransaction] = []
        /// The subscriptions the answer speaks for (partial evidence older than what is stored does not).
        private var listed: Set<String> = []

        init(receipt: StoredReceipt, context: Context, mode: SchedulePolicy.Mode) {
            self.receipt = receipt
            self.context = context
            self.mode = mode
        }

        /// Every subscription the answer lists, unless another receipt owns it (a conflict) or the
        /// answer's partial evidence is older than what is stored.
        mutating func deriveListed(_ listedEvidence: [SubscriptionEvidence], owners: [String: SubscriptionOwner]) {
            let (schedule, now) = (context.rules.schedule, context.now)
            let stored = Dictionary(
                receipt.subscriptions.map { ($0.snapshot.originalTransactionID, $0) },
                uniquingKeysWith: { first, _ in first })
            for subscription in listedEvidence {
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
                    conflicts.append(
                        OwnershipConflict(
                            originalTransactionID: id, ownerUserID: owner.userID, claimantUserID: receipt.userID,
                            productID: subscription.productID))
                    continue
                }
                transactions += subscription.transactions.filter { shown in
                    receipt.recordedTransactions[shown.transactionID].map(shown.changes) ?? true
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
                changes += SubscriptionEvent.events(from: previous?.snapshot, to: derived).map {
                    $0.withRevocation(of: subscription)
                }
                subscriptions.append(
                    StoredSubscription(
                        snapshot: derived, lastVerifiedAt: now,
                        nextCheckAt: schedule.nextCheck(for: derived, now: now, mode: mode),
                        appleSignedAt: subscription.signedAt))
                pollingChecks.append(schedule.nextCheck(for: derived, now: now))
                if let outage = schedule.outageCheck(for: derived, now: now) { outageChecks.append(outage) }
            }
        }

        /// A notification speaks for its subscription only: the receipt's others stay as stored.
        mutating func keepUnlisted() {
            let (schedule, now) = (context.rules.schedule, context.now)
            for previous in receipt.subscriptions where !listed.contains(previous.snapshot.originalTransactionID) {
                subscriptions.append(previous)
                pollingChecks.append(schedule.nextCheck(for: previous.snapshot, now: now))
                if let outage = schedule.outageCheck(for: previous.snapshot, now: now) { outageChecks.append(outage) }
            }
        }

        /// Every stored subscription the answer no longer lists keeps its last known expiry and loses
        /// its entitlement when that passes (`expired_unlisted`).
        mutating func deriveUnlisted() {
            let (schedule, now) = (context.rules.schedule, context.now)
            for previous in receipt.subscriptions where !listed.contains(previous.snapshot.originalTransactionID) {
                var snapshot = previous.snapshot
                if snapshot.entitled, let end = snapshot.entitlementEndsAt, end <= now {
                    changes.append(SubscriptionEvent.unlistedExpiry(of: snapshot))
                    snapshot.state = .expired
                    snapshot.gracePeriodExpiresAt = nil
                }
                subscriptions.append(
                    StoredSubscription(
                        snapshot: snapshot, lastVerifiedAt: previous.lastVerifiedAt,
                        nextCheckAt: schedule.nextCheck(forUnlisted: snapshot, now: now, mode: mode),
                        appleSignedAt: previous.appleSignedAt))
                pollingChecks.append(schedule.nextCheck(forUnlisted: snapshot, now: now))
                if snapshot.entitled, let end = snapshot.entitlementEndsAt { outageChecks.append(max(end, now)) }
            }
        }
    }
}
