import Foundation
import RenewalCore
import Testing

extension TimelinePropertyTests {
    /// What the runs of the month saw, and the failures recorded: one issue per kind of disagreement (its
    /// first occurrence, with its row and ledger), one for the first run whose active counts differ.
    struct Tally {
        var seed: UInt64
        var backend: Backend
        var learning: Learning
        var runs = 0
        var extensions = 0
        var counted: [Int] = []
        var entitled: [Int] = []
        var awaitingCheck = 0
        var flips = 0
        var kinds: [String: Int] = [:]
        /// Runs after which the analytics' active count and the stored one differ.
        var countMismatches = 0
        var previous: [String: Bool] = [:]
        var laterCompared = 0
        var laterRewritten = 0
        var laterKinds: [String: Int] = [:]

        mutating func add(_ comparison: EntitlementComparison, now: Date) {
            let when = "seed \(seed), \(backend), \(learning), run \(runs) at \(Timestamp.string(now))"
            runs += 1
            counted.append(comparison.counted)
            entitled.append(comparison.entitled)
            awaitingCheck += comparison.awaitingCheck
            for disagreement in comparison.disagreements {
                kinds[disagreement.kind, default: 0] += 1
                guard kinds[disagreement.kind] == 1 else { continue }
                let row = disagreement.row
                Issue.record(
                    """
                    \(when): \(disagreement.kind): user \(row.userID), subscription \(row.originalTransactionID)
                      row: \(row.described)
                      ledger:
                    \(EntitlementComparison.describe(disagreement.ledger))
                    """)
            }
            if comparison.analyticsActive != comparison.storedActive {
                countMismatches += 1
                if countMismatches == 1 {
                    Issue.record(
                        """
                        \(when): the analytics count \(comparison.analyticsActive) active paid subscriptions, the \
                        database stores \(comparison.storedActive) entitled and paid in production (rows awaiting \
                        the check after their end left out: \(comparison.awaitingCheck)); later runs differing are \
                        counted in the summary
                        """)
                }
            }
            for (id, value) in comparison.granted where previous[id].map({ $0 != value }) ?? false { flips += 1 }
            previous = comparison.granted
        }

        /// Records the first later answer of each kind (a grace period the analytics forgot once the row moved
        /// on was one, before issue 43's dated facts).
        mutating func record(_ later: LaterAnswers) {
            laterCompared = later.compared
            laterRewritten = later.rewritten
            for disagreement in later.disagreements {
                laterKinds[disagreement.kind, default: 0] += 1
                guard laterKinds[disagreement.kind] == 1 else { continue }
                let row = disagreement.row
                let message = Comment(
                    rawValue: """
                        seed \(seed), \(backend), \(learning), at the end of the month, for run \
                        \(disagreement.moment.run) at \(Timestamp.string(disagreement.moment.at)): \
                        \(disagreement.kind): user \(row.userID), subscription \(row.originalTransactionID)
                          row then: \(row.described)
                          ledger then:
                        \(EntitlementComparison.describe(disagreement.then))
                          ledger at the end:
                        \(EntitlementComparison.describe(disagreement.later))
                        """)
                Issue.record(message)
            }
        }

        var summary: String {
            "timeline property [\(backend), \(learning)]: seed \(seed), \(runs) runs, \(extensions) extensions "
                + "granted; counted rows per run \(counted.min() ?? 0)–\(counted.max() ?? 0), entitled "
                + "\(entitled.min() ?? 0)–\(entitled.max() ?? 0), entitlement changes \(flips), rows awaiting the "
                + "check after their end \(awaitingCheck), runs whose active counts differ \(countMismatches); "
                + "disagreements by kind: \(Self.list(kinds)); earlier moments looked at again at the end "
                + "\(laterCompared), changed by facts learned later \(laterRewritten), disagreements by kind: "
                + Self.list(laterKinds)
        }

        static func list(_ kinds: [String: Int]) -> String {
            kinds.isEmpty
                ? "none" : kinds.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: "; ")
        }
    }
}
