import Foundation
import RenewalCore

/// Claiming a subscription for a user (docs/design.md §7): an adopted one waiting unclaimed, or, with
/// `reassign`, one that belongs to another user. `renewal claim` calls it; the feed and the import claim
/// through the same code when a registered `appAccountToken` names the user.
public protocol PurchaseClaiming: Sendable {
    /// Makes the subscription `originalTransactionID` the user's, in one transaction, and records a
    /// `purchase_claimed` change for them (queued as a `purchase.claimed` webhook when `queueWebhooks`).
    /// A refusal because another user owns it is recorded in `ownership_conflicts` before it is thrown.
    ///
    /// - Throws: `ClaimError` naming the subscription and the fix; `SubscriptionStoreError` when the
    ///   database fails.
    func claim(
        originalTransactionID: String, user: String, reassign: Bool, method: ClaimMethod, runID: String?,
        queueWebhooks: Bool, now: Date
    ) async throws -> ClaimResult

    /// Claims every subscription of `originalTransactionIDs` (an order's, say) or none, in one transaction:
    /// each is checked first, and when any is not held, or belongs to another user without `reassign`,
    /// nothing is claimed. Each refusal is recorded in `ownership_conflicts` before the error is thrown,
    /// naming every subscription another user owns (`ownedByOtherUsers` when more than one).
    func claim(
        originalTransactionIDs: [String], user: String, reassign: Bool, method: ClaimMethod, runID: String?,
        queueWebhooks: Bool, now: Date
    ) async throws -> [ClaimResult]
}

/// How a subscription came to be claimed, stored in `adopted_purchases.claimed_by`.
public enum ClaimMethod: String, Sendable, Hashable {
    /// Its `appAccountToken` maps to the user (`app_account_tokens`).
    case token
    /// An import line named its original transaction id for the user (the app's server stored the
    /// purchase late).
    case `import`
    /// Support attached it (`renewal claim`).
    case hand
}

/// What a claim did.
public struct ClaimResult: Sendable, Hashable {
    public var originalTransactionID: String
    public var userID: String
    /// Whose it was: nil when it was unclaimed.
    public var previousOwner: String?
    /// False when it was the user's already: nothing was written.
    public var changed: Bool

    public init(originalTransactionID: String, userID: String, previousOwner: String?, changed: Bool) {
        self.originalTransactionID = originalTransactionID
        self.userID = userID
        self.previousOwner = previousOwner
        self.changed = changed
    }
}

/// Why a claim was refused; each names the subscription and the fix.
public enum ClaimError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The database holds no subscription (and no receipts row) with this original transaction id.
    case notHeld(originalTransactionID: String)
    /// It belongs to `owner`; a claim without `reassign` leaves it there.
    case ownedByAnotherUser(originalTransactionID: String, owner: String)
    /// Several subscriptions of one claim belong to other users (original transaction id to owner); none was
    /// claimed.
    case ownedByOtherUsers(owners: [String: String])
    /// The user id is one of the reserved keys of adopted purchases, never an app user's.
    case reservedUserID(String)

    public var description: String {
        switch self {
        case .notHeld(let id):
            """
            the database holds no subscription with original transaction id \(id); let a run read Apple's \
            change feed (it adopts purchases the server never stored), or import it by transaction id
            """
        case .ownedByAnotherUser(let id, let owner):
            """
            subscription \(id) belongs to user \(owner); nothing was changed. Pass --reassign to move it \
            (the refusal and the move are both recorded)
            """
        case .ownedByOtherUsers(let owners):
            """
            \(owners.sorted { $0.key < $1.key }.map { "subscription \($0.key) belongs to user \($0.value)" }
                .joined(separator: ", ")); nothing was claimed. Pass --reassign to move them (the refusals and \
            the moves are all recorded)
            """
        case .reservedUserID(let user):
            """
            user id \(user) is reserved for purchases no user claimed yet (prefix \
            \(PurchaseAdoption.reservedUserPrefix)); give the app's own user id
            """
        }
    }
}

/// An import that can queue the `purchase.claimed` webhooks of the claims its lines make (a registered
/// `appAccountToken` claiming a waiting adopted purchase, or a transaction-id line naming one), as
/// `renewal claim` queues its own. Without it an app that registered a token late never hears that the
/// customer's purchase is now its user's.
public protocol ClaimWebhookImporting: Sendable {
    /// `SubscriptionStore.importReceipts(_:now:)`, queueing each claim's webhook when `queueClaimWebhooks`.
    func importReceipts(_ items: [ReceiptImport], now: Date, queueClaimWebhooks: Bool) async throws
        -> [ReceiptImportOutcome]
}
