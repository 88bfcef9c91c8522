import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// Reads Apple's change feed for each environment since the last completed pull and makes the
/// receipts of the subscriptions it names due now, so the run that pulled checks them.
///
/// Each window starts `overlap` before where the last completed pull ended (the first ever pull:
/// `overlap` before now) and ends now; the cursor moves to its end only once every page has been
/// recorded, so a crash or a failed page reads the same window again next run, and the uuid of each
/// notification keeps it from being acted on twice. A window reaches back at most as far as Apple
/// keeps history (180 days in production, 30 in the sandbox, less a day of margin): a cursor older
/// than that is a gap, logged.
///
/// A notification's signed transaction and renewal info are applied to the subscription through
/// the same decision as a status answer when Apple signed them after what the database holds
/// (`EntitlementDecision.Rules.use(of:for:)`), in Apple's order, in the transaction that records
/// the notification: a crash before the cursor moves re-reads notifications already recorded, and
/// they are not applied again. Only one that cannot be applied on its own makes its receipt due, so
/// the run re-reads Get All Subscription Statuses for it.
///
/// With several apps, each app's feed is its own stream (`FeedStream`): its own cursor per
/// environment, read with its own key.
struct FeedPull: Sendable {
    /// The feeds to read, by app (nil: the one app).
    let feeds: [(app: String?, feed: any NotificationFeed)]
    let store: any SubscriptionStore
    let overlap: TimeInterval
    let runID: String?
    let logger: Logger
    /// The run's clock. A receipt a notification names is made due at the time it is marked, not at
    /// the run's start: a worker that started after the start of this read, found nothing to do and
    /// ended before this run claimed the receipt must not count it as left for the next run.
    let clock: @Sendable () -> Date
    /// The run's rules, with which notifications are applied; nil: each one makes its receipt due.
    var rules: EntitlementDecision.Rules?
    /// Changes applied from notifications are queued for webhooks too.
    var queueWebhooks = false
    /// A worker that finds another reading a feed waits at most this long for that read to end
    /// before it claims due rows, so it does not check a subscription whose notification the read
    /// is applying. (A longer read, a catch-up after an outage, is left to run beside it.)
    var waitForReader: Duration = .seconds(30)

    struct Outcome {
        var notifications = 0
        var unmatched = 0
        var madeDue = 0
        /// New notifications applied from their signed data, and the changes they made.
        var applied = 0
        var changes = 0
        var migrated = 0
        /// New refund requests recorded to be answered.
        var refundRequests = 0
        /// New notifications with nothing newer than the database.
        var known = 0
        /// New notifications that made their receipt due instead, by why.
        var rechecked: [NotificationUse.Recheck: Int] = [:]
        /// The applied notifications that changed something, for the report (receipts without
        /// their receipt data, which can be large).
        var changed: [AppliedNotification] = []
        /// The purchases adopted from new notifications, as their changes were recorded.
        var purchaseChanges: [PurchaseChange] = []
        var byType: [String: Int] = [:]
        var refused: [FailureReason] = []
        /// Verified notifications whose `data` could not be decoded (among `refused`): failures of the run.
        var undecodable = 0
        /// Feeds whose pull failed (the cursor stays; the next run reads the window again).
        var failed: [FeedStream: FailureReason] = [:]
        /// Feeds whose cursor was older than Apple keeps history: notifications were lost.
        var gaps: Set<FeedStream> = []
        /// Feeds another worker was reading, or had just read, when this one came to them.
        var leftToOthers: Set<FeedStream> = []

        mutating func add(_ other: Outcome) {
            notifications += other.notifications
            unmatched += other.unmatched
            madeDue += other.madeDue
            applied += other.applied
            changes += other.changes
            migrated += other.migrated
            refundRequests += other.refundRequests
            known += other.known
            rechecked.merge(other.rechecked, uniquingKeysWith: +)
            changed += other.changed
            purchaseChanges += other.purchaseChanges
            byType.merge(other.byType, uniquingKeysWith: +)
            refused += other.refused
            undecodable += other.undecodable
            failed.merge(other.failed) { first, _ in first }
            gaps.formUnion(other.gaps)
            leftToOthers.formUnion(other.leftToOthers)
        }

        /// The uses of the new notifications about known subscriptions, for the metrics.
        var uses: [String: Int] {
            var uses = Dictionary(uniqueKeysWithValues: rechecked.map { ($0.key.rawValue, $0.value) })
            uses["applied"] = applied
            uses["known"] = known
            return uses.filter { $0.value > 0 }
        }

        mutating func count(_ recorded: FeedRecordResult) {
            notifications += recorded.new
            unmatched += recorded.unmatched.count
            madeDue += recorded.madeDue
            refundRequests += recorded.refundRequests
            byType.merge(recorded.newByType, uniquingKeysWith: +)
            applied += recorded.applied.count
            known += recorded.known
            rechecked.merge(recorded.rechecked, uniquingKeysWith: +)
            purchaseChanges += recorded.purchaseChanges
            changes += recorded.purchaseChanges.count
            for var item in recorded.applied {
                if item.decision.update.migrated { migrated += 1 }
                guard !item.decision.changes.isEmpty else { continue }
                changes += item.decision.changes.count
                item.receipt.latestReceipt = nil
                changed.append(item)
            }
        }
    }

    /// A cursor that ended this recently was just read by another worker: reading it again would
    /// fetch the overlap for nothing.
    static let freshness: TimeInterval = 60

    static func kept(_ environment: AppStoreEnvironment) -> TimeInterval {
        (environment == .sandbox ? 30 : 180) * 86_400
    }

    /// Reads each feed's window in each environment, one worker at a time per feed (the others
    /// wait for that read to end, up to `waitForReader`, and go on with their due rows).
    func pull(environments: [AppStoreEnvironment], now: Date) async throws -> Outcome {
        var outcome = Outcome()
        for (app, feed) in feeds {
            for environment in environments {
                let stream = FeedStream(environment, app: app)
                let pulled = try await store.exclusively("feed/" + stream.key) { [self] in
                    try await pull(stream, from: feed, now: now)
                }
                guard let pulled else {
                    try await waitForOtherReader(of: stream)
                    outcome.leftToOthers.insert(stream)
                    continue
                }
                outcome.add(pulled)
            }
        }
        return outcome
    }

    /// Polls until the worker reading `stream` has ended its read (or `waitForReader` has passed).
    private func waitForOtherReader(of stream: FeedStream) async throws {
        let deadline = ContinuousClock.now + waitForReader
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            if try await store.exclusively("feed/" + stream.key, {}) != nil { return }
        }
    }

    private func pull(_ stream: FeedStream, from feed: any NotificationFeed, now: Date) async throws -> Outcome {
        var outcome = Outcome()
        let environment = stream.environment
        var logger = self.logger
        if let app = stream.app { logger[metadataKey: LogKey.app] = "\(app)" }
        guard let start = try await windowStart(of: stream, now: now, logger: logger, outcome: &outcome) else {
            return outcome
        }
        var token: String?
        var pages = 0
        pulling: repeat {
            switch await feed.notificationPage(
                environment: environment, start: start, end: now, token: token, logger: logger)
            {
            case .failure(let error):
                outcome.failed[stream] = error.reason
                logger.warning(
                    "The change feed could not be read; this window is read again next run",
                    metadata: [
                        LogKey.appStoreEnvironment: "\(environment.rawValue)", LogKey.reason: "\(error.reason)",
                        LogKey.feedPages: "\(pages)",
                    ])
                break pulling
            case .success(let page):
                pages += 1
                try await record(page, of: stream, logger: logger, into: &outcome)
                token = page.nextToken
            }
        } while token != nil
        if outcome.failed[stream] == nil {
            try await store.advanceFeedCursor(stream, from: start, to: now, now: now)
        }
        return outcome
    }

    /// Where `stream`'s window starts: `overlap` before its cursor, no further back than Apple keeps
    /// history (an older cursor is a gap, logged). Nil when another worker has just read it.
    private func windowStart(
        of stream: FeedStream, now: Date, logger: Logger, outcome: inout Outcome
    ) async throws -> Date? {
        let cursor = try await store.feedCursor(stream)
        if let cursor, cursor > now.addingTimeInterval(-Self.freshness) {
            outcome.leftToOthers.insert(stream)
            return nil
        }
        let oldest = now.addingTimeInterval(-Self.kept(stream.environment) + 86_400)
        let start = (cursor ?? now).addingTimeInterval(-overlap)
        guard start < oldest else { return start }
        logger.warning(
            "The change feed's last pull is older than Apple keeps history: notifications in between are lost",
            metadata: [
                LogKey.appStoreEnvironment: "\(stream.environment.rawValue)",
                LogKey.feedPulledUntil: "\(cursor.map(Timestamp.string) ?? "never")",
            ])
        if cursor != nil { outcome.gaps.insert(stream) }
        return oldest
    }

    /// Records one page: its notifications applied or made due in one transaction, its refusals
    /// logged, and each subscription named by a notification whose data could not be decoded made due.
    private func record(_ page: FeedPage, of stream: FeedStream, logger: Logger, into outcome: inout Outcome)
        async throws
    {
        let environment = stream.environment
        logRefusals(page.refused, environment: environment, logger: logger, outcome: &outcome)
        let records = page.notifications.map { FeedNotificationRecord($0, environment: environment, app: stream.app) }
        let now = clock()
        let context = rules.map {
            EntitlementDecision.Context(
                now: now, random: 0.5, runID: runID, leaseOwner: nil, queueWebhooks: queueWebhooks, rules: $0)
        }
        let recorded = try await store.recordFeedNotifications(records, runID: runID, now: now, applying: context)
        outcome.count(recorded)
        for unknown in recorded.unmatched {
            logger.warning(
                """
                Apple sent a notification about a subscription the database does not know; import its \
                receipt or id
                """,
                metadata: [
                    LogKey.originalTransactionID: "\(unknown.originalTransactionID ?? "")",
                    LogKey.notificationType: "\(unknown.type)",
                    LogKey.appStoreEnvironment: "\(environment.rawValue)",
                ])
        }
        try await recordUnreadable(page, of: stream, logger: logger, into: &outcome)
    }

    /// Records the page's verified notifications whose data could not be decoded by their uuid: each new
    /// one is an error and a failure of the run, and makes the subscription it names due; one an
    /// earlier read recorded (the window's overlap) is neither counted nor logged again.
    private func recordUnreadable(
        _ page: FeedPage, of stream: FeedStream, logger: Logger, into outcome: inout Outcome
    ) async throws {
        guard !page.unreadable.isEmpty else { return }
        let recorded = try await store.recordUnreadableNotifications(
            page.unreadable.map { FeedNotificationRecord($0, environment: stream.environment, app: stream.app) },
            runID: runID, now: clock())
        outcome.madeDue += recorded.madeDue
        outcome.undecodable += recorded.new.count
        outcome.refused += recorded.new.map { _ in .notificationDataUnreadable }
        for notification in recorded.new {
            logger.error(
                """
                A verified notification from the change feed has data the job cannot decode; its \
                subscription, when named, is made due
                """,
                metadata: [
                    LogKey.appStoreEnvironment: "\(stream.environment.rawValue)",
                    LogKey.reason: "\(FailureReason.notificationDataUnreadable)",
                    LogKey.notificationType: "\(notification.type)",
                    LogKey.originalTransactionID: "\(notification.originalTransactionID ?? "")",
                ])
        }
    }

    /// Logs the page's notifications that failed verification (warnings: they change nothing). Those
    /// verified but with data the job cannot decode are recorded and logged by `recordUnreadable`.
    private func logRefusals(
        _ refused: [FailureReason], environment: AppStoreEnvironment, logger: Logger, outcome: inout Outcome
    ) {
        for reason in refused where reason != .notificationDataUnreadable {
            outcome.refused.append(reason)
            logger.warning(
                "A notification from the change feed failed verification and changes nothing",
                metadata: [LogKey.appStoreEnvironment: "\(environment.rawValue)", LogKey.reason: "\(reason)"])
        }
    }
}

extension FeedNotificationRecord {
    /// The record of a verified notification from `environment`'s feed of `app`.
    init(_ notification: FeedNotification, environment: AppStoreEnvironment, app: String?) {
        self.init(
            uuid: notification.uuid, environment: environment, type: notification.type,
            subtype: notification.subtype, originalTransactionID: notification.originalTransactionID,
            signedAt: notification.signedDate, bundleID: app, evidence: notification.evidence)
        transactionID = notification.transactionID
        periodStart = notification.periodStart
        periodEnd = notification.periodEnd
        productID = notification.productID
        consumptionRequestReason = notification.consumptionRequestReason
        extensionSummary = notification.extensionSummary
    }
}
