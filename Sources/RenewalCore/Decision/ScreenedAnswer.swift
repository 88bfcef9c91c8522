/// Apple's answer about one stored receipt, screened once against the receipt's app: what
/// `EntitlementDecision` reads.
public enum ScreenedAnswer: Sendable, Hashable {
    /// A valid answer, limited to the receipt's app and its products.
    case verified(AppleEvidence)
    /// A valid answer about another app, or only about products the app does not sell: it changes
    /// nothing and is recorded as a failure.
    case notThisApp(AppIdentity.ScreeningFailure)
    /// Apple refuses the receipt itself (21002 on every attempt, 21003, 21010).
    case rejected(AppleRejection)
    /// No usable answer; `isOutage` says the failure is Apple's (or the network's).
    case transient(CheckFailure, isOutage: Bool)
    /// The job's own configuration is wrong for every receipt.
    case misconfigured(CheckFailure)

    /// The subscriptions of a valid answer that `receipt` does not hold yet: their owner is settled in
    /// the transaction that writes the result.
    public func claims(of receipt: StoredReceipt) -> [String] {
        guard case .verified(let evidence) = self else { return [] }
        let held = Set(receipt.subscriptions.map(\.snapshot.originalTransactionID))
        return evidence.originalTransactionIDs.filter { !held.contains($0) }
    }
}

extension EntitlementDecision.Rules {
    /// `answer` screened against the receipt's app (see `screen(_:of:)` for evidence).
    public func screen(_ answer: AppleAnswer, of receipt: StoredReceipt) -> ScreenedAnswer {
        switch answer {
        case .verified(let evidence):
            switch screen(evidence, of: receipt) {
            case .success(let screened): .verified(screened)
            case .failure(let failure): .notThisApp(failure)
            }
        case .rejected(let rejection): .rejected(rejection)
        case .transient(let failure, let isOutage): .transient(failure, isOutage: isOutage)
        case .misconfigured(let failure): .misconfigured(failure)
        }
    }

    /// `evidence` limited to the receipt's app. Fails when the answer names a bundle other than the
    /// one the receipt is pinned to, a bundle the apps file does not list, or only unknown products.
    public func screen(_ evidence: AppleEvidence, of receipt: StoredReceipt) -> Result<
        AppleEvidence, AppIdentity.ScreeningFailure
    > {
        if let pinned = receipt.bundleID, let found = evidence.bundleID, found != pinned {
            return .failure(
                AppIdentity.ScreeningFailure(
                    reason: .wrongBundle,
                    message:
                        """
                        Apple's answer is for bundle \(found), but the receipt belongs to \(pinned) (its stored \
                        bundle_id); nothing was changed. Re-import the row with the right bundle_id.
                        """
                ))
        }
        guard !apps.isEmpty else { return identity.screen(evidence) }
        guard let bundleID = evidence.bundleID ?? receipt.bundleID, let app = apps[bundleID] else {
            let named = evidence.bundleID.map { "bundle \($0)" } ?? "no bundle"
            return .failure(
                AppIdentity.ScreeningFailure(
                    reason: .wrongBundle,
                    message:
                        """
                        Apple's answer is for \(named), which the apps file does not list; nothing was changed. \
                        Add the app to the apps file if it is yours.
                        """
                ))
        }
        return app.screen(evidence)
    }
}
