import Foundation
import RenewalStorage

extension SQLSubscriptionStore {
    /// Reserves the next request slot of `bucket` for every worker sharing this database: one
    /// atomic statement moves the bucket's next free slot (PostgreSQL's own clock, so hosts with
    /// drifting clocks still agree) one `interval` on, and returns how long to wait for the slot
    /// reserved. Nil on SQLite, where one run holds the database at a time and the process's own
    /// budget is the fleet's.
    public func reserveRequestSlot(bucket: String, interval: Duration) async throws -> Duration? {
        guard !database.dialect.lockingClause.isEmpty else { return nil }
        let (seconds, attoseconds) = interval.components
        let micros = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        let now = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"
        let waited = try await onConnection { connection in
            try connection.execute(
                """
                INSERT INTO api_request_budget AS b (bucket, next_slot_at_us) VALUES ($1, \(now) + $2)
                ON CONFLICT (bucket) DO UPDATE SET next_slot_at_us = GREATEST(b.next_slot_at_us, \(now)) + $2
                RETURNING next_slot_at_us - $2 - \(now) AS wait_us
                """,
                [.text(bucket), .int64(micros)]
            ).first?.int64("wait_us")
        }
        return .microseconds(max(0, waited ?? 0))
    }
}

extension SQLSubscriptionStore: RequestSlotStore {}
