import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// The spans stored for SQL (`entitlement_spans`) are the timeline itself: for every moment, the span
/// lookup answers what `standing(at:)` answers, on seeded random ledgers with grace periods, recoveries,
/// refunds (kept and reversed), extensions and trials.
@Suite("EntitlementSpans: the timeline as maximal spans, equal to standing(at:) at every moment")
struct EntitlementSpansTests {
    static let t0 = Date(timeIntervalSince1970: 1_793_491_200)  // 2026-11-01T00:00:00Z
    static func hour(_ n: Int) -> Date { t0.addingTimeInterval(Double(n) * 3_600) }

    /// A random subscription: up to six periods, some trials, some revoked, with grace facts (named or
    /// not), reversed revocations and extensions. Times are whole hours so moments land on bounds.
    static func ledger(_ random: inout SeededGenerator) -> EntitlementTimeline {
        var transactions: [LedgerTransaction] = []
        var facts: [SubscriptionFact] = []
        var start = Int.random(in: 0...48, using: &random)
        for index in 0..<Int.random(in: 0...6, using: &random) {
            let length = Int.random(in: 24...720, using: &random)
            let id = "t\(index)"
            let revoked =
                Int.random(in: 0..<5, using: &random) == 0
                ? start + Int.random(in: 0...length + 48, using: &random) : nil
            transactions.append(
                LedgerTransaction(
                    transactionID: id, originalTransactionID: "otid", productID: "p\(index % 2)",
                    purchasedAt: hour(start), expiresAt: hour(start + length),
                    isTrial: index == 0 && Bool.random(using: &random), ownershipType: "PURCHASED",
                    revokedAt: revoked.map(hour), origin: .statusAnswer))
            facts += randomFacts(after: id, from: start, length: length, &random)
            // The next period begins before, at or after this one ends (a recovery, a renewal, a return).
            start += length + Int.random(in: -24...400, using: &random)
        }
        return EntitlementTimeline(transactions: transactions.shuffled(using: &random), facts: facts)
    }

    static func randomFacts(
        after id: String, from start: Int, length: Int, _ random: inout SeededGenerator
    ) -> [SubscriptionFact] {
        var facts: [SubscriptionFact] = []
        let end = start + length
        if Int.random(in: 0..<3, using: &random) == 0 {
            let graceEnd: Int? =
                Int.random(in: 0..<6, using: &random) == 0 ? nil : end + Int.random(in: 1...672, using: &random)
            facts.append(
                SubscriptionFact(
                    originalTransactionID: "otid", kind: .gracePeriod,
                    transactionID: Bool.random(using: &random) ? id : nil, startsAt: hour(end),
                    endsAt: graceEnd.map(hour), statedAt: hour(end + 1)))
        }
        if Int.random(in: 0..<6, using: &random) == 0 {
            let from = start + Int.random(in: 0...length, using: &random)
            facts.append(
                SubscriptionFact(
                    originalTransactionID: "otid", kind: .revocation, transactionID: id, startsAt: hour(from),
                    endsAt: hour(from + Int.random(in: 1...96, using: &random)), statedAt: hour(from)))
        }
        if Int.random(in: 0..<6, using: &random) == 0 {
            let stated = end + Int.random(in: -24...96, using: &random)
            facts.append(
                SubscriptionFact(
                    originalTransactionID: "otid", kind: .renewalExtension, transactionID: id, startsAt: hour(end),
                    endsAt: hour(end + Int.random(in: 24...240, using: &random)), statedAt: hour(stated)))
        }
        return facts
    }

    @Test("the span lookup equals standing(at:) at every hour and every bound", arguments: 0..<40)
    func spansEqualStanding(seed: UInt64) {
        var random = SeededGenerator(seed: 0x5BA4 &+ seed)
        for _ in 0..<25 {
            let timeline = Self.ledger(&random)
            let spans = timeline.spans
            let last = (timeline.boundaries.last ?? Self.t0).addingTimeInterval(72 * 3_600)
            var moment = Self.t0.addingTimeInterval(-3_600)
            var moments: [Date] = []
            while moment <= last {
                moments.append(moment)
                moment = moment.addingTimeInterval(3_600)
            }
            moments += timeline.boundaries.flatMap { [$0, $0.addingTimeInterval(-0.001)] }
            for moment in moments {
                let standing = timeline.standing(at: moment)
                let span = EntitlementTimeline.span(at: moment, in: spans)
                #expect(span?.transactionID == standing.transaction?.transactionID, "seed \(seed) at \(moment)")
                if case .paid(_, let byGrace) = standing {
                    #expect(span?.kind == .paid && span?.byGrace == byGrace, "seed \(seed) at \(moment)")
                }
                if case .trial(_, let byGrace) = standing {
                    #expect(span?.kind == .trial && span?.byGrace == byGrace, "seed \(seed) at \(moment)")
                }
            }
            Self.expectMaximalAndDisjoint(spans, seed: seed)
        }
    }

    static func expectMaximalAndDisjoint(_ spans: [EntitlementSpan], seed: UInt64) {
        for (earlier, later) in zip(spans, spans.dropFirst()) {
            guard let end = earlier.endsAt else {
                Issue.record("seed \(seed): an open span is followed by another")
                return
            }
            #expect(earlier.startsAt < end && end <= later.startsAt, "seed \(seed): spans overlap or are empty")
            let same =
                earlier.kind == later.kind && earlier.byGrace == later.byGrace
                && earlier.transactionID == later.transactionID
            #expect(!(end == later.startsAt && same), "seed \(seed): two touching spans are one")
        }
    }

    @Test("a grace period ended by a recovery, then a refund: three spans, the grace one kept")
    func graceRecoveryRefund() {
        let first = LedgerTransaction(
            transactionID: "t1", originalTransactionID: "otid", productID: "p", purchasedAt: Self.hour(0),
            expiresAt: Self.hour(720), ownershipType: "PURCHASED", origin: .statusAnswer)
        let recovered = LedgerTransaction(
            transactionID: "t2", originalTransactionID: "otid", productID: "p", purchasedAt: Self.hour(800),
            expiresAt: Self.hour(1_520), ownershipType: "PURCHASED", revokedAt: Self.hour(900),
            revocationType: "REFUND_FULL", origin: .statusAnswer)
        let grace = SubscriptionFact(
            originalTransactionID: "otid", kind: .gracePeriod, transactionID: "t1", startsAt: Self.hour(720),
            endsAt: Self.hour(1_056), statedAt: Self.hour(721))
        let spans = EntitlementTimeline(transactions: [first, recovered], facts: [grace]).spans
        #expect(
            spans == [
                EntitlementSpan(
                    startsAt: Self.hour(0), endsAt: Self.hour(720), kind: .paid, byGrace: false, transactionID: "t1",
                    productID: "p"),
                EntitlementSpan(
                    startsAt: Self.hour(720), endsAt: Self.hour(800), kind: .paid, byGrace: true, transactionID: "t1",
                    productID: "p"),
                EntitlementSpan(
                    startsAt: Self.hour(800), endsAt: Self.hour(900), kind: .paid, byGrace: false, transactionID: "t2",
                    productID: "p"),
            ])
    }
}
