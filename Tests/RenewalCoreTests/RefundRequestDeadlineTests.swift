import Foundation
import Testing

@testable import RenewalCore

/// The refund-request deadline and claim rules as plain values (`RefundRequestDeadlineStoreTests`
/// holds storage to them on both databases).
@Suite("Refund request deadline: answerable, open, missed and claimable in the core")
struct RefundRequestDeadlineTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static func at(_ seconds: TimeInterval) -> Date { now.addingTimeInterval(seconds) }

    @Test("a request is answerable strictly before its deadline; at it, it is missed")
    func deadline() {
        #expect(RefundRequests.isAnswerable(answerBy: Self.at(1), at: Self.now))
        #expect(!RefundRequests.isAnswerable(answerBy: Self.now, at: Self.now))
        #expect(RefundRequests.isOpen(state: .pending, answerBy: Self.at(1), now: Self.now))
        #expect(!RefundRequests.isOpen(state: .pending, answerBy: Self.now, now: Self.now))
        #expect(RefundRequests.isMissed(state: .pending, answerBy: Self.now, now: Self.now))
        #expect(RefundRequests.isMissed(state: .missed, answerBy: Self.at(-10), now: Self.now))
        for state in [RefundRequestState.answered, .noConsent, .rejected] {
            #expect(!RefundRequests.isOpen(state: state, answerBy: Self.at(1), now: Self.now))
            #expect(!RefundRequests.isMissed(state: state, answerBy: Self.at(-1), now: Self.now))
        }
    }

    @Test("an open request whose attempt is due is claimable unless a live claim holds it")
    func claimable() {
        func claimable(
            _ state: RefundRequestState = .pending, next: TimeInterval? = 0, until: TimeInterval? = nil,
            over: Bool = false
        ) -> Bool {
            RefundRequests.isClaimable(
                state: state, nextAttemptAt: next.map(Self.at), claimedUntil: until.map(Self.at), claimRunIsOver: over,
                now: Self.now)
        }
        #expect(claimable())
        #expect(!claimable(next: 1))
        #expect(!claimable(next: nil))
        #expect(!claimable(until: 1))
        #expect(claimable(until: 0))
        #expect(claimable(until: 1, over: true))
        for state in [RefundRequestState.answered, .noConsent, .rejected, .missed] {
            #expect(!claimable(state))
        }
    }
}
