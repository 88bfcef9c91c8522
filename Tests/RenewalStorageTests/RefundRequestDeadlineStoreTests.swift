import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// Storage counts open and missed refund requests and claims them exactly as Core's `RefundRequests`
/// rules say, over every state and deadline around now, on both databases.
@Suite("Refund request deadline in storage: open, missed and claims as Core decides, on SQLite and PostgreSQL")
struct RefundRequestDeadlineStoreTests {
    typealias Backend = StoreBackend

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static func ms(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    struct Row {
        var uuid: String
        var state: RefundRequestState
        var answerBy: Date
        var nextAttemptAt: Date?
        var claimedUntil: Date?
    }

    static var rows: [Row] {
        var rows: [Row] = []
        let deadlines: [TimeInterval] = [-90_000, -86_400, -3_600, 0, 1, 3_600]
        let attempts: [(TimeInterval?, TimeInterval?)] = [(0, nil), (-1, nil), (1, nil), (nil, nil), (0, 60), (0, -1)]
        for state in RefundRequestState.allCases {
            for (d, deadline) in deadlines.enumerated() {
                for (a, (next, until)) in attempts.enumerated() {
                    rows.append(
                        Row(
                            uuid: "\(state.rawValue)-\(d)-\(a)", state: state,
                            answerBy: now.addingTimeInterval(deadline),
                            nextAttemptAt: next.map(now.addingTimeInterval),
                            claimedUntil: until.map(now.addingTimeInterval)))
                }
            }
        }
        return rows
    }

    @Test("the backlog's open and missed counts and a claim's rows are Core's", arguments: Backend.available)
    func backlogAndClaims(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            for row in Self.rows {
                let next = row.nextAttemptAt.map { String(Self.ms($0)) } ?? "NULL"
                let until = row.claimedUntil.map { String(Self.ms($0)) } ?? "NULL"
                try await store.run(
                    """
                    INSERT INTO refund_requests (notification_uuid, transaction_id, environment, requested_at,
                        answer_by, state, attempts, next_attempt_at, claimed_until, recorded_at)
                    VALUES ('\(row.uuid)', 't-\(row.uuid)', 'Production', 0, \(Self.ms(row.answerBy)),
                        '\(row.state.rawValue)', 0, \(next), \(until), 0)
                    """)
            }
            let backlog = try await store.refundRequestBacklog(now: Self.now)
            let dayAgo = Self.now.addingTimeInterval(-RefundRequests.missedWindow)
            let open = Self.rows.filter { RefundRequests.isOpen(state: $0.state, answerBy: $0.answerBy, now: Self.now) }
            let missed = Self.rows.filter {
                $0.answerBy > dayAgo && RefundRequests.isMissed(state: $0.state, answerBy: $0.answerBy, now: Self.now)
            }
            #expect(backlog.open == open.count)
            #expect(backlog.missedLastDay == missed.count)
            #expect(!open.isEmpty && !missed.isEmpty)

            let claimed = try await store.claimRefundRequests(
                limit: 10_000, now: Self.now, claimedUntil: Self.now.addingTimeInterval(60), runID: nil)
            let claimable = Self.rows.filter {
                RefundRequests.isClaimable(
                    state: $0.state, nextAttemptAt: $0.nextAttemptAt, claimedUntil: $0.claimedUntil,
                    claimRunIsOver: false, now: Self.now)
            }
            #expect(Set(claimed.map(\.notificationUUID)) == Set(claimable.map(\.uuid)))
            #expect(!claimable.isEmpty)
        }
    }
}
