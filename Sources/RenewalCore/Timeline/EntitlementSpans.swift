import Foundation

/// One maximal interval in which a subscription was entitled the same way: by the same transaction, as a
/// paid period or a free trial, by grace or not. Stored (`entitlement_spans`) by the transaction that saves
/// an answer, so SQL asks "entitled at T" of the decision's own timeline instead of repeating its rules.
public struct EntitlementSpan: Sendable, Hashable {
    /// Whether a paid period or a free trial entitles the span.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case paid
        case trial
    }

    /// The first moment of the span (inclusive).
    public var startsAt: Date
    /// The first moment after it (exclusive); nil when nothing recorded ends it.
    public var endsAt: Date?
    public var kind: Kind
    /// Entitled by the grace period after the transaction's period, not the period itself.
    public var byGrace: Bool
    /// The transaction whose period (or the grace period after it) entitles the span.
    public var transactionID: String
    /// The product of that transaction, when known, for grouping.
    public var productID: String?

    public init(
        startsAt: Date, endsAt: Date?, kind: Kind, byGrace: Bool, transactionID: String, productID: String? = nil
    ) {
        self.startsAt = startsAt
        self.endsAt = endsAt
        self.kind = kind
        self.byGrace = byGrace
        self.transactionID = transactionID
        self.productID = productID
    }

    /// Whether the span holds `moment` (`[startsAt, endsAt)`).
    public func holds(_ moment: Date) -> Bool {
        startsAt <= moment && endsAt.map { moment < $0 } ?? true
    }
}

extension EntitlementTimeline {
    /// The timeline as its entitled spans, oldest first: for every moment, `standing(at:)` is entitled
    /// exactly when one span holds it, and then by that span's transaction, kind and grace.
    ///
    /// The standing only changes at a recorded date (a purchase, an expiry, a revocation, the bounds of a
    /// grace period or of a gap in a period), each a half-open bound, so it is constant from one date to
    /// the next: asking at every date and joining equal neighbours gives the maximal spans.
    public var spans: [EntitlementSpan] {
        let dates = boundaries
        var spans: [EntitlementSpan] = []
        for (index, date) in dates.enumerated() {
            let end = index + 1 < dates.count ? dates[index + 1] : nil
            guard let span = Self.span(of: standing(at: date), from: date, to: end) else { continue }
            if let last = spans.last, last.endsAt == date, last.kind == span.kind, last.byGrace == span.byGrace,
                last.transactionID == span.transactionID
            {
                spans[spans.count - 1].endsAt = end
            } else {
                spans.append(span)
            }
        }
        return spans
    }

    /// The span holding `moment` in a list of spans (as stored), nil when none does: not entitled then.
    public static func span(at moment: Date, in spans: [EntitlementSpan]) -> EntitlementSpan? {
        spans.first { $0.holds(moment) }
    }

    /// Every date at which the standing may change, sorted, each once.
    var boundaries: [Date] {
        var dates: Set<Date> = []
        for transaction in transactions {
            if let purchased = transaction.purchasedAt { dates.insert(purchased) }
            if let end = Self.end(of: transaction) { dates.insert(end) }
        }
        for (fact, period) in graces {
            dates.insert(fact.startsAt)
            if let end = fact.endsAt { dates.insert(end) }
            if let revoked = period.revokedAt { dates.insert(revoked) }
        }
        for range in gaps.values.joined() {
            dates.insert(range.lowerBound)
            dates.insert(range.upperBound)
        }
        return dates.sorted()
    }

    private static func span(of standing: Standing, from start: Date, to end: Date?) -> EntitlementSpan? {
        switch standing {
        case .notEntitled:
            return nil
        case .paid(let transaction, let byGrace), .trial(let transaction, let byGrace):
            return EntitlementSpan(
                startsAt: start, endsAt: end, kind: transaction.isTrial ? .trial : .paid, byGrace: byGrace,
                transactionID: transaction.transactionID, productID: transaction.productID)
        }
    }
}
