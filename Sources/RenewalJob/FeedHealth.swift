import Foundation
import Logging
import RenewalCore
import RenewalStorage

/// Whether Apple's change feed can be trusted to announce every change in an environment, so the
/// run may poll that environment's Server API subscriptions on the feed's long schedule, and if not,
/// why. Judged at the start of each run, after its read of the feed.
public enum FeedFallback: String, Sendable, Hashable, Codable, CaseIterable {
    /// No App Store Server API credentials: there is no feed to read.
    case notConfigured = "not_configured"
    /// The last completed read ended longer ago than `--feed-max-lag-minutes` and this run's read failed.
    case pullFailed = "pull_failed"
    /// … because Apple answered 429.
    case rateLimited = "rate_limited"
    /// The last completed read ended longer ago than the maximum lag, and this run did not read (a
    /// backfill, or no read has completed yet).
    case lagging
    /// The last read ended longer ago than Apple keeps history: notifications in between are lost.
    case gap
    /// Read for over a day without a single notification while checks found renewals: the sign of
    /// an app with no App Store Server Notifications V2 URL (history lists only what Apple sent there).
    case silent
}

/// How the feed stood for a run: per environment (and app, with several), nil when healthy or the
/// reason to poll.
struct FeedHealth: Sendable, Hashable {
    /// Feeds whose Server API subscriptions follow the feed's schedule this run.
    var healthy: Set<FeedStream> = []
    /// The others, and why they poll.
    var fallbacks: [FeedStream: FeedFallback] = [:]
    /// The unhealthy feeds that are only down (a failed or rate-limited read, a read too long ago):
    /// their receipts keep the feed's schedule, and only what cannot wait for the feed is polled
    /// (`SubscriptionStore.pollWhatCannotWait`). The feed's catch-up brings the rest.
    var down: Set<FeedStream> = []
    /// Receipts made due (feeds down) or moved back to polling's schedule (the others), by feed.
    var movedBack: [FeedStream: Int] = [:]

    /// The feeds whose Server API subscriptions, once checked, follow the feed's schedule.
    var scheduling: Set<FeedStream> { healthy.union(down) }
    /// Now minus where the last completed read ended, the largest over the environments (0 where
    /// none has completed yet); nil without a feed.
    var lagSeconds: Double?

    /// The fallbacks as the report and `runs.feed_fallback` keep them: environment (with several
    /// apps `bundle_id/Environment`) to reason.
    var fallbackNames: [String: String] {
        Dictionary(uniqueKeysWithValues: fallbacks.map { ($0.key.key, $0.value.rawValue) })
    }

    /// How long a feed may go without a notification before it is called silent (when renewals came).
    static let silence: TimeInterval = 86_400

    /// Judges each environment from the run's read (`outcome`; nil when the run did not read) and
    /// what the database holds, and moves the receipts of every unhealthy environment back to the
    /// polling schedule.
    static func assess(
        sources: [(app: String?, configured: Bool)], outcome: FeedPull.Outcome?, environments: [AppStoreEnvironment],
        maximumLag: TimeInterval, store: any SubscriptionStore, now: Date, logger: Logger
    ) async throws -> FeedHealth {
        var health = FeedHealth()
        for (app, configured) in sources {
            for environment in environments {
                try await health.assess(
                    FeedStream(environment, app: app), configured: configured, first: environment == environments.first,
                    outcome: outcome, maximumLag: maximumLag, store: store, now: now, logger: logger)
            }
        }
        return health
    }

    private mutating func assess(
        _ stream: FeedStream, configured: Bool, first: Bool, outcome: FeedPull.Outcome?, maximumLag: TimeInterval,
        store: any SubscriptionStore, now: Date, logger: Logger
    ) async throws {
        let environment = stream.environment
        let fallback: FeedFallback?
        if configured {
            let cursor = try await store.feedCursor(stream)
            // Another worker reading the window now is as current as reading it here.
            let beingRead = outcome?.leftToOthers.contains(stream) == true
            // Behind by as much as the last completed read is old (none yet: not behind).
            // (Never below 0: the stored cursor is whole milliseconds, now is not.)
            let lag = beingRead ? 0 : max(0, cursor.map { now.timeIntervalSince($0) } ?? 0)
            lagSeconds = max(lagSeconds ?? 0, (lag * 1000).rounded() / 1000)
            if outcome?.gaps.contains(stream) == true {
                fallback = .gap
            } else if beingRead || (cursor != nil && lag <= maximumLag) {
                let activity = try await store.feedActivity(stream, since: now - Self.silence)
                let readForADay = activity.pulledSince.map { now.timeIntervalSince($0) >= Self.silence } ?? false
                fallback = readForADay && !activity.notified && activity.renewed ? .silent : nil
            } else if let reason = outcome?.failed[stream] {
                fallback = reason == .rateLimited ? .rateLimited : .pullFailed
            } else {
                fallback = .lagging
            }
        } else {
            fallback = .notConfigured
        }
        guard let fallback else {
            healthy.insert(stream)
            return
        }
        fallbacks[stream] = fallback
        let moved: Int
        if fallback.isOutage {
            down.insert(stream)
            moved = try await store.pollWhatCannotWait(stream, now: now)
        } else {
            moved = try await store.fallBackToPolling(stream)
        }
        movedBack[stream] = moved
        var metadata: Logger.Metadata = [
            LogKey.appStoreEnvironment: "\(environment.rawValue)", LogKey.feedFallback: "\(fallback.rawValue)",
            LogKey.feedMovedBack: "\(moved)",
        ]
        if let app = stream.app { metadata[LogKey.app] = "\(app)" }
        switch fallback {
        case .notConfigured:
            if first {
                logger.info(
                    "No change feed without Server API credentials: polling on the full schedule",
                    metadata: stream.app.map { [LogKey.app: "\($0)"] } ?? [:])
            }
        case .silent:
            logger.warning(
                """
                Apple's change feed has had no notification for a day while subscriptions renewed: check that \
                the app has an App Store Server Notifications V2 URL set in App Store Connect. Polling on the \
                full schedule until notifications arrive
                """,
                metadata: metadata)
        case .gap:
            logger.warning(
                "Apple's change feed is not current: polling on the full schedule until it is", metadata: metadata)
        case .pullFailed, .rateLimited, .lagging:
            logger.warning(
                """
                Apple's change feed is not current: polling only what cannot wait for it (renewals due, grace \
                periods and billing retries ending) until it has caught up
                """,
                metadata: metadata)
        }
    }
}

extension FeedFallback {
    /// The feed is down or behind, its history intact: once it has read through the outage's window
    /// every notification of it has been applied, so nothing need be polled but what cannot wait. A
    /// gap, a silent feed and no feed at all fall back to polling fully.
    var isOutage: Bool {
        switch self {
        case .pullFailed, .rateLimited, .lagging: true
        case .notConfigured, .gap, .silent: false
        }
    }
}

extension AppStoreEnvironment {
    /// The environments whose feed a run reads and judges.
    static let feedEnvironments: [AppStoreEnvironment] = [.production, .sandbox]
}
