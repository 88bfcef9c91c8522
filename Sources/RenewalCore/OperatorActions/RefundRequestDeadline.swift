import Foundation

/// Where a refund request (`CONSUMPTION_REQUEST`) stands, as stored.
public enum RefundRequestState: String, Sendable, Hashable, CaseIterable {
    /// Still to answer: claimed and tried until it is answered, refused, or its deadline passes.
    case pending
    /// Apple accepted the answer.
    case answered
    /// The app recorded no consent for the user: left unanswered on purpose.
    case noConsent = "no_consent"
    /// Apple refused the answer for good.
    case rejected
    /// Its deadline passed before an answer could be sent.
    case missed
}

/// The deadline and claim rules of refund requests: when one can still be answered, when it counts as
/// missed, and when a worker may claim it. Storage reads these states and bounds and decides nothing
/// itself; the job asks `isAnswerable` before each attempt.
extension RefundRequests {
    /// A request can be answered at `at` only strictly before `answerBy` (Apple's 12 hours after it
    /// signed the request); at `answerBy` it is missed.
    public static func isAnswerable(answerBy: Date, at: Date) -> Bool { at < answerBy }

    /// The states a request is still to answer in: claimed, tried, counted open before its deadline.
    public static let open: Set<RefundRequestState> = [.pending]

    /// The states that count a request missed once its deadline passed: marked missed by a run, or
    /// still pending because no run reached it in time (a job that was down).
    public static let unanswered: Set<RefundRequestState> = [.pending, .missed]

    /// Whether a request in `state`, due by `answerBy`, is open at `now`.
    public static func isOpen(state: RefundRequestState, answerBy: Date, now: Date) -> Bool {
        open.contains(state) && isAnswerable(answerBy: answerBy, at: now)
    }

    /// Whether a request in `state`, due by `answerBy`, counts missed at `now`.
    public static func isMissed(state: RefundRequestState, answerBy: Date, now: Date) -> Bool {
        unanswered.contains(state) && !isAnswerable(answerBy: answerBy, at: now)
    }

    /// Whether a worker may claim at `now` a request in `state` whose next attempt is at `nextAttemptAt`,
    /// held until `claimedUntil` by a run that `claimRunIsOver` (ended, or proved dead): an open one whose
    /// attempt is due, held by no live claim. A request past its deadline is still claimed, so the run
    /// that takes it records it missed.
    public static func isClaimable(
        state: RefundRequestState, nextAttemptAt: Date?, claimedUntil: Date?, claimRunIsOver: Bool, now: Date
    ) -> Bool {
        guard open.contains(state), let nextAttemptAt, nextAttemptAt <= now else { return false }
        guard let claimedUntil else { return true }
        return claimedUntil <= now || claimRunIsOver
    }

    /// The window `refundRequestBacklog` counts missed requests in: the day before `now`.
    public static let missedWindow: TimeInterval = 86_400
}
