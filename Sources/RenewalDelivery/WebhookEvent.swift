import Foundation
import RenewalCore
import RenewalReports
import RenewalStorage

/// The body of one webhook: `{"type", "id", "timestamp", "data"}` (type `entitlement.changed`, or
/// `purchase.unclaimed` / `purchase.claimed` for the purchase kinds: `Kind.webhookType`), where `data`
/// is the report's change object with `run_id` and `occurred_at`. No receipt, no secret.
enum WebhookEvent {
    /// The `webhook-id` of a change: the same on every attempt, so receivers can drop repeats.
    static func id(of delivery: PendingDelivery) -> String {
        "chg_\(delivery.changeID)_\(delivery.runID.map { String($0.prefix(8)) } ?? "norun")"
    }

    /// A `webhook.test` event: proves the URL and the secret, names no user.
    static func test(id: String) throws -> Data {
        let object: [String: Any] = [
            "type": "webhook.test", "id": id, "timestamp": Timestamp.string(Date()),
            "data": ["message": "renewal check: a signed test event; no entitlement changed"],
        ]
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    static func body(of delivery: PendingDelivery) throws -> Data {
        struct Body: Encodable {
            var type: String
            var id: String
            var timestamp: String
            var data: ChangeData

            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: ReportKey.self)
                try c.encode(type, forKey: ReportKey("type"))
                try c.encode(id, forKey: ReportKey("id"))
                try c.encode(timestamp, forKey: ReportKey("timestamp"))
                try c.encode(data, forKey: ReportKey("data"))
            }
        }
        struct ChangeData: Encodable {
            var change: ReportChange
            var runID: String?
            var occurredAt: String

            func encode(to encoder: any Encoder) throws {
                try change.encode(to: encoder)
                var c = encoder.container(keyedBy: ReportKey.self)
                try c.encode(runID, forKey: ReportKey("run_id"))
                try c.encode(occurredAt, forKey: ReportKey("occurred_at"))
            }
        }
        let change = delivery.change
        let occurredAt = Timestamp.string(change.occurredAt)
        let body = Body(
            type: change.event.kind.webhookType, id: id(of: delivery), timestamp: occurredAt,
            data: ChangeData(
                change: ReportChange(change),
                runID: delivery.runID, occurredAt: occurredAt))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(body)
    }
}
