import RenewalCore
import Testing

/// An extension's "active" is the job's "grants access": a state that entitles the subscriber can be
/// extended and one that does not is refused, so the two can never drift apart.
@Suite("Renewal extension eligibility follows SubscriptionState.grantsAccess")
struct RenewalExtensionEligibilityTests {
    @Test(
        "a paid, owned subscription can be extended exactly when its state grants access",
        arguments: SubscriptionState.allCases)
    func eligibleExactlyWhenGrantingAccess(state: SubscriptionState) {
        let subject = RenewalExtension.Subject(
            state: state, isTrialPeriod: false, ownershipType: "PURCHASED", recentExtensions: 0)
        let ineligibility = RenewalExtension.ineligibility(of: subject)
        if state.grantsAccess {
            #expect(ineligibility == nil)
        } else {
            #expect(ineligibility == (state == .unverified ? .unverified : .notActive))
        }
    }
}
