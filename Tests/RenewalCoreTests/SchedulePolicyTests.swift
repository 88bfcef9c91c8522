import Foundation
import Testing

@testable import RenewalCore

/// `SchedulePolicy` against docs/design.md §4 and the default schedule in docs/operating.md, with the default policy and a fixed `now`.
@Suite struct SchedulePolicyTests {
    let policy = SchedulePolicy()
    let now = Clock.now
    let hour = Clock.hour
    let day = Clock.day

    func subscription(
        _ state: SubscriptionState, expiresIn: TimeInterval?, autoRenew: Bool? = true, graceEndsIn: TimeInterval? = nil
    ) -> SubscriptionSnapshot {
        SubscriptionSnapshot(
            originalTransactionID: "1000000000000001", productID: "com.example.monthly", state: state,
            expiresAt: expiresIn.map(Clock.at), autoRenew: autoRenew, gracePeriodExpiresAt: graceEndsIn.map(Clock.at),
            isInBillingRetry: state == .billingRetry || state == .gracePeriod, environment: .production)
    }

    func next(_ subscription: SubscriptionSnapshot) -> TimeInterval {
        policy.nextCheck(for: subscription, now: now).timeIntervalSince(now)
    }

    // MARK: entitled

    @Test(
        "An entitled subscription far from expiry is re-checked weekly for refunds, never sooner than a day",
        arguments: [true, false, nil] as [Bool?])
    func weeklyRefundCheck(autoRenew: Bool?) {
        let interval = next(subscription(.active, expiresIn: 200 * day, autoRenew: autoRenew))

        #expect(interval <= 7 * day)
        #expect(interval >= day)
        #expect(interval == 7 * day)
    }

    @Test("A grace period far from its end is still checked at least daily")
    func graceFarFromEnd() {
        #expect(next(subscription(.gracePeriod, expiresIn: -day, graceEndsIn: 20 * day)) == day)
    }

    @Test(
        "Active with auto-renew on is checked one hour before expiry when that is sooner than a week",
        arguments: [true, nil] as [Bool?])
    func beforeExpiry(autoRenew: Bool?) {
        #expect(next(subscription(.active, expiresIn: 5 * hour, autoRenew: autoRenew)) == 4 * hour)
        #expect(next(subscription(.active, expiresIn: 3 * day, autoRenew: autoRenew)) == 3 * day - hour)
    }

    @Test("Active with auto-renew on, inside the last hour, is checked just after expiry")
    func insideLastHour() {
        #expect(next(subscription(.active, expiresIn: 30 * 60)) == 30 * 60 + 15 * 60)
    }

    @Test("Active with auto-renew off is checked just after expiry, not before")
    func autoRenewOff() {
        #expect(next(subscription(.active, expiresIn: 3 * day, autoRenew: false)) == 3 * day + 15 * 60)
        #expect(next(subscription(.active, expiresIn: 5 * hour, autoRenew: false)) == 5 * hour + 15 * 60)
    }

    @Test("A grace period is checked daily and just after it ends, whichever is sooner")
    func gracePeriod() {
        #expect(next(subscription(.gracePeriod, expiresIn: -2 * day, graceEndsIn: 3 * day)) == day)
        #expect(next(subscription(.gracePeriod, expiresIn: -2 * day, graceEndsIn: 5 * hour)) == 5 * hour + 15 * 60)
    }

    @Test(
        "Billing retry is checked daily for 60 days after expiry, then backs off",
        arguments: [
            (-1.0, 1.0), (-30, 1), (-59.9, 1), (-60.1, 30), (-200, 30),
        ] as [(Double, Double)])
    func billingRetry(expiredDaysAgo: Double, expectedDays: Double) {
        #expect(next(subscription(.billingRetry, expiresIn: expiredDaysAgo * day)) == expectedDays * day)
    }

    @Test(
        "An expired subscription backs off 1 d, then 7 d, then 30 d",
        arguments: [
            (-0.5, 1.0), (-6.9, 1), (-7.1, 7), (-36.9, 7), (-37.1, 30), (-400, 30),
        ] as [(Double, Double)])
    func expiredBackoff(expiresInDays: Double, expectedDays: Double) {
        #expect(next(subscription(.expired, expiresIn: expiresInDays * day, autoRenew: false)) == expectedDays * day)
    }

    @Test(
        "Revoked, invalid and unverified rows are checked rarely",
        arguments: [SubscriptionState.revoked, .invalid, .unverified])
    func dormant(state: SubscriptionState) {
        #expect(next(subscription(state, expiresIn: 10 * day)) == 30 * day)
    }

    @Test("States without an expiry are scheduled from now")
    func missingExpiry() {
        #expect(next(subscription(.expired, expiresIn: nil)) == day)
        #expect(next(subscription(.billingRetry, expiresIn: nil)) == day)
        #expect(next(subscription(.active, expiresIn: nil)) == 15 * 60)
        #expect(next(subscription(.gracePeriod, expiresIn: nil, graceEndsIn: nil)) == 15 * 60)
    }

    @Test("Nothing is scheduled sooner than the minimum interval")
    func minimumInterval() {
        // One hour and 30 s before expiry: "one hour before" would be in 30 s.
        #expect(next(subscription(.active, expiresIn: hour + 30)) == 60)
        // A grace period that already ended at this instant.
        #expect(next(subscription(.gracePeriod, expiresIn: -day, graceEndsIn: -20 * 60)) == 60)
    }

    @Test("Every state is scheduled strictly in the future", arguments: SubscriptionState.allCases)
    func alwaysFuture(state: SubscriptionState) {
        for expiresIn in [-400 * day, -day, -60, 0, 60, hour, day, 400 * day] as [TimeInterval] {
            for graceEndsIn in [nil, -day, 0, day] as [TimeInterval?] {
                #expect(
                    next(subscription(state, expiresIn: expiresIn, graceEndsIn: graceEndsIn)) >= policy.minimumInterval)
            }
        }
    }

    @Test("A configured policy is followed")
    func configuredPolicy() {
        var custom = SchedulePolicy()
        custom.beforeExpiry = 2 * hour
        custom.entitledMaximumInterval = day
        custom.dormantInterval = 90 * day

        #expect(custom.nextCheck(for: subscription(.active, expiresIn: 10 * hour), now: now) == Clock.at(8 * hour))
        #expect(custom.nextCheck(for: subscription(.active, expiresIn: 10 * day), now: now) == Clock.at(day))
        #expect(custom.nextCheck(for: subscription(.revoked, expiresIn: nil), now: now) == Clock.at(90 * day))
    }

    // MARK: failures

    @Test(
        "Failure backoff doubles per consecutive failure and is capped",
        arguments: [
            (1, 300.0), (2, 600), (3, 1200), (4, 2400), (5, 4800), (6, 9600), (7, 19_200), (8, 21_600), (9, 21_600),
            (1000, 21_600), (Int.max, 21_600), (0, 300), (-3, 300),
        ] as [(Int, Double)])
    func failureBackoff(failures: Int, expected: TimeInterval) {
        let at = policy.nextCheckAfterFailure(consecutiveFailures: failures, now: now, random: 0.5)
        #expect(at.timeIntervalSince(now) == expected)
    }

    @Test("Failure jitter stays within ±20 % and spans the range", arguments: [1, 3, 8])
    func failureJitter(failures: Int) {
        let base = min(300 * pow(2, Double(failures - 1)), 21_600)
        var seen: [TimeInterval] = []
        for step in 0..<100 {
            let random = Double(step) / 100
            seen.append(
                policy.nextCheckAfterFailure(consecutiveFailures: failures, now: now, random: random).timeIntervalSince(
                    now))
        }

        #expect(seen.allSatisfy { $0 >= base * 0.8 - 1e-6 && $0 <= base * 1.2 + 1e-6 })
        #expect(abs((seen.min() ?? 0) - base * 0.8) < 1e-6)
        #expect((seen.max() ?? 0) > base * 1.19)
        #expect(seen == seen.sorted())
    }

    @Test("Failure backoff never goes below the minimum interval")
    func failureMinimum() {
        var custom = SchedulePolicy()
        custom.failureBackoffBase = 10
        #expect(custom.nextCheckAfterFailure(consecutiveFailures: 1, now: now, random: 0).timeIntervalSince(now) == 60)
    }

    // MARK: configuration file

    @Test("A partial JSON policy overrides only the keys it names")
    func partialPolicy() throws {
        let json =
            #"{"before_expiry": 7200, "failure_jitter": 0.1, "malformed_checks_before_invalid": 5, "unknown": 1}"#

        let decoded = try JSONDecoder().decode(SchedulePolicy.self, from: Data(json.utf8))

        var expected = SchedulePolicy()
        expected.beforeExpiry = 7200
        expected.failureJitter = 0.1
        expected.malformedChecksBeforeInvalid = 5
        #expect(decoded == expected)
        #expect(decoded.afterExpiry == 900)
        #expect(decoded.entitledMaximumInterval == 7 * 86_400)
        #expect(decoded.dormantInterval == 30 * 86_400)
    }

    @Test("An empty JSON policy is the default policy, and the defaults are the documented ones")
    func emptyPolicy() throws {
        let decoded = try JSONDecoder().decode(SchedulePolicy.self, from: Data("{}".utf8))

        #expect(decoded == SchedulePolicy())
        #expect(decoded.beforeExpiry == 3600)
        #expect(decoded.afterExpiry == 900)
        #expect(decoded.billingInterval == 86_400)
        #expect(decoded.billingRetryWindow == 60 * 86_400)
        #expect(decoded.expiredFirstWeekInterval == 86_400)
        #expect(decoded.expiredFirstMonthInterval == 7 * 86_400)
        #expect(decoded.failureBackoffBase == 300)
        #expect(decoded.failureBackoffMaximum == 6 * 3600)
        #expect(decoded.failureJitter == 0.2)
        #expect(decoded.minimumInterval == 60)
        #expect(decoded.malformedChecksBeforeInvalid == 3)
    }

    @Test("A policy survives encoding and decoding")
    func policyRoundTrip() throws {
        var policy = SchedulePolicy()
        policy.afterExpiry = 1234
        policy.malformedChecksBeforeInvalid = 7

        let data = try JSONEncoder().encode(policy)

        #expect(try JSONDecoder().decode(SchedulePolicy.self, from: data) == policy)
        #expect(String(decoding: data, as: UTF8.self).contains(#""after_expiry":1234"#))
    }

    @Test(
        "A negative or non-numeric interval is rejected",
        arguments: [#"{"after_expiry": -1}"#, #"{"billing_interval": "daily"}"#])
    func invalidPolicy(json: String) {
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(SchedulePolicy.self, from: Data(json.utf8)) }
    }
}
