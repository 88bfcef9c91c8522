import Foundation

/// One notification read from Apple's change feed, as the feed's rules see it: the facts storage
/// records, without the storage (`FeedNotificationRecord` carries them from the feed to the database).
public struct FeedNotificationFacts: Sendable, Hashable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    /// The subscription it is about; nil for notifications that name none.
    public var originalTransactionID: String?
    /// Its signed transaction's id: the transaction a refund request or its outcome is about.
    public var transactionID: String?
    /// When Apple signed the notification.
    public var signedAt: Date
    /// Its verified signed data about the subscription; nil when it carries none.
    public var evidence: NotificationEvidence?
    /// Of a `RENEWAL_EXTENSION` `SUMMARY`: the mass extension it sums up.
    public var extensionSummary: ExtensionSummary?

    public init(
        uuid: String, type: String, subtype: String?, originalTransactionID: String?, transactionID: String?,
        signedAt: Date, evidence: NotificationEvidence?, extensionSummary: ExtensionSummary?
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.originalTransactionID = originalTransactionID
        self.transactionID = transactionID
        self.signedAt = signedAt
        self.evidence = evidence
        self.extensionSummary = extensionSummary
    }

    /// Apple's order, whatever the page's: by when Apple signed each one's data (its signed transaction
    /// and renewal info, else the notification), then by uuid so the order is total. Two notifications
    /// about one subscription then apply in the order Apple made the changes.
    public func precedes(_ other: FeedNotificationFacts) -> Bool {
        (evidence?.signedAt ?? signedAt, uuid) < (other.evidence?.signedAt ?? other.signedAt, other.uuid)
    }
}

/// What the feed does with one notification it records for the first time: a pure function of the
/// notification and what storage read (`init`), and, for signed data about a receipt the database
/// holds, of that receipt as stored (`weigh`). Storage reads the inputs and performs the plan's writes
/// in the transaction that records the notification; it decides nothing itself.
public struct FeedNotificationPlan: Sendable, Hashable {
    /// An operator action the notification settles, recorded whatever the entitlement step.
    public var record: Record?
    /// What it does to the entitlement of the subscription it names.
    public var entitlement: EntitlementStep

    public enum Record: Sendable, Hashable {
        /// A `CONSUMPTION_REQUEST`: a refund request, recorded to be answered by `answerBy`.
        case refundRequest(transactionID: String, requestedAt: Date, answerBy: Date)
        /// A `RENEWAL_EXTENDED`: the extension requests sent for the subscription before `at` succeeded.
        case extensionsConfirmed(originalTransactionID: String, at: Date)
        /// A `RENEWAL_EXTENSION` `SUMMARY`: the mass extension it names is complete, with Apple's counts.
        case massExtensionComplete(ExtensionSummary, at: Date)
        /// A `REFUND` or `REFUND_DECLINED`: Apple's decision on the open refund requests about the
        /// transaction made before it.
        case refundOutcome(RefundOutcome)
    }

    public enum EntitlementStep: Sendable, Hashable {
        /// A refund request changes no entitlement: nothing is applied and nothing is made due.
        case changesNoEntitlement
        /// It names no subscription (a test, a summary, a one-time purchase): recorded, acts on nothing.
        case namesNoSubscription
        /// It names a subscription the database does not know (a receipt never imported): counted and
        /// logged, not an error.
        case unmatched
        /// It names a subscription the database does not hold, with verified signed data of an
        /// auto-renewable subscription of a configured app: storage creates it unclaimed and due now
        /// (`PurchaseAdoption`), or finds it adopted already.
        case adopt(PurchaseAdoption)
        /// Signed data about the receipt `receiptID`: storage reads that receipt (locked, with its lease)
        /// and `weigh` says whether it is applied, already known or checked instead.
        case weigh(receiptID: Int64, NotificationEvidence, EntitlementDecision.Context)
        /// The receipt's check re-reads the statuses (no signed data, or none applied: a dry run).
        case makeDue(receiptID: Int64, MakeDue)
    }

    /// What follows from signed data about a receipt the database holds, once storage read the receipt.
    public enum Weighed: Sendable, Hashable {
        /// Newer than what is stored: the decision to take and write, as with a status answer about
        /// that one subscription (storage reads the owners of its claims).
        case decide(EntitlementDecision.Request)
        /// What is stored is as new or newer: counted only; nothing changes and nothing is asked.
        case known
        /// It cannot be applied on its own (or a worker is checking the receipt): counted by why, and
        /// the receipt is made due.
        case recheck(NotificationUse.Recheck, MakeDue)
    }

    /// The plan for `notification`, recorded for the first time at `now`. `receiptID` is the receipt
    /// holding (or imported by) the subscription it names, nil when the database holds none;
    /// `context` is nil when signed data is not applied (a dry run).
    public init(
        for notification: FeedNotificationFacts, heldBy receiptID: Int64?,
        applying context: EntitlementDecision.Context?,
        now: Date
    ) {
        record = Self.record(of: notification)
        if case .refundRequest = record {
            entitlement = .changesNoEntitlement
            return
        }
        guard let receiptID else {
            if notification.originalTransactionID == nil {
                entitlement = .namesNoSubscription
            } else if let rules = context?.rules,
                let adoption = PurchaseAdoption.of(notification, rules: rules, now: now)
            {
                // A dry run (no context) adopts nothing: it writes nothing.
                entitlement = .adopt(adoption)
            } else {
                entitlement = .unmatched
            }
            return
        }
        if let context, let evidence = notification.evidence {
            entitlement = .weigh(receiptID: receiptID, evidence, context)
        } else {
            entitlement = .makeDue(receiptID: receiptID, MakeDue(notification, now: now))
        }
    }

    /// The operator action `notification` settles, if any: its type says which.
    static func record(of notification: FeedNotificationFacts) -> Record? {
        switch notification.type {
        case "CONSUMPTION_REQUEST":
            // Without its transaction there is nothing to answer about: it goes on as any other type.
            guard let transactionID = notification.transactionID else { return nil }
            return .refundRequest(
                transactionID: transactionID, requestedAt: notification.signedAt,
                answerBy: notification.signedAt.addingTimeInterval(RefundRequests.window))
        case "RENEWAL_EXTENDED":
            guard let id = notification.originalTransactionID else { return nil }
            return .extensionsConfirmed(originalTransactionID: id, at: notification.signedAt)
        case "RENEWAL_EXTENSION":
            guard notification.subtype == "SUMMARY", let summary = notification.extensionSummary else { return nil }
            return .massExtensionComplete(summary, at: notification.signedAt)
        case "REFUND", "REFUND_DECLINED":
            return RefundOutcome(notification).map(Record.refundOutcome)
        default:
            return nil
        }
    }

    /// How signed data about the receipt `receiptID` is used, given the receipt as stored (nil when the
    /// row is gone) and its lease. A worker holding the lease is checking it now and writes what the
    /// statuses say, so the feed does not write it. The feed that listed the notification is current:
    /// a subscription it applies to follows the feed's schedule.
    public static func weigh(
        _ evidence: NotificationEvidence, of notification: FeedNotificationFacts, stored receipt: StoredReceipt?,
        leasedUntil: Date?, context: EntitlementDecision.Context, now: Date
    ) -> Weighed {
        let due = MakeDue(notification, now: now)
        guard let receipt else { return .recheck(.notHeld, due) }
        if let leasedUntil, leasedUntil > context.now { return .recheck(.beingChecked, due) }
        var context = context
        let app = context.rules.apps.isEmpty ? nil : receipt.bundleID ?? evidence.bundleID
        context.rules.feedStreams.insert(FeedStream(receipt.environment ?? evidence.environment, app: app))
        switch context.rules.use(of: evidence, for: receipt) {
        case .known: return .known
        case .recheck(let reason): return .recheck(reason, due)
        case .apply(let answer):
            return .decide(EntitlementDecision.Request(receipt: receipt, answer: answer, context: context))
        }
    }
}

/// Making a receipt due for a notification: due `at` now, never later than it already was, unless a
/// check verified it at or after `unlessVerifiedSince` (well after Apple signed the notification: that
/// check already shows the change).
public struct MakeDue: Sendable, Hashable {
    public var at: Date
    public var unlessVerifiedSince: Date

    public init(at: Date, unlessVerifiedSince: Date) {
        self.at = at
        self.unlessVerifiedSince = unlessVerifiedSince
    }

    init(_ notification: FeedNotificationFacts, now: Date) {
        self.init(
            at: now,
            unlessVerifiedSince: notification.signedAt.addingTimeInterval(NotificationEvidence.verifiedAfterMargin))
    }

    /// Whether a receipt due at `nextCheckAt` and last verified at `lastVerifiedAt` is made due. Compared
    /// in whole milliseconds, the precision the database keeps times in.
    public func applies(nextCheckAt: Date, lastVerifiedAt: Date?) -> Bool {
        let ms = AppleDateFormat.milliseconds
        guard ms(nextCheckAt) > ms(at) else { return false }
        guard let lastVerifiedAt else { return true }
        return ms(lastVerifiedAt) < ms(unlessVerifiedSince)
    }
}

/// Apple's decision on a refund request, from a `REFUND` (granted) or `REFUND_DECLINED` notification
/// about its transaction.
public struct RefundOutcome: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case refunded
        case refundDeclined = "refund_declined"
    }

    public var transactionID: String
    public var kind: Kind
    /// When Apple signed the decision: it settles the requests made at or before it.
    public var at: Date
    /// Of a refund: the refunded transaction's revocation type and percentage, when its signed data
    /// shows that transaction.
    public var revocationType: String?
    public var revocationPercentage: Int?

    public init(transactionID: String, kind: Kind, at: Date, revocationType: String?, revocationPercentage: Int?) {
        self.transactionID = transactionID
        self.kind = kind
        self.at = at
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
    }

    /// The outcome `notification` records; nil for other types and for one without its transaction.
    init?(_ notification: FeedNotificationFacts) {
        guard let transactionID = notification.transactionID else { return nil }
        switch notification.type {
        case "REFUND": kind = .refunded
        case "REFUND_DECLINED": kind = .refundDeclined
        default: return nil
        }
        let refunded = notification.evidence?.subscription?.transactions.first { $0.transactionID == transactionID }
        self.transactionID = transactionID
        at = notification.signedAt
        revocationType = refunded?.revocationType
        revocationPercentage = refunded?.revocationPercentage
    }
}
