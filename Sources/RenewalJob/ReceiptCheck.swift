import Foundation
import RenewalAppStore
import RenewalCore
import RenewalStorage

/// What one receipt's check decided: the write, and how the run counts it. Pure: no I/O, `now` passed in.
public struct ReceiptCheck: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        /// Apple answered; entitlements may or may not have changed.
        case verified
        /// Apple rejects the receipt (21003, 21010, persistent 21002).
        case invalid
        /// No usable answer; the state stays. `outage` feeds the circuit breaker.
        case failed(outage: Bool)
    }

    public var outcome: Outcome
    public var write: ReceiptWrite

    public var changes: [SubscriptionEvent] { write.changes }
    public var failure: CheckFailure? { write.failure }
}

extension ReceiptCheck {
    /// Decides what to write for `receipt` given Apple's answer.
    ///
    /// - Parameters:
    ///   - owners: owners of the answer's subscriptions that this receipt does not already hold
    ///     (`SubscriptionStore.owners`); a subscription owned by another user is a `shared_apple_id`
    ///     conflict and is not written.
    ///   - random: a value in 0..<1 for failure-backoff jitter.
    /// - Precondition: `verification` is not `.sharedSecretRejected` (the run stops before calling this).
    public init(
        receipt: StoredReceipt, verification: ReceiptVerification, owners: [String: SubscriptionOwner],
        now: Date, policy: SchedulePolicy, random: Double, runID: String?, leaseOwner: String?
    ) {
        var write = ReceiptWrite(
            receiptID: receipt.id, userID: receipt.userID, runID: runID, checkedAt: now, newLatestReceipt: nil,
            status: receipt.status, environment: receipt.environment, verifiedAt: nil,
            nextCheckAt: receipt.nextCheckAt, consecutiveFailures: receipt.consecutiveFailures,
            consecutiveMalformed: receipt.consecutiveMalformed, subscriptions: [], changes: [], failure: nil,
            conflicts: [], leaseOwner: leaseOwner)

        func fail(_ failure: CheckFailure, outage: Bool) -> ReceiptCheck {
            write.consecutiveFailures += 1
            write.failure = failure
            write.nextCheckAt = policy.nextCheckAfterFailure(
                consecutiveFailures: write.consecutiveFailures, now: now, random: random)
            return ReceiptCheck(outcome: .failed(outage: outage), write: write)
        }

        switch verification {
        case .valid(let response, let environment):
            let verified = VerifiedReceipt(response: response, answeredBy: environment, now: now)
            guard !verified.subscriptions.isEmpty else {
                write.consecutiveFailures += 1
                write.failure = CheckFailure(
                    reason: "no_subscriptions",
                    message: "Apple's answer holds no auto-renewable subscription for this receipt; it keeps its state and is checked again in \(Int(policy.dormantInterval / 86_400)) days.")
                write.nextCheckAt = now.addingTimeInterval(policy.dormantInterval)
                self = ReceiptCheck(outcome: .failed(outage: false), write: write)
                return
            }
            write.status = .verified
            write.environment = verified.environment ?? environment
            write.verifiedAt = now
            write.consecutiveFailures = 0
            write.consecutiveMalformed = 0
            if let latest = verified.latestReceipt, !latest.isEmpty, latest != receipt.latestReceipt {
                write.newLatestReceipt = latest
            }
            for snapshot in verified.subscriptions {
                let stored = receipt.subscriptions.first { $0.snapshot.originalTransactionID == snapshot.originalTransactionID }
                if stored == nil, let owner = owners[snapshot.originalTransactionID], owner.receiptID != receipt.id {
                    write.conflicts.append(OwnershipConflict(
                        originalTransactionID: snapshot.originalTransactionID, ownerUserID: owner.userID,
                        claimantUserID: receipt.userID, productID: snapshot.productID))
                    continue
                }
                write.changes += SubscriptionEvent.events(from: stored?.snapshot, to: snapshot)
                write.subscriptions.append(StoredSubscription(
                    snapshot: snapshot, lastVerifiedAt: now, nextCheckAt: policy.nextCheck(for: snapshot, now: now)))
            }
            write.nextCheckAt = write.subscriptions.map(\.nextCheckAt).min()
                ?? now.addingTimeInterval(policy.dormantInterval)
            self = ReceiptCheck(outcome: .verified, write: write)

        case .rejected(_, let environment):
            self = Self.invalidate(receipt, write: write, environment: environment, now: now, policy: policy)

        case .malformed(let environment):
            write.consecutiveMalformed += 1
            if write.consecutiveMalformed >= policy.malformedChecksBeforeInvalid {
                self = Self.invalidate(receipt, write: write, environment: environment, now: now, policy: policy)
            } else {
                self = fail(CheckFailure(
                    reason: "apple_status_21002",
                    message: "Apple answered 21002 (malformed or temporary) on every attempt; check \(write.consecutiveMalformed) of \(policy.malformedChecksBeforeInvalid) before the receipt is marked invalid."),
                    outage: false)
            }

        case .failed(let error):
            self = fail(CheckFailure(reason: error.reason, message: error.description), outage: error.isOutage)

        case .sharedSecretRejected:
            self = fail(CheckFailure(
                reason: "apple_status_21004",
                message: "Apple rejected the shared secret (21004); set APPSTORE_SHARED_SECRET to the app's shared secret."),
                outage: false)
        }
    }

    /// Apple rejects the receipt itself: every stored subscription, or the never-verified placeholder,
    /// becomes `invalid` (not entitled).
    private static func invalidate(
        _ receipt: StoredReceipt, write: ReceiptWrite, environment: AppStoreEnvironment, now: Date,
        policy: SchedulePolicy
    ) -> ReceiptCheck {
        var write = write
        let next = now.addingTimeInterval(policy.dormantInterval)
        write.status = .invalid
        write.environment = receipt.environment ?? environment
        write.verifiedAt = now
        write.consecutiveFailures = 0
        write.nextCheckAt = next
        if receipt.subscriptions.isEmpty {
            if receipt.status != .invalid, let event = SubscriptionEvent.invalidation(of: nil) {
                write.changes.append(event)
            }
        }
        for stored in receipt.subscriptions {
            if let event = SubscriptionEvent.invalidation(of: stored.snapshot) { write.changes.append(event) }
            var snapshot = stored.snapshot
            snapshot.state = .invalid
            snapshot.gracePeriodExpiresAt = nil
            write.subscriptions.append(StoredSubscription(snapshot: snapshot, lastVerifiedAt: now, nextCheckAt: next))
        }
        return ReceiptCheck(outcome: .invalid, write: write)
    }
}
