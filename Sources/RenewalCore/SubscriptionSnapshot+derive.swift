import Foundation

extension VerifiedReceipt {
    /// Derives the state of every subscription in a valid answer (status 0 or 21006) at `now`.
    ///
    /// Rules (DESIGN.md §3, reference §E):
    /// - `latest_receipt_info` is unordered: rows are grouped by `original_transaction_id` and the
    ///   current transaction is the non-upgraded row with the latest `expires_date`.
    /// - A row with `is_upgraded` never grants; a subscription whose rows are all upgraded is expired.
    /// - A `cancellation_date` on the current transaction means revoked.
    /// - A paid period not over is active, whatever auto-renew says; trial and intro periods too.
    /// - After expiry: grace period when `grace_period_expires_date` > now, else billing retry when
    ///   `is_in_billing_retry_period` is "1", else expired.
    /// - Rows without `expires_date` (non-subscription products) are ignored. When
    ///   `latest_receipt_info` is absent, the receipt's own `in_app` rows are read instead.
    ///
    /// - Parameters:
    ///   - response: the answer; callers pass only answers whose status disposition is `.valid`.
    ///   - answeredBy: the endpoint that answered, used when the body names no environment.
    ///   - now: the instant to evaluate at.
    public init(response: VerifyReceiptResponse, answeredBy: AppStoreEnvironment?, now: Date) {
        var rows = response.latestReceiptInfo
        if let expired = response.latestExpiredReceiptInfo { rows.append(expired) }
        if rows.isEmpty { rows = response.receipt?.inApp ?? [] }
        let environment = response.environment ?? answeredBy

        var groups: [String: [LatestReceiptInfo]] = [:]
        var order: [String] = []
        for row in rows where row.expiresDate != nil {
            guard let key = row.originalTransactionID ?? row.transactionID else { continue }
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(row)
        }

        let subscriptions = order.compactMap { key -> SubscriptionSnapshot? in
            guard let group = groups[key] else { return nil }
            let pending = Self.pendingRenewal(for: key, rows: group, in: response.pendingRenewalInfo)
            return SubscriptionSnapshot(
                originalTransactionID: key, rows: group, pending: pending,
                topLevelAutoRenew: response.autoRenewStatus, environment: environment, now: now)
        }
        self.init(environment: environment, latestReceipt: response.latestReceipt, subscriptions: subscriptions)
    }

    /// Matches renewal info by `original_transaction_id`, falling back to the product when the
    /// answer's ids do not line up (seen in anonymised real answers).
    private static func pendingRenewal(
        for originalTransactionID: String, rows: [LatestReceiptInfo], in infos: [PendingRenewalInfo]
    ) -> PendingRenewalInfo? {
        if let exact = infos.first(where: { $0.originalTransactionID == originalTransactionID }) {
            return exact
        }
        let products = Set(rows.compactMap(\.productID))
        let candidates = infos.filter { info in
            [info.productID, info.autoRenewProductID].contains { $0.map(products.contains) ?? false }
        }
        return candidates.count == 1 ? candidates.first : nil
    }
}

extension SubscriptionSnapshot {
    init(
        originalTransactionID: String, rows: [LatestReceiptInfo], pending: PendingRenewalInfo?,
        topLevelAutoRenew: Bool?, environment: AppStoreEnvironment?, now: Date
    ) {
        let granting = rows.filter { $0.isUpgraded != true }
        let current = Self.current(of: granting.isEmpty ? rows : granting) ?? LatestReceiptInfo(
            productID: nil, transactionID: nil, originalTransactionID: originalTransactionID,
            purchaseDate: nil, expiresDate: nil)
        let expiresAt = current.expiresDate
        let graceEnd = pending?.gracePeriodExpiresDate
        let retrying = pending?.isInBillingRetryPeriod ?? false

        let state: SubscriptionState
        if granting.isEmpty {
            state = .expired
        } else if let cancelled = current.cancellationDate, cancelled <= now {
            state = .revoked
        } else if let expiresAt, expiresAt > now {
            state = .active
        } else if let graceEnd, graceEnd > now {
            state = .gracePeriod
        } else if retrying {
            state = .billingRetry
        } else {
            state = .expired
        }

        self.init(
            originalTransactionID: originalTransactionID,
            productID: current.productID,
            state: state,
            expiresAt: expiresAt,
            autoRenew: pending?.autoRenewStatus ?? topLevelAutoRenew,
            autoRenewProductID: pending?.autoRenewProductID,
            gracePeriodExpiresAt: state == .gracePeriod ? graceEnd : nil,
            isInBillingRetry: retrying,
            cancelledAt: current.cancellationDate,
            expirationIntent: state == .active ? nil : pending?.expirationIntent,
            isTrialPeriod: current.isTrialPeriod ?? false,
            isInIntroOfferPeriod: current.isInIntroOfferPeriod ?? false,
            ownershipType: current.inAppOwnershipType,
            environment: environment,
            latestTransactionID: current.transactionID,
            subscriptionGroupIdentifier: current.subscriptionGroupIdentifier
        )
    }

    /// The row with the latest expiry; ties go to the latest purchase, then the larger transaction id,
    /// so the choice does not depend on the order Apple listed the rows in.
    private static func current(of rows: [LatestReceiptInfo]) -> LatestReceiptInfo? {
        rows.max { a, b in
            let ea = a.expiresDate ?? .distantPast
            let eb = b.expiresDate ?? .distantPast
            if ea != eb { return ea < eb }
            let pa = a.purchaseDate ?? .distantPast
            let pb = b.purchaseDate ?? .distantPast
            if pa != pb { return pa < pb }
            return (a.transactionID ?? "").compare(b.transactionID ?? "", options: .numeric) == .orderedAscending
        }
    }
}
