import Foundation
import RenewalCore

extension Scenario {
    /// Whether a failed renewal gives the customer Apple's billing grace period (`grace_period_expires_date`).
    public var hasGracePeriod: Bool { self == .gracePeriod || self == .gracePeriodRecovery }
}

/// `grace_period_recovery`: a billing failure with a 16-day grace period that ends early because Apple
/// collected the payment on day 5 of it. Apple keeps the renewal date when billing recovers inside a
/// grace period, so the recovered period runs from the recovery to the date the failed renewal would have
/// ended, and renews every period from there; the change feed sends `DID_FAIL_TO_RENEW` (`GRACE_PERIOD`),
/// then `DID_RENEW` (`BILLING_RECOVERY`), and no `GRACE_PERIOD_EXPIRED`.
extension SimulatedReceipt {
    /// Days after the failed renewal at which `grace_period_recovery` collects the payment.
    static let graceRecoveryDays: TimeInterval = 5

    /// `grace_period_recovery`'s dates at `now`: the failed renewal (the first period's end), the recovery,
    /// and the paid periods since the recovery up to the one `now` falls in (none before the recovery).
    /// An extension Apple granted before the recovery moves the failure and the recovery; one granted after
    /// moves the period it was granted in and every later one.
    func graceRecoveryDates(until now: Date) -> (
        failure: Date, recovery: Date, periods: [(index: Int, start: Date, end: Date)]
    ) {
        let failure = extendedFirstEnd(until: now, grace: Self.graceRecoveryDays * Self.day)
        let recovery = failure.addingTimeInterval(Self.graceRecoveryDays * Self.day)
        guard now >= recovery else { return (failure, recovery, []) }
        let periods = extendedPeriods(
            from: recovery, firstEnd: failure.addingTimeInterval(period), firstIndex: 1, until: now)
        return (failure, recovery, periods)
    }

    /// What verifyReceipt (and so the Server API) says at `now`: before the failure, the first period with
    /// auto-renew on; in the grace period, that period with billing retry and the grace end 16 days after
    /// the failure; from the recovery, the recovered period (or a later renewal) and no billing issue.
    func graceRecoveryTimeline(at now: Date) -> Timeline {
        let originalID = SimulatedIdentifier.id(account)
        let dates = graceRecoveryDates(until: now)
        guard let current = dates.periods.last else {
            let first = SimulatedPeriod(
                index: 0, start: start, end: dates.failure, productID: productID, originalTransactionID: originalID,
                salt: "")
            let failed = now >= dates.failure
            let pending = PendingRenewalInfo(
                originalTransactionID: originalID, productID: productID, autoRenewStatus: true,
                expirationIntent: failed ? "2" : nil, isInBillingRetryPeriod: failed ? true : nil,
                gracePeriodExpiresDate: failed ? dates.failure.addingTimeInterval(Self.graceDays * Self.day) : nil)
            return Timeline(periods: [first], pending: [pending])
        }
        let period = SimulatedPeriod(
            index: current.index, start: current.start, end: current.end, productID: productID,
            originalTransactionID: originalID, salt: "")
        return Timeline(
            periods: [period],
            pending: [.init(originalTransactionID: originalID, productID: productID, autoRenewStatus: true)],
            renewals: current.index)
    }
}
