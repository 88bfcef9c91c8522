import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalSQL
import RenewalServerAPI
import RenewalStorage
import Testing

/// A verified notification whose signed data cannot be decoded is recorded by its `notificationUUID`
/// like every other: the next run's window overlaps it and does not fail again, and the failure is kept
/// in the database (`run_failures`, reason `notification_data_unreadable`, under the run that read it).
@Suite("Change feed: a notification whose data cannot be decoded is recorded once, by its uuid")
struct FeedUnreadableRecordTests {
    @Test(
        """
        An unreadable notification is recorded in feed_notifications by its uuid and as a run failure of the \
        run that read it; the next run reads it again in its window's overlap and counts no failure
        """,
        arguments: Backend.available)
    func unreadableNotificationRecordedOnce(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let customer = h.receipt("fu-recorded", .renewal, daysAgo: 5)
            try await h.importReceipts([("recorded", customer)])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .serverAPI, verifyReceipt: h.client, serverAPI: client)
                let first = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(first.status == .completed, "\(first.counts)")

                // Signed a minute before the next read, so the read after that (its window starts 15
                // minutes before where this one ends) lists it again.
                h.state.advance(by: 3_600)
                let notification = SimulatedNotification.unreadable(
                    of: customer, at: h.state.now.addingTimeInterval(-60))
                h.state.unreadableNotifications = [notification]
                let read = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(read.counts.notificationsFailed == 1, "\(read.counts)")
                #expect(read.status == .completedWithFailures, "\(read.status)")

                let recorded = try await DashboardViewsTests.query(
                    h,
                    """
                    SELECT notification_uuid, original_transaction_id, receipt_id, run_id FROM feed_notifications
                    WHERE notification_uuid = '\(notification.uuid)'
                    """)
                #expect(recorded.count == 1, "recorded by its uuid")
                #expect(recorded.first.flatMap { DashboardViewsTests.text($0, "run_id") } == read.runID)
                #expect(
                    recorded.first.flatMap { DashboardViewsTests.text($0, "original_transaction_id") }
                        == customer.originalTransactionID)
                #expect(recorded.first.flatMap { DashboardViewsTests.int($0, "receipt_id") } != nil)
                let failures = try await DashboardViewsTests.query(
                    h, "SELECT run_id, user_id FROM run_failures WHERE reason = 'notification_data_unreadable'")
                #expect(failures.count == 1, "one failure kept")
                #expect(failures.first.flatMap { DashboardViewsTests.text($0, "run_id") } == read.runID)
                #expect(failures.first.flatMap { DashboardViewsTests.text($0, "user_id") } == "recorded")

                h.state.advance(by: 120)
                let again = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(again.counts.notificationsFailed == 0, "already recorded: \(again.counts)")
                #expect(again.status == .completed, "\(again.status)")
                let kept = try await DashboardViewsTests.query(
                    h, "SELECT COUNT(*) AS n FROM run_failures WHERE reason = 'notification_data_unreadable'")
                #expect(kept.first.flatMap { DashboardViewsTests.int($0, "n") } == 1)
            }
        }
    }
}
