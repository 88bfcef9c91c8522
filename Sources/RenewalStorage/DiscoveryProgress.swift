import Foundation
import RenewalCore

/// How far `renewal discover` has read one feed stream's window of Notification History: stored after
/// every page, so a discover killed half way resumes at the page it had not recorded yet instead of
/// asking Apple for the whole window again (a page read twice is harmless: each notification's uuid is
/// recorded once).
public struct DiscoveryProgress: Sendable, Hashable {
    /// The window being read, `[start, end)`.
    public var start: Date
    public var end: Date
    /// The token of the next page to read; nil before the first page and after the last.
    public var pageToken: String?
    public var pages: Int
    /// Notifications read so far in this window (new or recorded before).
    public var notifications: Int
    public var startedAt: Date
    /// When the window was read to its end; nil while it is being read (or was interrupted).
    public var completedAt: Date?

    public init(
        start: Date, end: Date, pageToken: String? = nil, pages: Int = 0, notifications: Int = 0, startedAt: Date,
        completedAt: Date? = nil
    ) {
        self.start = start
        self.end = end
        self.pageToken = pageToken
        self.pages = pages
        self.notifications = notifications
        self.startedAt = startedAt
        self.completedAt = completedAt
    }
}

/// Where `renewal discover` keeps its progress, apart from the regular feed's cursor (`feed_cursors`),
/// which a discover never moves.
public protocol DiscoveryProgressStore: Sendable {
    /// The progress of `stream`'s last discover; nil when none ran.
    func discoveryProgress(_ stream: FeedStream) async throws -> DiscoveryProgress?
    /// Stores `progress` as `stream`'s, replacing what was there.
    func saveDiscoveryProgress(_ progress: DiscoveryProgress, of stream: FeedStream, now: Date) async throws
}
