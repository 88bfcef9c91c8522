import Foundation
import RenewalCore
import RenewalStorage

/// The reads behind `renewal report` and its charts: paged, so a run with millions of changes is
/// rendered in flat memory.
extension SQLSubscriptionStore {
    public func runs(startedFrom since: Date?, before until: Date?, after cursor: RunRecord?, limit: Int) async throws
        -> [RunRecord]
    {
        var conditions: [String] = []
        var binds: [SQLValue] = []
        if let since {
            binds.append(SQLValue(since))
            conditions.append("started_at >= $\(binds.count)")
        }
        if let until {
            binds.append(SQLValue(until))
            conditions.append("started_at < $\(binds.count)")
        }
        if let cursor {
            binds.append(SQLValue(cursor.startedAt))
            binds.append(.text(cursor.id))
            conditions.append(
                "(started_at > $\(binds.count - 1) OR (started_at = $\(binds.count - 1) AND id > $\(binds.count)))")
        }
        binds.append(.int64(Int64(limit)))
        let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let sql = "SELECT * FROM runs \(whereClause) ORDER BY started_at, id LIMIT $\(binds.count)"
        return try await onConnection { connection in
            try connection.execute(sql, binds).map(Self.runRecord)
        }
    }

    public func lastRun() async throws -> RunRecord? {
        try await onConnection { connection in
            try connection.execute("SELECT * FROM runs ORDER BY started_at DESC, id DESC LIMIT 1", []).first.map(
                Self.runRecord)
        }
    }

    public func lastSuccess() async throws -> Date? {
        try await onConnection { connection in
            try connection.execute("SELECT MAX(finished_at) AS finished_at FROM runs WHERE exit_code = 0", []).first?
                .optionalDate("finished_at")
        }
    }

    public func recentRuns(upTo: Date, limit: Int) async throws -> [RunRecord] {
        try await onConnection { connection in
            try connection.execute(
                "SELECT * FROM runs WHERE started_at <= $1 ORDER BY started_at DESC, id DESC LIMIT $2",
                [SQLValue(upTo), .int64(Int64(limit))]
            ).map(Self.runRecord)
        }
    }

    public func changes(ofRun runID: String, app: String?, afterID: Int64, limit: Int) async throws -> [(
        id: Int64, change: RecordedChange
    )] {
        let ofApp = app == nil ? "" : "AND bundle_id = $4"
        let binds: [SQLValue] = [.text(runID), .int64(afterID), .int64(Int64(limit))] + (app.map { [.text($0)] } ?? [])
        return try await onConnection { connection in
            try connection.execute(
                "SELECT * FROM entitlement_changes WHERE run_id = $1 AND id > $2 \(ofApp) ORDER BY id LIMIT $3", binds
            ).map { row in (try row.int64("id"), try Self.recordedChange(row)) }
        }
    }

    public func changesOutsideRuns(from since: Date?, before until: Date?, app: String?, afterID: Int64, limit: Int)
        async throws -> [(id: Int64, change: RecordedChange)]
    {
        var binds: [SQLValue] = [.int64(afterID)]
        var conditions = ["run_id IS NULL", "id > $1"]
        if let since {
            binds.append(SQLValue(since))
            conditions.append("occurred_at >= $\(binds.count)")
        }
        if let until {
            binds.append(SQLValue(until))
            conditions.append("occurred_at < $\(binds.count)")
        }
        if let app {
            binds.append(.text(app))
            conditions.append("bundle_id = $\(binds.count)")
        }
        binds.append(.int64(Int64(limit)))
        let sql =
            "SELECT * FROM entitlement_changes WHERE \(conditions.joined(separator: " AND ")) ORDER BY id LIMIT $\(binds.count)"
        return try await onConnection { connection in
            try connection.execute(sql, binds).map { row in (try row.int64("id"), try Self.recordedChange(row)) }
        }
    }

    public func failures(ofRun runID: String, app: String?, afterID: Int64, limit: Int) async throws -> [(
        id: Int64, failure: RecordedFailure
    )] {
        let ofApp = app == nil ? "" : "AND bundle_id = $4"
        let binds: [SQLValue] = [.text(runID), .int64(afterID), .int64(Int64(limit))] + (app.map { [.text($0)] } ?? [])
        return try await onConnection { connection in
            try connection.execute(
                "SELECT * FROM run_failures WHERE run_id = $1 AND id > $2 \(ofApp) ORDER BY id LIMIT $3", binds
            ).map { row in (try row.int64("id"), try Self.recordedFailure(row)) }
        }
    }

    public func changeCounts(ofRun runID: String, app: String?) async throws -> [String: Int] {
        try await counts(
            """
            SELECT kind AS name, COUNT(*) AS n FROM entitlement_changes \
            WHERE run_id = $1 \(app == nil ? "" : "AND bundle_id = $2") GROUP BY kind
            """, runID, app)
    }

    public func failureCounts(ofRun runID: String, app: String?) async throws -> [String: Int] {
        try await counts(
            """
            SELECT reason AS name, COUNT(*) AS n FROM run_failures \
            WHERE run_id = $1 \(app == nil ? "" : "AND bundle_id = $2") GROUP BY reason
            """, runID, app)
    }

    /// Read through the `entitlements_by_product` view, which on PostgreSQL sums a small summary
    /// instead of counting every subscription.
    public func entitledNow() async throws -> [EntitledPlan: Int] {
        try await onConnection { connection in
            var result: [EntitledPlan: Int] = [:]
            for row in try connection.execute(
                """
                SELECT COALESCE(product_id, '') AS name, COALESCE(environment, '') AS environment,
                       CAST(SUM(subscribers) AS BIGINT) AS n
                FROM entitlements_by_product WHERE entitled = 1
                GROUP BY COALESCE(product_id, ''), COALESCE(environment, '')
                """, [])
            {
                result[EntitledPlan(productID: try row.text("name"), environment: try row.text("environment"))] =
                    try row.int("n")
            }
            return result
        }
    }

    public func entitledDeltas(since: Date) async throws -> [String: [EntitledPlan: Int]] {
        // One answer's events for one subscription share their run, user, time and state move:
        // grouped (`moves`), that move counts once, out of the product it left and into the one it
        // is on. The moves are then counted per kind, so few rows come back.
        // The states that grant access are Core's (`SubscriptionState.grantsAccess`).
        let granting = SubscriptionState.allCases.filter(\.grantsAccess).map { "'\($0.rawValue)'" }
        let entitled = "IN (\(granting.joined(separator: ", "))) THEN 1 ELSE 0 END"
        return try await onConnection { connection in
            var result: [String: [EntitledPlan: Int]] = [:]
            let rows = try connection.execute(
                """
                SELECT run_id, from_product, to_product, environment,
                       CASE WHEN from_state \(entitled) AS was_entitled, CASE WHEN to_state \(entitled) AS is_entitled,
                       COUNT(*) AS moves
                FROM (
                    SELECT c.run_id, c.from_state, c.to_state, COALESCE(MAX(c.product_id), '') AS to_product,
                           COALESCE(MAX(c.from_product_id), MAX(c.product_id), '') AS from_product,
                           COALESCE(MAX(c.environment), '') AS environment
                    FROM entitlement_changes c JOIN runs r ON r.id = c.run_id
                    WHERE r.started_at >= $1
                    GROUP BY c.run_id, c.user_id, c.original_transaction_id, c.occurred_at, c.from_state, c.to_state
                ) m
                GROUP BY run_id, from_product, to_product, environment, from_state, to_state
                """, [SQLValue(since)])
            for row in rows {
                let environment = try row.text("environment")
                let moves = try row.int("moves")
                var deltas = result[try row.text("run_id"), default: [:]]
                deltas[EntitledPlan(productID: try row.text("from_product"), environment: environment), default: 0] -=
                    try row.int("was_entitled") * moves
                deltas[EntitledPlan(productID: try row.text("to_product"), environment: environment), default: 0] +=
                    try row.int("is_entitled") * moves
                result[try row.text("run_id")] = deltas
            }
            return result
        }
    }

    private func counts(_ sql: String, _ runID: String, _ app: String?) async throws -> [String: Int] {
        let binds: [SQLValue] = [.text(runID)] + (app.map { [.text($0)] } ?? [])
        return try await onConnection { connection in
            var result: [String: Int] = [:]
            for row in try connection.execute(sql, binds) { result[try row.text("name")] = try row.int("n") }
            return result
        }
    }

    static func recordedChange(_ row: SQLRow) throws -> RecordedChange {
        let rawKind = try row.text("kind")
        guard let kind = SubscriptionEvent.Kind(rawValue: rawKind) else {
            throw SubscriptionStoreError.corruptRow("entitlement_changes.kind holds an unknown kind")
        }
        var event = SubscriptionEvent(
            kind: kind, originalTransactionID: try row.optionalText("original_transaction_id"),
            productID: try row.optionalText("product_id"), fromState: try row.state("from_state"),
            toState: try row.state("to_state"), oldExpiresAt: try row.optionalDate("old_expires_at"),
            newExpiresAt: try row.optionalDate("new_expires_at"),
            environment: try row.environment("environment"), fromProductID: try row.optionalText("from_product_id")
        )
        event.revocationType = try row.optionalText("revocation_type")
        event.revocationPercentage = try row.optionalInt("revocation_percentage")
        return RecordedChange(
            userID: try row.text("user_id"), event: event,
            ownershipType: try row.optionalText("ownership_type"), occurredAt: try row.date("occurred_at"),
            source: try row.optionalText("source"), bundleID: try row.optionalText("bundle_id")
        )
    }

    static func recordedFailure(_ row: SQLRow) throws -> RecordedFailure {
        RecordedFailure(
            receiptID: try row.int64("receipt_id"), userID: try row.text("user_id"),
            failure: CheckFailure(
                reason: FailureReason(rawValue: try row.text("reason")), message: try row.text("message")),
            occurredAt: try row.date("occurred_at"), bundleID: try row.optionalText("bundle_id")
        )
    }
}
