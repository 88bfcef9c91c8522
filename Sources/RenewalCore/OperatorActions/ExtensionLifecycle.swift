import Foundation

/// A change of an operator request's stored state, as the core decides it and storage applies it in one
/// guarded write: the request moves to `to` only when its state is one of `from`. Storage turns this
/// into `SET state = … WHERE state IN (…)`; it decides nothing itself, so the rule is read and tested
/// here, and two concurrent invocations still cannot both move one request.
public struct StateTransition<State>: Sendable, Hashable
where State: RawRepresentable & Hashable & Sendable & CaseIterable, State.RawValue == String {
    /// The states the request must be in; nil when any state moves.
    public var from: Set<State>?
    /// The state it moves to; nil when it keeps its state (only its details are recorded).
    public var to: State?

    public init(from: Set<State>?, to: State?) {
        self.from = from
        self.to = to
    }

    /// Whether a request in `state` moves (or, with `to` nil, has its details recorded).
    public func applies(to state: State) -> Bool { from?.contains(state) ?? true }

    /// The state a request in `state` is in afterwards.
    public func apply(to state: State) -> State { applies(to: state) ? (to ?? state) : state }

    /// `from` in a stable order (the order of `allCases`), for a deterministic query.
    public var orderedFrom: [State]? { from.map { from in State.allCases.filter { from.contains($0) } } }
}

/// Where an extension request stands.
public enum ExtensionState: String, Sendable, Hashable, CaseIterable {
    /// Its identifier is stored; it was never sent.
    case pending
    /// About to be sent, or sent without an answer recorded (a crash, a timeout): never sent again; Apple's
    /// `RENEWAL_EXTENDED` or a later status answer confirms it.
    case sending
    /// Apple extended the subscription.
    case succeeded
    /// Apple refused it (ineligible, over the yearly limit): not sent again.
    case rejected
}

/// What became of sending one extension request.
public enum ExtensionResult: Sendable, Hashable {
    /// Apple extended it; its new renewal date is effective from `effectiveAt`.
    case succeeded(effectiveAt: Date?, at: Date)
    /// Apple refused it for good.
    case rejected(httpStatus: Int?, errorCode: Int?, reason: String, at: Date)
    /// Apple turned it away unread (a rate limit, a refused token): pending again, sent by a later invocation.
    case notSent(reason: String)
    /// It may have reached Apple (a timeout, a broken connection, a 5xx): kept as sent, never sent again.
    case unconfirmed(reason: String)
}

extension ExtensionState {
    /// Marking a request as being sent, committed before it is: only a pending one is taken, so a second
    /// invocation that stored the same intent never sends it again.
    public static let send = StateTransition<ExtensionState>(from: [.pending], to: .sending)

    /// The extensions that count against Apple's yearly limit (`RenewalExtension.maximumPerWindow`):
    /// those Apple granted.
    public static let granted: ExtensionState = .succeeded

    /// What `result` does to the stored request. Apple's answer is recorded whatever the request's
    /// state (a late answer to a request already confirmed by the feed says the same); a request Apple
    /// never read is pending again; one that may have reached Apple keeps its state.
    public static func transition(for result: ExtensionResult) -> StateTransition<ExtensionState> {
        switch result {
        case .succeeded: StateTransition(from: nil, to: .succeeded)
        case .rejected: StateTransition(from: nil, to: .rejected)
        case .notSent: StateTransition(from: nil, to: .pending)
        case .unconfirmed: StateTransition(from: nil, to: nil)
        }
    }

    /// The requests Apple's `RENEWAL_EXTENDED` confirms: those sent (answered or not) before Apple
    /// signed it, not confirmed yet. A pending one was never sent; a rejected one extended nothing.
    public static let confirmable: Set<ExtensionState> = [.sending, .succeeded]

    /// This request's state once `RENEWAL_EXTENDED` confirmed it: one sent without a recorded answer
    /// succeeded; any other keeps its state.
    public var confirmed: ExtensionState { self == .sending ? .succeeded : self }
}

/// Where a mass extension stands.
public enum MassExtensionState: String, Sendable, Hashable, CaseIterable {
    /// Stored, never sent.
    case pending
    /// Sent without a recorded answer: sent again with the same identifier (Apple answers a repeated one
    /// again and extends nobody twice).
    case sending
    /// Apple accepted it and is carrying it out; later runs follow its status.
    case accepted
    /// Apple finished it.
    case complete
    /// Apple refused it.
    case rejected
}

/// What became of sending a mass extension, or of asking its status.
public enum MassExtensionResult: Sendable, Hashable {
    case accepted(at: Date, nextStatusAt: Date)
    case rejected(httpStatus: Int?, errorCode: Int?, reason: String)
    /// Not accepted yet (an outage): sent again, with its identifier, by a later run or invocation.
    case notAccepted(reason: String)
    /// Apple's status: still running (asked again at `nextStatusAt`), or complete with its counts.
    case inProgress(succeeded: Int?, failed: Int?, nextStatusAt: Date)
    case complete(succeeded: Int?, failed: Int?, at: Date)
}

extension MassExtensionState {
    /// Marking a mass extension as being sent: a pending one, or one sent before without an answer
    /// (sent again with its identifier). One Apple answered is never sent again.
    public static let send = StateTransition<MassExtensionState>(from: [.pending, .sending], to: .sending)

    /// The states Apple may still finish a mass extension from: accepted, or sent with the answer lost
    /// (Apple's summary or status can arrive before the accept is recorded).
    public static let completable: Set<MassExtensionState> = [.accepted, .sending]

    /// Apple's `RENEWAL_EXTENSION` `SUMMARY`: the mass extension it names is complete.
    public static let completedBySummary = StateTransition<MassExtensionState>(from: completable, to: .complete)

    /// What `result` does to the stored mass extension. An accept moves only one not yet answered (a late
    /// accept never reopens a complete one); a status moves only an accepted one; a refusal is recorded
    /// whatever the state; an outage changes no state.
    public static func transition(for result: MassExtensionResult) -> StateTransition<MassExtensionState> {
        switch result {
        case .accepted: StateTransition(from: [.pending, .sending], to: .accepted)
        case .rejected: StateTransition(from: nil, to: .rejected)
        case .notAccepted: StateTransition(from: nil, to: nil)
        case .inProgress: StateTransition(from: [.accepted], to: nil)
        case .complete: completedBySummary
        }
    }
}

/// What a later run does about a stored mass extension: ask Apple its status, or send it again.
public enum MassExtensionFollowUp: String, Sendable, Hashable, CaseIterable {
    /// Accepted: its status is asked once `next_status_at` has come.
    case askStatus
    /// Sent without a recorded answer more than `resendAfter` ago: sent again with its identifier.
    case resend

    /// The state a mass extension is in for this follow-up.
    public var state: MassExtensionState {
        switch self {
        case .askStatus: .accepted
        case .resend: .sending
        }
    }

    /// The latest moment this follow-up's time (`next_status_at` to ask the status, `sent_at` to resend)
    /// may be for it to be due at `now`.
    public func dueBy(now: Date, resendAfter: TimeInterval) -> Date {
        switch self {
        case .askStatus: now
        case .resend: now.addingTimeInterval(-resendAfter)
        }
    }

    /// The follow-up due at `now` for a mass extension in `state` whose status is next asked at
    /// `nextStatusAt` and that was last sent at `sentAt`; nil when none is.
    public static func due(
        state: MassExtensionState, nextStatusAt: Date?, sentAt: Date?, now: Date, resendAfter: TimeInterval
    ) -> MassExtensionFollowUp? {
        allCases.first { followUp in
            guard followUp.state == state else { return false }
            let time = followUp == .askStatus ? nextStatusAt : sentAt
            return time.map { $0 <= followUp.dueBy(now: now, resendAfter: resendAfter) } ?? false
        }
    }
}
