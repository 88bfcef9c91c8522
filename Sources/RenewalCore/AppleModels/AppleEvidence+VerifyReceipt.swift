import Foundation

extension AppleEvidence {
    /// The facts of a valid verifyReceipt answer (status 0 or 21006): the one place its rows are
    /// flattened into subscriptions.
    ///
    /// - `latest_receipt_info` (plus iOS 6's `latest_expired_receipt_info`) is unordered: rows are
    ///   grouped by `original_transaction_id`, and the current transaction is the non-upgraded row with
    ///   the latest `expires_date`. When the answer has no such rows, the receipt's `in_app` rows are read.
    /// - Rows without `expires_date` are other purchases (consumables, non-renewing), not subscriptions.
    /// - Renewal info is matched by original transaction id; iOS 6 answers carry it at the top level.
    ///
    /// - Parameter answeredBy: the endpoint that answered, used when the body names no environment.
    public init(verifyReceipt response: VerifyReceiptResponse, answeredBy: AppStoreEnvironment?) {
        var rows = response.latestReceiptInfo
        if let expired = response.latestExpiredReceiptInfo { rows.append(expired) }
        if rows.isEmpty { rows = response.receipt?.inApp ?? [] }
        let environment = response.environment ?? answeredBy

        var groups: [String: [LatestReceiptInfo]] = [:]
        var order: [String] = []
        var otherPurchases = 0
        for row in rows {
            guard row.expiresDate != nil else {
                otherPurchases += 1
                continue
            }
            guard let key = row.originalTransactionID ?? row.transactionID else { continue }
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(row)
        }
        let renewals = response.pendingRenewalInfo.isEmpty ? response.topLevelRenewal.map { [$0] } ?? [] : response.pendingRenewalInfo

        let subscriptions = order.compactMap { key -> SubscriptionEvidence? in
            guard let group = groups[key] else { return nil }
            let pending = Self.renewal(for: key, rows: group, in: renewals)
            return SubscriptionEvidence(originalTransactionID: key, rows: group, renewal: pending, environment: environment)
        }
        self.init(
            environment: environment, bundleID: response.receipt?.bundleID, latestReceipt: response.latestReceipt,
            subscriptions: subscriptions, otherPurchases: otherPurchases)
    }

    /// Renewal info by `original_transaction_id`, falling back to the product when the answer's ids
    /// do not line up (seen in anonymised real answers), or to the only one there is.
    private static func renewal(
        for originalTransactionID: String, rows: [LatestReceiptInfo], in infos: [PendingRenewalInfo]
    ) -> PendingRenewalInfo? {
        if let exact = infos.first(where: { $0.originalTransactionID == originalTransactionID }) {
            return exact
        }
        let products = Set(rows.compactMap(\.productID))
        let candidates = infos.filter { info in
            info.originalTransactionID == nil || [info.productID, info.autoRenewProductID].contains { $0.map(products.contains) ?? false }
        }
        return candidates.count == 1 ? candidates.first : nil
    }
}

extension SubscriptionEvidence {
    init(originalTransactionID: String, rows: [LatestReceiptInfo], renewal: PendingRenewalInfo?, environment: AppStoreEnvironment?) {
        let granting = rows.filter { $0.isUpgraded != true }
        let current = Self.current(of: granting.isEmpty ? rows : granting)
        self.init(
            originalTransactionID: originalTransactionID,
            productID: current?.productID,
            expiresAt: current?.expiresDate,
            isUpgraded: granting.isEmpty,
            cancelledAt: current?.cancellationDate,
            autoRenew: renewal?.autoRenewStatus,
            autoRenewProductID: renewal?.autoRenewProductID,
            gracePeriodExpiresAt: renewal?.gracePeriodExpiresDate,
            isInBillingRetry: renewal?.isInBillingRetryPeriod ?? false,
            expirationIntent: renewal?.expirationIntent,
            isTrialPeriod: current?.isTrialPeriod ?? false,
            isInIntroOfferPeriod: current?.isInIntroOfferPeriod ?? false,
            ownershipType: current?.inAppOwnershipType,
            environment: environment,
            latestTransactionID: current?.transactionID,
            subscriptionGroupIdentifier: current?.subscriptionGroupIdentifier
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
