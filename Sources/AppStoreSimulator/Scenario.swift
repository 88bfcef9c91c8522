/// What Apple does with one simulated receipt over simulated time.
///
/// In the timelines below, `t` is the simulator clock, `s` the receipt's `start` and `p` its `period`.
public enum Scenario: String, Codable, CaseIterable, Sendable {
    /// Auto-renew on; renews every `p` forever. The current period is `floor((t - s) / p)`.
    case renewal
    /// Auto-renew `"0"`; one period `[s, s+p)`, then expired with `expiration_intent` `"1"`.
    case voluntaryExpiry = "voluntary_expiry"
    /// Auto-renew on, one period; from `s+p` in billing retry (`expiration_intent` `"2"`) until `s+p+60d`.
    case billingRetry = "billing_retry"
    /// As `billingRetry`, plus `grace_period_expires_date` = `s+p+16d`.
    case gracePeriod = "grace_period"
    /// As `billingRetry`, but payment is collected at `s+p+3d`: a new period starts then and renews every `p`.
    case billingRecovery = "billing_recovery"
    /// As `gracePeriod`, but payment is collected at `s+p+5d`, inside the grace period, which so ends early:
    /// the recovered period keeps the renewal date (it runs from the recovery to `s+2p`) and renews every `p`.
    case gracePeriodRecovery = "grace_period_recovery"
    /// Renews every `p`; the period containing `s+1.5p` is refunded at `s+1.5p` (reason `"0"`), then no renewals.
    case refund
    /// Renews every `p`; at `s+1.5p` the customer upgrades to `productID + ".premium"`.
    case upgrade
    /// Production answers 21007; sandbox answers like `renewal` with environment `Sandbox`.
    case sandbox
    /// `renewal` with `in_app_ownership_type` `FAMILY_SHARED`.
    case familyShared = "family_shared"
    /// `renewal` whose first period is a free trial.
    case trial
    /// An iOS 6-style answer: one period, then status 21006 with `latest_expired_receipt_info`.
    case legacyIOS6 = "legacy_ios6"
    /// Two subscription groups: one renewing, one (`productID + ".addon"`) expiring voluntarily.
    case multipleSubscriptions = "multiple_subscriptions"
    /// Status 21010.
    case accountNotFound = "account_not_found"
    /// Status 21003.
    case notAuthentic = "not_authentic"
    /// Status 21002 on every request.
    case malformed
    /// The first two requests for the account answer 21005, then like `renewal`.
    case transient21005 = "transient_21005"
    /// HTTP 503 with an HTML body.
    case outage
    /// HTTP 200 with an HTML page.
    case html200 = "html_200"
    /// HTTP 200 `application/json` holding the first half of a valid `renewal` answer.
    case truncatedJSON = "truncated_json"
    /// A `renewal` answer delayed by the configured slow delay.
    case slow
    /// `renewal` bought as a multiseat purchase of `SimulatedReceipt.purchasedSeats` seats (Apple-hosted
    /// invitations, the price per seat). At `s+1.5p` two of them are refunded: a `REFUND` notification of
    /// subtype `SEATS`, the current transaction carrying `revokedSeatQuantity` 2 and no revocation date;
    /// later renewals are for the seats left.
    case multiseat
    /// `renewal` of a member of a multiseat purchase: a transaction of its own with
    /// `inAppOwnershipType` `ASSIGNED` and the purchaser's seat information.
    case assignedSeat = "assigned_seat"
    /// `renewal` whose customer asks Apple for a refund of the second period: a `CONSUMPTION_REQUEST`
    /// (reason `UNSATISFIED_WITH_PURCHASE`) at `s+1.2p`, then `REFUND_DECLINED` at `s+1.2p+2d`; it renews on.
    case refundRequest = "refund_request"
}
