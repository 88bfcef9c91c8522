import Foundation

/// What shows that a change feed was alive since a moment (the job asks about the last day before it
/// calls a feed silent and falls back to polling). Storage reads the bounds and kinds here and decides
/// nothing itself; the predicates say the same for one notification or one change, for tests and readers.
public struct FeedActivityWindow: Sendable, Hashable {
    /// The start of the window.
    public var since: Date

    public init(since: Date) {
        self.since = since
    }

    /// The change kinds that show a renewal Apple made (`FeedStream.renewalKinds`).
    public var renewalKinds: [SubscriptionEvent.Kind] { FeedStream.renewalKinds }

    /// A notification shows activity when Apple signed it in the window.
    public var notifiedSince: Date { since }

    /// A renewal shows activity when the job recorded it in the window…
    public var recordedSince: Date { since }

    /// …and it took effect in the window (at the old expiry): a late check of an old renewal says nothing
    /// about today's feed.
    public var tookEffectSince: Date { since }

    /// Whether a notification Apple signed at `signedAt` shows the feed alive.
    public func notified(signedAt: Date) -> Bool { signedAt >= notifiedSince }

    /// Whether a change of `kind`, recorded at `occurredAt`, of a period that expired at `oldExpiresAt`
    /// shows a renewal Apple made in the window. A change with no old expiry took effect at no known
    /// moment and shows nothing.
    public func renewed(kind: SubscriptionEvent.Kind, occurredAt: Date, oldExpiresAt: Date?) -> Bool {
        guard renewalKinds.contains(kind), occurredAt >= recordedSince, let oldExpiresAt else { return false }
        return oldExpiresAt >= tookEffectSince
    }
}

/// A stream whose feed fell silent goes back to polling: each receipt (and each of its subscriptions) is
/// checked at the earlier of the check the feed scheduled and the polling check kept beside it
/// (`polling_check_at`), which is then dropped. A receipt without a polling check keeps its check.
public enum PollingFallback {
    /// The check of a receipt or subscription scheduled at `scheduled`, once its stream falls back to
    /// polling with its polling check at `polling`.
    public static func nextCheck(scheduled: Date, polling: Date?) -> Date {
        guard let polling else { return scheduled }
        return min(polling, scheduled)
    }

    /// Whether falling back moves the check: only to an earlier moment, never later.
    public static func moves(scheduled: Date, polling: Date?) -> Bool {
        nextCheck(scheduled: scheduled, polling: polling) < scheduled
    }
}
