import Foundation
import RenewalCore
import RenewalStorage
import Testing

extension SubscriptionStoreConformance {
    /// The webhook outbox: changes queued with their check, claimed one per user in order, leased,
    /// recorded only by the lease holder.
    static func webhookOutbox(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let outbox = try #require(store as? any WebhookOutboxStore)
        for user in ["a", "b"] { try await importReceipt(store, user: user) }
        func write(_ user: String, kinds: [SubscriptionEvent.Kind], at minutes: Double, queue: Bool) async throws {
            var update = verifiedWrite(
                try await stored(store, user: user), subscriptions: [], checkedAt: at(minutes: minutes))
            update.changes = kinds.map {
                SubscriptionEvent(
                    kind: $0, originalTransactionID: "otid-\(user)", productID: "p", fromState: .active,
                    toState: .active, oldExpiresAt: nil, newExpiresAt: nil, environment: .production)
            }
            update.queueWebhooks = queue
            try await store.save(update)
        }
        try await write("a", kinds: [.renewed, .autoRenewDisabled], at: 1, queue: true)
        try await write("b", kinds: [.refunded], at: 2, queue: true)
        try await write("b", kinds: [.verified], at: 3, queue: false)

        let now = at(minutes: 10)
        var status = try await outbox.deliveryStatus(now: now)
        #expect(status.pending == 3 && status.due == 3 && status.oldestPendingSince == at(minutes: 1))
        // One per user: a's first change and b's.
        let first = try await outbox.claimDeliveries(
            owner: "w1", now: now, leaseExpiresAt: at(minutes: 12), limit: 10)
        #expect(first.map(\.change.event.kind) == [.renewed, .refunded], "\(first.map(\.change.event.kind))")
        #expect(first.allSatisfy { $0.attempts == 0 })
        // Leased: another worker gets nothing until the lease passes.
        #expect(
            try await outbox.claimDeliveries(owner: "w2", now: now, leaseExpiresAt: at(minutes: 12), limit: 10).isEmpty)
        // a's first delivered, b's retried later; a record by a worker without the lease changes nothing.
        try await outbox.recordDeliveries(
            [DeliveryRecord(changeID: first[0].changeID, outcome: .delivered, at: now)], owner: "w2")
        try await outbox.recordDeliveries(
            [
                DeliveryRecord(changeID: first[0].changeID, outcome: .delivered, at: now),
                DeliveryRecord(
                    changeID: first[1].changeID, outcome: .retry(error: "HTTP 500", next: at(minutes: 60)), at: now),
            ], owner: "w1")
        let second = try await outbox.claimDeliveries(
            owner: "w1", now: at(minutes: 11), leaseExpiresAt: at(minutes: 13), limit: 10)
        #expect(second.map(\.change.event.kind) == [.autoRenewDisabled], "b waits for its backoff")
        try await outbox.recordDeliveries(
            [DeliveryRecord(changeID: second[0].changeID, outcome: .failed(error: "gave up"), at: at(minutes: 11))],
            owner: "w1")
        let retried = try await outbox.claimDeliveries(
            owner: "w1", now: at(minutes: 61), leaseExpiresAt: at(minutes: 63), limit: 10)
        #expect(retried.map(\.changeID) == [first[1].changeID] && retried.first?.attempts == 1)
        status = try await outbox.deliveryStatus(now: at(minutes: 61))
        #expect(status.delivered == 1 && status.failed == 1 && status.pending == 1, "\(status)")
        #expect(status.recentFailures.map(\.error) == ["gave up"])

        #expect(try await outbox.endpointGoneAt(digest: "d") == nil)
        try await outbox.markEndpointGone(digest: "d", url: "https://example.com/hooks", at: now)
        #expect(try await outbox.endpointGoneAt(digest: "d") == now)
    }
}
