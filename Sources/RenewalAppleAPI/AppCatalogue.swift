import Logging
import RenewalCore

/// Several apps in one database (the apps file): each app's identity and the verifier that holds its
/// credentials (its shared secret, its App Store Server API key and bundle id).
///
/// A row pinned to an app (imported with `bundle_id`, or pinned by an earlier answer) is checked
/// with that app's credentials only. A row of unknown app is tried with each app in the file's order
/// until one is not refused (Apple's 21004 for a shared secret that is not the receipt's app's, or
/// a transaction id the app's key does not know): the answer then pins it.
public struct AppCatalogue: ReceiptVerifier {
    public struct App: Sendable {
        /// The app's bundle id and products.
        public var identity: AppIdentity
        /// Asks Apple with this app's credentials.
        public var verifier: any ReceiptVerifier
        /// The app's change feed (its Server API key's Notification History); nil without a key.
        public var feed: (any NotificationFeed)?
        /// The app's Get Transaction History (its Server API key); nil without a key.
        public var history: (any TransactionHistory)?
        /// Answers the app's refund requests and extends its subscribers' renewal dates (its Server API key);
        /// nil without a key.
        public var operatorActions: (any OperatorActions)?

        public init(
            identity: AppIdentity, verifier: any ReceiptVerifier, feed: (any NotificationFeed)? = nil,
            history: (any TransactionHistory)? = nil, operatorActions: (any OperatorActions)? = nil
        ) {
            self.identity = identity
            self.verifier = verifier
            self.feed = feed
            self.history = history
            self.operatorActions = operatorActions
        }

        /// The app's bundle id (the apps file requires one).
        public var bundleID: String { identity.bundleID ?? "" }
    }

    /// In the apps file's order: the order in which a row of unknown app is tried.
    public let apps: [App]
    private let byBundle: [String: App]

    public init(apps: [App]) {
        self.apps = apps
        self.byBundle = Dictionary(apps.map { ($0.bundleID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The identity of each app, by bundle id (what answers are screened with).
    public var identities: [String: AppIdentity] { byBundle.mapValues(\.identity) }

    /// The bundle ids, in the file's order.
    public var bundleIDs: [String] { apps.map(\.bundleID) }

    public func verify(receipt: String, logger: Logger) async -> AppleAnswer {
        await verify(ReceiptCheck(receipt: receipt), skipping: [], logger: logger).answer
    }

    public func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        await verify(check, skipping: [], logger: logger).answer
    }

    /// Apple's answer about `check`, and the app whose credentials it was asked with (nil when no
    /// app's were: the row names an app the file does not list, or every app was refused).
    ///
    /// - Parameter stopped: apps whose credentials Apple rejected earlier in the run; a row of
    ///   unknown app is not tried with them.
    public func verify(_ check: ReceiptCheck, skipping stopped: Set<String>, logger: Logger) async -> (
        answer: AppleAnswer, app: String?
    ) {
        if let bundleID = check.bundleID {
            guard let app = byBundle[bundleID] else {
                return (.transient(Self.notConfigured(bundleID), isOutage: false), nil)
            }
            return (await app.verifier.verify(check, logger: logger), bundleID)
        }
        let candidates = apps.filter { !stopped.contains($0.bundleID) }
        var refusals = 0
        for app in candidates {
            let answer = await app.verifier.verify(check, logger: logger)
            // With one app left to ask, its refusal is about its own credentials: the caller stops it.
            guard apps.count > 1, Self.isRefusal(answer) else { return (answer, app.bundleID) }
            refusals += 1
        }
        return (.transient(Self.noneAccepted(tried: refusals), isOutage: false), nil)
    }

    /// An answer that says the app asked is not the receipt's (or its credentials are wrong, or it
    /// has no key to ask by a transaction id): the next app is tried.
    static func isRefusal(_ answer: AppleAnswer) -> Bool {
        switch answer {
        case .misconfigured: true
        case .transient(let failure, _): failure.reason == .transactionNotFound || failure.reason == .needsServerAPI
        case .verified, .rejected: false
        }
    }

    static func notConfigured(_ bundleID: String) -> CheckFailure {
        CheckFailure(
            reason: .appNotConfigured,
            message:
                """
                The receipt belongs to \(bundleID) (its bundle_id), which the apps file does not list; it was not \
                checked. Add the app to the apps file, or re-import the row with the right bundle_id.
                """
        )
    }

    static func noneAccepted(tried: Int) -> CheckFailure {
        CheckFailure(
            reason: .noAppAccepted,
            message:
                """
                The receipt's app is not known and Apple refused it with the credentials of each of the \(tried) \
                apps tried (21004, a transaction id the app's key does not know, or no key to ask by); its state \
                is kept. Import it with its bundle_id, or add its app to the apps file.
                """
        )
    }
}
