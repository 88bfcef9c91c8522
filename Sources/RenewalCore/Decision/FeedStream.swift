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
