import Foundation
import RenewalCore
import RenewalStorage

/// `renewal discover`'s progress in `discover_cursors` (schema version 24), one row per feed stream.
extension SQLSubscriptionStore: DiscoveryProgressStore {
    public func discoveryProgress(_ stream: FeedStream) async throws -> DiscoveryProgress? {
        try await onConnection { connection in
            guard
                let row = try connection.execute(
                    """
                    SELECT window_start, window_end, page_token, pages, notifications, started_at, completed_at
                    FROM discover_cursors WHERE stream = $1
                    """, [.text(stream.key)]
                ).first
            else { return nil }
            return DiscoveryProgress(
                start: try row.date("window_start"), end: try row.date("window_end"),
                pageToken: try row.optionalText("page_token"), pages: try row.int("pages"),
                notifications: try row.int("notifications"), startedAt: try row.date("started_at"),
                completedAt: try row.optionalDate("completed_at"))
        }
    }

    public func saveDiscoveryProgress(_ progress: DiscoveryProgress, of stream: FeedStream, now: Date) async throws {
        try await inTransaction { connection in
            _ = try connection.execute(
                """
                INSERT INTO discover_cursors (stream, window_start, window_end, page_token, pages, notifications,
                    started_at, updated_at, completed_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                ON CONFLICT (stream) DO UPDATE SET
                    window_start = excluded.window_start, window_end = excluded.window_end,
                    page_token = excluded.page_token, pages = excluded.pages,
                    notifications = excluded.notifications, started_at = excluded.started_at,
                    updated_at = excluded.updated_at, completed_at = excluded.completed_at
                """,
                [
                    .text(stream.key), SQLValue(progress.start), SQLValue(progress.end), SQLValue(progress.pageToken),
                    .int64(Int64(progress.pages)), .int64(Int64(progress.notifications)), SQLValue(progress.startedAt),
                    SQLValue(now), SQLValue(progress.completedAt),
                ])
        }
    }
}
