/// The app the job checks receipts for. A team's shared secret works for all its apps, so an answer
/// about another app's receipt is valid to Apple and must still change nothing here.
public struct AppIdentity: Sendable, Hashable {
    /// `APPSTORE_BUNDLE_ID`; nil accepts any bundle (set-ups from before the setting existed).
    public var bundleID: String?
    /// The products the app sells (`--products`, `RENEWAL_PRODUCTS`, or those seen in the
    /// database); nil accepts any product.
    public var productIDs: Set<String>?
    /// Where the bundle and products are set, for messages. Default the single-app settings.
    public var configuredIn: String

    public init(
        bundleID: String? = nil, productIDs: Set<String>? = nil,
        configuredIn: String = "APPSTORE_BUNDLE_ID, --products / RENEWAL_PRODUCTS"
    ) {
        self.bundleID = bundleID
        self.productIDs = productIDs
        self.configuredIn = configuredIn
    }

    /// The evidence limited to this app: subscriptions of unknown products are dropped. Fails when the
    /// answer names another bundle, or when every subscription in it is of an unknown product.
    public func screen(_ evidence: AppleEvidence) -> Result<AppleEvidence, ScreeningFailure> {
        if let expected = bundleID, let found = evidence.bundleID, found != expected {
            return .failure(
                ScreeningFailure(
                    reason: .wrongBundle,
                    message:
                        """
                        Apple's answer is for bundle \(found), not \(expected) (\(configuredIn)); nothing was \
                        changed. Import the receipt into that app's database, or fix the bundle id.
                        """
                ))
        }
        guard let productIDs else { return .success(evidence) }
        var screened = evidence
        screened.subscriptions = evidence.subscriptions.filter { subscription in
            subscription.productID.map(productIDs.contains) ?? false
        }
        if screened.subscriptions.isEmpty, !evidence.subscriptions.isEmpty {
            let unknown = Set(evidence.subscriptions.compactMap(\.productID)).sorted().joined(separator: ", ")
            return .failure(
                ScreeningFailure(
                    reason: .unknownProducts,
                    message:
                        """
                        Apple's answer only lists products this app does not sell (\(unknown)); nothing was \
                        changed. Add them to the products (\(configuredIn)) if they are this app's.
                        """
                ))
        }
        return .success(screened)
    }

    /// Why an answer is not about this app.
    public struct ScreeningFailure: Error, Sendable, Hashable {
        public var reason: FailureReason
        public var message: String

        public init(reason: FailureReason, message: String) {
            self.reason = reason
            self.message = message
        }

        public var checkFailure: CheckFailure { CheckFailure(reason: reason, message: message) }
    }
}
