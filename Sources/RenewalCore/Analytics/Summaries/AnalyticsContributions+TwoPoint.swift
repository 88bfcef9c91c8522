import Foundation

/// The figures that ask about both bounds of a window, each a region of `(s, u)` pairs per subscription,
/// written as rectangles (four corners each). Every rectangle here ends in `s` at or before it begins in
/// `u`, so a query needs only the corners with `s < until ≤ u` (the others cancel).
extension AnalyticsContributions {
    /// The trial funnel of a subscription whose first transaction is a trial purchased in unit `f`:
    /// converted when its first paid period was purchased before `u` (unit `c < u`); still in the trial
    /// when not converted and a trial entitles it at `u`. Both need `s ≤ f < u`.
    func funnel(
        _ counted: [LedgerTransaction], first: LedgerTransaction, trialSpans: [UnitSpan], _ builder: inout Builder
    ) {
        let keys = builder.keys
        guard first.isTrial, let purchased = first.purchasedAt else { return }
        let f = index(of: purchased)
        let converted = counted.first { !$0.isTrial }?.purchasedAt.map(index(of:))
        if let c = converted {
            let key = { keys.key($0, .trialConverted, productID: first.productID) }
            builder.rectangle(key, since: ContributionShape.always, f + 1, until: c + 1, nil)
        }
        let key = { keys.key($0, .trialInTrial, productID: first.productID) }
        for span in trialSpans {
            let end = [span.end, converted.map { $0 + 1 }].compactMap { $0 }.min()
            builder.rectangle(key, since: ContributionShape.always, f + 1, until: max(span.start, f + 1), end)
        }
    }

    /// A reactivation is counted once per subscription, under the product of the first one in the window:
    /// reactivation `j` (in unit `q_j`) is that one when `q_{j−1} < s ≤ q_j < u` (empty for a second
    /// reactivation in the same unit: the first of the unit counts).
    func reactivations(_ counted: [LedgerTransaction], _ builder: inout Builder) {
        let keys = builder.keys
        let paid = counted.filter { !$0.isTrial }
        var found: [(unit: Int, transaction: LedgerTransaction)] = []
        for (previous, next) in zip(paid, paid.dropFirst()) {
            guard let purchased = next.purchasedAt, let previousEnd = EntitlementTimeline.end(of: previous),
                purchased > previousEnd
            else { continue }
            let resubscribed =
                next.transactionReason == "PURCHASE" || previous.revokedAt != nil
                || purchased.timeIntervalSince(previousEnd) > SubscriptionAnalytics.recoveryWindow
            if resubscribed { found.append((index(of: purchased), next)) }
        }
        var earlier = ContributionShape.always
        for (unit, transaction) in found {
            let key = { keys.key($0, .reactivation, productID: transaction.productID) }
            builder.rectangle(key, since: earlier, unit + 1, until: unit + 1, nil)
            earlier = unit + 1
        }
    }

    /// Churned: paid at `s` (under that period's product), not entitled at `u`, and no refund in
    /// `[s, u)`. For each run of paid spans of one product and each gap in the entitlement after it, the
    /// pairs `(s in the run, u in the gap)`, less those with a refund unit `r` such that `s ≤ r < u`: split
    /// at the refunds, `s ≤ r_j` (the first refund at or after `s`) bounds `u ≤ r_j`.
    func churn(_ counted: [LedgerTransaction], spans: [UnitSpan], _ builder: inout Builder) {
        let keys = builder.keys
        let refunds = Set(
            counted.filter(SubscriptionAnalytics.isRefund).compactMap { $0.revokedAt.map(index(of:)) }
        ).sorted()
        let gaps = Self.gaps(after: spans)
        for run in Self.paidRuns(spans) {
            guard let runEnd = run.end else { continue }
            let key = { keys.key($0, .churned, productID: run.productID) }
            for gap in gaps where gap.start >= runEnd {
                var from = run.start
                for refund in refunds where refund >= from {
                    let to = min(runEnd, refund + 1)
                    let bound = gap.end.map { min($0, refund + 1) } ?? refund + 1
                    builder.rectangle(key, since: from, to, until: gap.start, bound)
                    from = to
                    if from >= runEnd { break }
                }
                builder.rectangle(key, since: from, runEnd, until: gap.start, gap.end)
            }
        }
    }

    /// Adjacent paid spans of one product, joined: the product churn counts under is the one paid at `s`.
    static func paidRuns(_ spans: [UnitSpan]) -> [(start: Int, end: Int?, productID: String?)] {
        var runs: [(start: Int, end: Int?, productID: String?)] = []
        for span in spans where span.kind == .paid {
            if let last = runs.last, last.end == span.start, last.productID == span.transaction.productID {
                runs[runs.count - 1].end = span.end
            } else {
                runs.append((span.start, span.end, span.transaction.productID))
            }
        }
        return runs
    }

    /// The unit starts no span holds, after the first span: `[start, end)`, `end` nil when open.
    static func gaps(after spans: [UnitSpan]) -> [(start: Int, end: Int?)] {
        var gaps: [(start: Int, end: Int?)] = []
        var covered: Int? = nil
        for span in spans.sorted(by: { $0.start < $1.start }) {
            if let covered, span.start > covered { gaps.append((covered, span.start)) }
            guard let end = span.end else { return gaps }
            covered = max(covered ?? end, end)
        }
        if let covered { gaps.append((covered, nil)) }
        return gaps
    }
}
