import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// `renewal discover`: reads Apple's Notification History over a window the operator chooses (up to the
/// 180 days Apple keeps) and adopts every subscription it names that the database lacks (docs/design.md
/// §7, docs/lost-purchases.md). The regular feed only reads since its cursor; a purchase lost before the
/// job ran, or during a gap, is only found this way.
///
/// Each notification goes through the feed's own recording (`recordFeedNotifications`, Core's
/// `FeedNotificationPlan` and `PurchaseAdoption`): no second copy of the rules. A notification recorded
/// before (by the feed or an earlier discover) is not acted on again, so a discover after a discover
/// adopts nothing new. Adopted rows are due now: the next `run` checks them.
///
/// Progress is its own (`DiscoveryProgressStore`, one row per feed stream), stored after every page: a
/// discover killed half way resumes the same window at the page it had not finished. The feed's cursor
/// is never moved.
public struct Discovery: Sendable {
    /// The feeds to read, by app (nil: the one app).
    public var feeds: [(app: String?, feed: any NotificationFeed)]
    public var store: any SubscriptionStore
    public var progress: any DiscoveryProgressStore
    public var held: any HeldSubscriptionReading
    /// The rules adoption is judged with: the configured apps and products.
    public var rules: EntitlementDecision.Rules
    public var queueWebhooks: Bool
    public var logger: Logger
    public var clock: @Sendable () -> Date

    public init(
        feeds: [(app: String?, feed: any NotificationFeed)], store: any SubscriptionStore,
        progress: any DiscoveryProgressStore, held: any HeldSubscriptionReading, rules: EntitlementDecision.Rules,
        queueWebhooks: Bool, logger: Logger, clock: @escaping @Sendable () -> Date
    ) {
        self.feeds = feeds
        self.store = store
        self.progress = progress
        self.held = held
        self.rules = rules
        self.queueWebhooks = queueWebhooks
        self.logger = logger
        self.clock = clock
    }

    /// Apple keeps Notification History this long in production (30 days in the sandbox).
    public static let longest: TimeInterval = 180 * 86_400

    /// The environments whose history is read.
    public static let environments: [AppStoreEnvironment] = [.production, .sandbox]

    /// Reads `[now - since, now]` of every feed in every environment (a stream whose last discover was
    /// interrupted: the rest of that window first) and adopts what the database lacks.
    public func discover(since: TimeInterval, now: Date) async throws -> DiscoveryOutcome {
        var outcome = DiscoveryOutcome()
        for (app, feed) in feeds {
            for environment in Self.environments {
                let stream = FeedStream(environment, app: app)
                let done = try await store.exclusively("discover/" + stream.key) { [self] in
                    var streamOutcome = DiscoveryOutcome()
                    try await read(stream, from: feed, since: since, now: now, into: &streamOutcome)
                    return streamOutcome
                }
                if let done { outcome.add(done) } else { outcome.busy.insert(stream) }
            }
        }
        return outcome
    }

    /// The window to read for `stream`: the interrupted one, when it is still within what Apple keeps,
    /// else a new one ending now.
    func window(of stream: FeedStream, since: TimeInterval, now: Date) async throws -> (DiscoveryProgress, Bool) {
        // A minute's margin: Apple refuses a start older than it keeps, and the request leaves later.
        let oldest = now.addingTimeInterval(-FeedPull.kept(stream.environment) + 60)
        // Compared in whole milliseconds, the precision the database keeps times in.
        let ms = AppleDateFormat.milliseconds
        if let stored = try await progress.discoveryProgress(stream), stored.completedAt == nil,
            ms(stored.start) >= ms(oldest), ms(stored.end) <= ms(now)
        {
            return (stored, true)
        }
        let start = max(now.addingTimeInterval(-since), oldest)
        return (DiscoveryProgress(start: start, end: now, startedAt: now), false)
    }

    private func read(
        _ stream: FeedStream, from feed: any NotificationFeed, since: TimeInterval, now: Date,
        into outcome: inout DiscoveryOutcome
    ) async throws {
        var logger = self.logger
        if let app = stream.app { logger[metadataKey: LogKey.app] = "\(app)" }
        var (state, resumed) = try await window(of: stream, since: since, now: now)
        if resumed { outcome.resumed.insert(stream) }
        outcome.windows[stream] = state.start...state.end
        try await progress.saveDiscoveryProgress(state, of: stream, now: clock())
        var tracker = DiscoveryTracker()
        repeat {
            switch await feed.notificationPage(
                environment: stream.environment, start: state.start, end: state.end, token: state.pageToken,
                logger: logger)
            {
            case .failure(let error):
                outcome.failed[stream] = error.reason
                logger.warning(
                    "Notification History could not be read; run discover again to go on from this page",
                    metadata: [
                        LogKey.appStoreEnvironment: "\(stream.environment.rawValue)",
                        LogKey.reason: "\(error.reason)",
                    ])
                outcome.add(tracker.outcome)
                return
            case .success(let page):
                try await record(page, of: stream, tracker: &tracker)
                state.pages += 1
                state.notifications += page.notifications.count
                state.pageToken = page.nextToken
                if page.nextToken == nil { state.completedAt = clock() }
                try await progress.saveDiscoveryProgress(state, of: stream, now: clock())
            }
        } while state.pageToken != nil
        outcome.add(tracker.outcome)
    }

    /// Records one page through the feed's recording and notes which of the subscriptions it names were
    /// adopted by it (held after, not before).
    private func record(_ page: FeedPage, of stream: FeedStream, tracker: inout DiscoveryTracker) async throws {
        let named = Set(page.notifications.compactMap(\.originalTransactionID))
        let open = Array(named.subtracting(tracker.adopted).subtracting(tracker.held)).sorted()
        let before = try await open.isEmpty ? [:] : held.heldSubscriptions(originalTransactionIDs: open)
        let records = page.notifications.map {
            FeedNotificationRecord($0, environment: stream.environment, app: stream.app)
        }
        let now = clock()
        let context = EntitlementDecision.Context(
            now: now, random: 0.5, runID: nil, leaseOwner: nil, queueWebhooks: queueWebhooks, rules: rules)
        let recorded = try await store.recordFeedNotifications(records, runID: nil, now: now, applying: context)
        _ = try await store.recordUnreadableNotifications(
            page.unreadable.map { FeedNotificationRecord($0, environment: stream.environment, app: stream.app) },
            runID: nil, now: clock())
        let after = try await open.isEmpty ? [:] : held.heldSubscriptions(originalTransactionIDs: open)
        tracker.note(
            page: page, heldBefore: Set(before.keys), heldAfter: Set(after.keys), named: named, recorded: recorded)
    }
}
