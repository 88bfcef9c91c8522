import Foundation
import Testing

@testable import RenewalCore

/// The extension and mass-extension state machines as plain values: which state follows which answer,
/// which requests Apple's `RENEWAL_EXTENDED` confirms, and when a run follows a mass extension up.
/// Storage applies them in guarded writes (`ExtensionLifecycleStoreTests` runs them on both databases).
@Suite("Extension lifecycle: the extension state machines in the core")
struct ExtensionLifecycleTests {
    static let at = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("only a pending request is sent; a sent one is never sent twice")
    func sendingTakesOnlyPending() {
        #expect(ExtensionState.allCases.filter(ExtensionState.send.applies(to:)) == [.pending])
        #expect(ExtensionState.send.apply(to: .pending) == .sending)
        #expect(ExtensionState.send.apply(to: .succeeded) == .succeeded)
    }

    @Test("Apple's answer is recorded from any state; an unread request is pending again; a lost one stays")
    func extensionResults() {
        let results: [(ExtensionResult, ExtensionState?)] = [
            (.succeeded(effectiveAt: Self.at, at: Self.at), .succeeded),
            (.rejected(httpStatus: 400, errorCode: 4_040_003, reason: "ineligible", at: Self.at), .rejected),
            (.notSent(reason: "rate_limited"), .pending),
            (.unconfirmed(reason: "timeout"), nil),
        ]
        for (result, to) in results {
            let transition = ExtensionState.transition(for: result)
            #expect(transition.from == nil)
            #expect(transition.to == to)
            for state in ExtensionState.allCases {
                #expect(transition.apply(to: state) == to ?? state)
            }
        }
    }

    @Test("RENEWAL_EXTENDED confirms sent requests: one without an answer succeeded; pending and rejected stay")
    func confirmation() {
        #expect(ExtensionState.confirmable == [.sending, .succeeded])
        #expect(ExtensionState.sending.confirmed == .succeeded)
        #expect(ExtensionState.succeeded.confirmed == .succeeded)
        #expect(ExtensionState.granted == .succeeded)
    }

    @Test("a mass extension is sent again until answered; an accept never reopens a finished one")
    func massTransitions() {
        #expect(MassExtensionState.allCases.filter(MassExtensionState.send.applies(to:)) == [.pending, .sending])
        let accepted = MassExtensionState.transition(for: .accepted(at: Self.at, nextStatusAt: Self.at))
        #expect(
            MassExtensionState.allCases.map(accepted.apply(to:)) == [
                .accepted, .accepted, .accepted, .complete, .rejected,
            ])
        let complete = MassExtensionState.transition(for: .complete(succeeded: 3, failed: 0, at: Self.at))
        #expect(complete == MassExtensionState.completedBySummary)
        #expect(
            MassExtensionState.allCases.map(complete.apply(to:)) == [
                .pending, .complete, .complete, .complete, .rejected,
            ])
        let rejected = MassExtensionState.transition(for: .rejected(httpStatus: 400, errorCode: nil, reason: "x"))
        #expect(MassExtensionState.allCases.map(rejected.apply(to:)) == Array(repeating: .rejected, count: 5))
        let status = MassExtensionState.transition(for: .inProgress(succeeded: 1, failed: 0, nextStatusAt: Self.at))
        #expect(MassExtensionState.allCases.filter(status.applies(to:)) == [.accepted])
        #expect(status.to == nil)
        #expect(
            MassExtensionState.transition(for: .notAccepted(reason: "outage")) == StateTransition(from: nil, to: nil))
    }

    @Test("an accepted mass extension is asked at its time; a sent one is sent again after resendAfter")
    func followUps() {
        let now = Self.at
        func due(_ state: MassExtensionState, next: TimeInterval?, sent: TimeInterval?) -> MassExtensionFollowUp? {
            MassExtensionFollowUp.due(
                state: state, nextStatusAt: next.map(now.addingTimeInterval), sentAt: sent.map(now.addingTimeInterval),
                now: now, resendAfter: 600)
        }
        #expect(due(.accepted, next: 0, sent: -10_000) == .askStatus)
        #expect(due(.accepted, next: 1, sent: -10_000) == nil)
        #expect(due(.sending, next: nil, sent: -600) == .resend)
        #expect(due(.sending, next: nil, sent: -599) == nil)
        #expect(due(.sending, next: -1, sent: nil) == nil)
        for state in [MassExtensionState.pending, .complete, .rejected] {
            #expect(due(state, next: -10_000, sent: -10_000) == nil)
        }
    }
}
