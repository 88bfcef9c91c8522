import Foundation
import Testing

@testable import RenewalCore

/// What shows a feed alive and what falling back to polling does to a check, as plain values
/// (`FeedSilenceStoreTests` holds storage to them on both databases).
@Suite("Feed silence rules: activity since a moment and the polling fallback in the core")
struct FeedSilenceRulesTests {
    static let since = Date(timeIntervalSince1970: 1_800_000_000)
    static func at(_ seconds: TimeInterval) -> Date { since.addingTimeInterval(seconds) }

    @Test("a notification signed in the window shows activity; one signed before does not")
    func notified() {
        let window = FeedActivityWindow(since: Self.since)
        #expect(window.notified(signedAt: Self.at(0)))
        #expect(window.notified(signedAt: Self.at(60)))
        #expect(!window.notified(signedAt: Self.at(-1)))
    }

    @Test("a renewal shows activity when recorded and taking effect in the window; a late check of an old one does not")
    func renewed() {
        let window = FeedActivityWindow(since: Self.since)
        #expect(window.renewed(kind: .renewed, occurredAt: Self.at(10), oldExpiresAt: Self.at(5)))
        #expect(window.renewed(kind: .billingRecovered, occurredAt: Self.at(0), oldExpiresAt: Self.at(0)))
        // Found today, but Apple renewed it (its old expiry) before the window: says nothing of today's feed.
        #expect(!window.renewed(kind: .renewed, occurredAt: Self.at(10), oldExpiresAt: Self.at(-1)))
        #expect(!window.renewed(kind: .renewed, occurredAt: Self.at(-1), oldExpiresAt: Self.at(5)))
        #expect(!window.renewed(kind: .renewed, occurredAt: Self.at(10), oldExpiresAt: nil))
        #expect(!window.renewed(kind: .expired, occurredAt: Self.at(10), oldExpiresAt: Self.at(5)))
        #expect(window.renewalKinds == FeedStream.renewalKinds)
    }

    @Test("falling back to polling moves a check to the earlier polling check, never later")
    func fallback() {
        let scheduled = Self.at(0)
        #expect(PollingFallback.nextCheck(scheduled: scheduled, polling: Self.at(-60)) == Self.at(-60))
        #expect(PollingFallback.nextCheck(scheduled: scheduled, polling: Self.at(60)) == scheduled)
        #expect(PollingFallback.nextCheck(scheduled: scheduled, polling: nil) == scheduled)
        #expect(PollingFallback.moves(scheduled: scheduled, polling: Self.at(-60)))
        #expect(!PollingFallback.moves(scheduled: scheduled, polling: scheduled))
        #expect(!PollingFallback.moves(scheduled: scheduled, polling: nil))
    }
}
