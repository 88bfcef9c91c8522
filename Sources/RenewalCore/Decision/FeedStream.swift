import Foundation

/// One of Apple's change feeds: an environment's, and with several apps in one database, one app's
/// (Notification History is per app).
public struct FeedStream: Sendable, Hashable, CustomStringConvertible {
    public var environment: AppStoreEnvironment
    /// The app's bundle id with several apps; nil for one app.
    public var app: String?

    public init(_ environment: AppStoreEnvironment, app: String? = nil) {
        self.environment = environment
        self.app = app
    }

    /// The key its cursor is stored under (`feed_cursors.environment`): `Production`, or with several
    /// apps `com.example.app/Production`.
    public var key: String { app.map { "\($0)/\(environment.rawValue)" } ?? environment.rawValue }

    public var description: String { key }
}

extension FeedStream {
    /// The change kinds that show Apple renewed a subscription (a new paid period, or a failed renewal
    /// collected). Apple lists a notification for each on a working feed, so renewals taking effect
    /// while the feed listed nothing tell a silent feed from a quiet one (`FeedActivity.renewed`).
    public static let renewalKinds: [SubscriptionEvent.Kind] = [.renewed, .billingRecovered]
}
