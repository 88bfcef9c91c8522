import Foundation
import RenewalCore
import Testing

@Suite("The state shown for a receipt without subscriptions is Core's")
struct ReceiptStatusShownTests {
    @Test("a receipt never verified or rejected shows its status; a valid one no_subscription or expired")
    func shownStates() {
        let since = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(ReceiptStatus.unverified.shownWithoutSubscriptions(noSubscriptionSince: nil) == .unverified)
        #expect(ReceiptStatus.invalid.shownWithoutSubscriptions(noSubscriptionSince: since) == .invalid)
        #expect(ReceiptStatus.verified.shownWithoutSubscriptions(noSubscriptionSince: since) == .noSubscription)
        #expect(ReceiptStatus.verified.shownWithoutSubscriptions(noSubscriptionSince: nil) == .expired)
        // Nothing shown without subscriptions grants access.
        for status in [ReceiptStatus.unverified, .verified, .invalid] {
            for date in [nil, since] {
                #expect(!status.shownWithoutSubscriptions(noSubscriptionSince: date).grantsAccess)
            }
        }
    }

    @Test("a new receipt or id clears an invalid verdict only")
    func afterReplacement() {
        #expect(ReceiptStatus.invalid.afterReplacement == .unverified)
        #expect(ReceiptStatus.verified.afterReplacement == .verified)
        #expect(ReceiptStatus.unverified.afterReplacement == .unverified)
    }
}
