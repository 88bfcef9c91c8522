import Foundation

extension AppleEvidence {
    /// The facts of a valid verifyReceipt answer (status 0 or 21006): the one place its rows are
    /// flattened into subscriptions.
    ///
    /// - `latest_receipt_info` (plus iOS 6's `latest_expired_receipt_info`) is unordered: rows are
    ///   grouped by `original_transaction_id`, and the current transaction is the non-upgraded row with
    ///   the latest `expires_date`.
    /// - A subscription the latest transactions do not list is read from the receipt's own `in_app`
    ///   rows (`.receiptTransactions`): a subscriber who churned is still a subscriber, not "no subscription".
    /// - Renewal info that no transaction backs makes no subscription (`unmatchedRenewalInfo` names it).
    /// - Rows without `expires_date` are other purchases (consumables, non-renewing), not subscriptions.
    /// - Renewal info is matched by original transaction id; iOS 6 answers carry it at the top level.
    ///
    /// - Parameter answeredBy: the endpoint that answered, used when the body names no environment.
    public init(verifyReceipt response: VerifyReceiptResponse, answeredBy: AppStoreEnvironment?) {
        let environment = response.environment ?? answeredBy
        var latest = response.latestReceiptInfo
        if let expired = response.latestExpiredReceiptInfo { latest.append(expired) }
        let receiptRows = response.receipt?.inApp ?? []

        var groups: [String: (basis: EvidenceBasis, rows: [LatestReceiptInfo])] = [:]
        var order: [String] = []
        func collect(_ rows: [LatestReceiptInfo], as basis: EvidenceBasis) {
            for row in rows where row.expiresDate != nil {
                guard let key = row.originalTransactionID ?? row.transactionID else { continue }
                if let group = groups[key] {
                    // The receipt's rows never add to a subscription the latest transactions list.
                    if group.basis == basis { groups[key]?.rows.append(row) }
                } else {
                    order.append(key)
                    groups[key] = (basis, [row])
                }
            }
        }
        collect(latest, as: .latestTransactions)
        collect(receiptRows, as: .receiptTransactions)
        // Other purchases are counted in one list, so the receipt's copies are not counted twice.
        let purchases = latest.isEmpty ? receiptRows : latest
        let otherPurchases = purchases.count(where: { $0.expiresDate == nil })

        let renewals =
            response.pendingRenewalInfo.isEmpty
            ? response.topLevelRenewal.map { [$0] } ?? [] : response.pendingRenewalInfo
        var matched: Set<Int> = []
        let subscriptions = order.compactMap { key -> SubscriptionEvidence? in
            guard let group = groups[key] else { return nil }
            let index = Self.renewal(for: key, rows: group.rows, in: renewals)
            if let index { matched.insert(index) }
            return SubscriptionEvidence(
                originalTransactionID: key, rows: group.rows, renewal: index.map { renewals[$0] },
                environment: environment,
                basis: group.basis)
        }
        // Renewal info for a subscription no transaction shows is no evidence of a purchase (Apple's
        // documentation shows it with placeholder ids): it makes no subscription. One whose product a
        // listed subscription has is that subscription's, under an id that does not line up.
        let products = Set(groups.values.flatMap { $0.rows.compactMap(\.productID) })
        let unmatched = renewals.indices.compactMap { index -> String? in
            let info = renewals[index]
            guard !matched.contains(index), let id = info.originalTransactionID, groups[id] == nil,
                ![info.productID, info.autoRenewProductID].contains(where: { $0.map(products.contains) ?? false })
            else { return nil }
            return id
        }
        self.init(
            environment: environment, bundleID: response.receipt?.bundleID, latestReceipt: response.latestReceipt,
            subscriptions: subscriptions, otherPurchases: otherPurchases)
        self.unmatchedRenewalInfo = unmatched
    }

    /// The index of the renewal info for `originalTransactionID`, falling back to the product when the
    /// answer's ids do not line up (seen in anonymised real answers), or to the only one there is.
    private static func renewal(
        for originalTransactionID: String, rows: [LatestReceiptInfo], in infos: [PendingRenewalInfo]
    ) -> Int? {
        if let exact = infos.firstIndex(where: { $0.originalTransactionID == originalTransactionID }) {
            return exact
        }
        let products = Set(rows.compactMap(\.productID))
        let candidates = infos.indices.filter { index in
            let info = infos[index]
            return info.originalTransactionID == nil
                || [info.productID, info.autoRenewProductID].contains { $0.map(products.contains) ?? false }
        }
        return candidates.count == 1 ? candidates.first : nil
    }
}

extension SubscriptionEvidence {
    init(
        originalTransactionID: String, rows: [LatestReceiptInfo], renewal: PendingRenewalInfo?,
        environment: AppStoreEnvironment?,
        basis: EvidenceBasis
    ) {
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
            subscriptionGroupIdentifier: current?.subscriptionGroupIdentifier,
            basis: basis
        )
        // In one order whatever Apple's: by purchase, then id (the same transaction may be listed in
        // latest_receipt_info and in_app alike; it is recorded once).
        var seen: Set<String> = []
        transactions =
            rows.compactMap { LedgerTransaction(row: $0, originalTransactionID: originalTransactionID) }
            .sorted {
                ($0.purchasedAt ?? .distantPast, $0.transactionID) < ($1.purchasedAt ?? .distantPast, $1.transactionID)
            }
            .filter { seen.insert($0.transactionID).inserted }
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
