import Foundation
import RenewalCore

/// Which receipts a run takes.
public enum ReceiptSelection: Sendable, Hashable {
    /// Receipts with `next_check_at <= asOf`, soonest first (cursor: next_check_at, id).
    case due(asOf: Date)
    /// A backfill: the rows the selector names, whatever their schedule (cursor: id).
    case backfill(BackfillSelector)
}

/// A backfill's selectors; all given selectors must match (AND). `all` alone selects every receipt.
public struct BackfillSelector: Sendable, Hashable {
    public var all: Bool
    public var userIDs: [String]
    /// Receipts holding a subscription of one of these products (or imported with that product).
    public var productIDs: [String]
    /// Receipts holding a subscription in one of these states (`unverified` matches never-verified receipts).
    public var states: [SubscriptionState]
    /// Receipts holding a subscription that expired at or after this instant and is not entitled now
    /// ("everything expired in the last 30 days").
    public var expiredSince: Date?
    /// Receipts whose last answer came from this environment.
    public var environment: AppStoreEnvironment?
    /// Receipts of these apps (`receipts.bundle_id`); a receipt whose app is not known yet is none of them.
    public var bundleIDs: [String]

    public init(
        all: Bool = false, userIDs: [String] = [], productIDs: [String] = [], states: [SubscriptionState] = [],
        expiredSince: Date? = nil, environment: AppStoreEnvironment? = nil, bundleIDs: [String] = []
    ) {
        self.bundleIDs = bundleIDs
        self.all = all
        self.userIDs = userIDs
        self.productIDs = productIDs
        self.states = states
        self.expiredSince = expiredSince
        self.environment = environment
    }

    /// True when nothing narrows the selection and `all` was not given.
    public var isEmpty: Bool {
        !all && userIDs.isEmpty && productIDs.isEmpty && states.isEmpty && expiredSince == nil && environment == nil
            && bundleIDs.isEmpty
    }
}

/// Keyset pagination position.
public struct ReceiptCursor: Sendable, Hashable {
    public var nextCheckAt: Date
    public var id: Int64

    public init(nextCheckAt: Date, id: Int64) {
        self.nextCheckAt = nextCheckAt
        self.id = id
    }
}

extension StoredReceipt {
    /// Where a page of receipts ordered by due time ends.
    public var cursor: ReceiptCursor { ReceiptCursor(nextCheckAt: nextCheckAt, id: id) }
}

extension String {
    /// The string, or nil when it is empty (`latest_receipt` of a row without a receipt).
    package var nonEmpty: String? { isEmpty ? nil : self }
}
