import Foundation
import Testing

@testable import RenewalCore

/// `SchedulePolicy` while Apple's change feed is healthy: checks for what no notification announces,
/// the rest at the safety-net interval.
@Suite struct SchedulePolicyFeedTests {
    /// The polling suite's policy, clock and subscriptions.
    let base = SchedulePolicyTests()
    var policy: SchedulePolicy { base.policy }
    var now: Date { base.now }
    var hour: TimeInterval { base.hour }
    var day: TimeInterval { base.day }

    func subscription(
        _ state: SubscriptionState, expiresIn: TimeInterval?, autoRenew: Bool? = true, graceEndsIn: TimeInterval? = nil
    ) -> SubscriptionSnapshot {
        base.subscription(state, expiresIn: expiresIn, autoRenew: autoRenew, graceEndsIn: graceEndsIn)
    }

    func next(_ subscription: SubscriptionSnapshot, mode: SchedulePolicy.Mode = .feed) -> TimeInterval {
        policy.nextCheck(for: subscription, now: now, mode: mode).timeIntervalSince(now)
    }

    @Test("An active subscription is checked shortly after its expiry, not before it, whatever its auto-renew")
    func activeAfterExpiryOnly() {
        for autoRenew in [true, false, nil] as [Bool?] {
            #expect(next(subscription(.active, expiresIn: 20 * day, autoRenew: autoRenew)) == 20 * day + 15 * 60)
            #expect(next(subscription(.active, expiresIn: 5 * hour, autoRenew: autoRenew)) == 5 * hour + 15 * 60)
        }
        // Polling checks the same one an hour before, and an annual one weekly.
        #expect(next(subscription(.active, expiresIn: 5 * hour), mode: .polling) == 4 * hour)
        #expect(next(subscription(.active, expiresIn: 200 * day), mode: .polling) == 7 * day)
    }

    @Test("An annual subscription is checked at the safety-net interval (35 days by default, configurable)")
    func safetyNet() throws {
        #expect(next(subscription(.active, expiresIn: 200 * day)) == 35 * day)
        // A monthly one of the longest month waits for its expiry.
        #expect(next(subscription(.active, expiresIn: 31 * day)) == 31 * day + 15 * 60)
        let custom = try JSONDecoder().decode(
            SchedulePolicy.self, from: Data(#"{"feed_safety_net_interval": 864000}"#.utf8))
        #expect(custom.feedSafetyNetInterval == 10 * day)
        let interval = custom.nextCheck(for: subscription(.active, expiresIn: 200 * day), now: now, mode: .feed)
        #expect(interval.timeIntervalSince(now) == 10 * day)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(SchedulePolicy.self, from: Data(#"{"feed_safety_net_interval": -1}"#.utf8))
        }
    }

    @Test("A renewal not posted by the check after expiry is looked at again when the pending window closes")
    func renewalPending() {
        // Expired 20 minutes ago with auto-renew on and no intent: polling looks every 30 minutes.
        let pending = subscription(.active, expiresIn: -20 * 60)
        #expect(next(pending, mode: .polling) == 30 * 60)
        #expect(next(pending) == 24 * hour - 20 * 60)
    }

    @Test("Grace period: at its end; billing retry: when Apple stops retrying or at the safety net")
    func billing() {
        #expect(next(subscription(.gracePeriod, expiresIn: -day, graceEndsIn: 5 * day)) == 5 * day + 15 * 60)
        #expect(next(subscription(.gracePeriod, expiresIn: -day, graceEndsIn: 5 * day), mode: .polling) == day)
        #expect(next(subscription(.billingRetry, expiresIn: -day)) == 35 * day)
        #expect(next(subscription(.billingRetry, expiresIn: -50 * day)) == 10 * day)
        #expect(next(subscription(.billingRetry, expiresIn: -day), mode: .polling) == day)
    }

    @Test("Expired and revoked subscriptions wait for the feed (a resubscription or a reversed refund) or 35 days")
    func dormant() {
        #expect(next(subscription(.expired, expiresIn: -day, autoRenew: false)) == 35 * day)
        #expect(next(subscription(.expired, expiresIn: -day, autoRenew: false), mode: .polling) == day)
        #expect(next(subscription(.revoked, expiresIn: 10 * day)) == 35 * day)
    }

    @Test("An entitled subscription Apple no longer lists is checked at its end or at the safety net")
    func unlisted() {
        let annual = subscription(.active, expiresIn: 200 * day)
        #expect(policy.nextCheck(forUnlisted: annual, now: now, mode: .feed).timeIntervalSince(now) == 35 * day)
        #expect(policy.nextCheck(forUnlisted: annual, now: now).timeIntervalSince(now) == 7 * day)
    }
}
