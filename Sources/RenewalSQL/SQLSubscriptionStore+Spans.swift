import Foundation
import RenewalCore
import RenewalStorage

/// The ledger as SQL reads it for Core (transactions and facts by subscription), and the entitlement spans
/// kept from it. Not generic over the database, so migrations can call it too.
enum LedgerSQL {
    /// Subscriptions read and written per statement.
    static var chunkSize: Int { 500 }

    /// Spans written per `INSERT` (nine binds each: 4,500, under both databases' limits). Fewer round
    /// trips halved migration 22 on PostgreSQL against 50 per statement.
    static var spanRowsPerInsert: Int { 500 }

    /// Replaces the stored entitlement spans (`entitlement_spans`) of these subscriptions with Core's
    /// (`EntitlementTimeline.spans`) from their ledger and facts as this connection sees them now. Called
    /// in the transaction that writes their ledger rows or facts, after those writes, so SQL asking
    /// "entitled at T" reads the decision's own timeline; work in proportion to the subscriptions named.
    ///
    /// The spans are those the analytics count: the purchases in the subscription's own environment
    /// (`SubscriptionLedger.countedTransactions`); a family-shared copy has none.
    ///
    /// Returns the ledgers it read (a subscription without transactions has none), for the analytics
    /// summaries' upkeep.
    @discardableResult
    static func replaceSpans(of ids: some Collection<String>, on connection: any SQLConnection) throws
        -> [SubscriptionLedger]
    {
        var read: [SubscriptionLedger] = []
        for chunk in Array(Set(ids)).sorted().chunked(by: chunkSize) where !chunk.isEmpty {
            var computed: [String: [KeptSpan]] = [:]
            let chunkLedgers = try ledgers(of: chunk, on: connection)
            read += chunkLedgers
            for ledger in chunkLedgers {
                computed[ledger.originalTransactionID] = ledger.timeline(in: ledger.environment ?? .production).spans
                    .map { KeptSpan(span: $0, bundleID: ledger.bundleID, environment: ledger.environment?.rawValue) }
            }
            // Rewritten only where they changed: most saves restate what is kept, and an unchanged row
            // left alone costs no write (no dead row on PostgreSQL).
            let stored = try keptSpans(of: chunk, on: connection)
            let changed = chunk.filter { (computed[$0] ?? []) != (stored[$0] ?? []) }
            guard !changed.isEmpty else { continue }
            var binds = SQLBinds()
            let list = binds.list(changed.map { .text($0) })
            _ = try connection.execute(
                "DELETE FROM entitlement_spans WHERE original_transaction_id IN (\(list))", binds.values)
            let rows = changed.flatMap { id in (computed[id] ?? []).map { spanRow(id: id, $0) } }
            try insertSpans(rows, on: connection)
        }
        return read
    }

    /// The values of one `entitlement_spans` row, in `insertSpans`' column order.
    static func spanRow(id: String, _ kept: KeptSpan) -> [SQLValue] {
        let span = kept.span
        return [
            .text(id), SQLValue(span.startsAt), SQLValue(span.endsAt), .text(span.kind.rawValue),
            SQLValue(span.byGrace), .text(span.transactionID), SQLValue(span.productID),
            SQLValue(kept.bundleID), SQLValue(kept.environment),
        ]
    }

    /// One stored span with the columns it is grouped by.
    struct KeptSpan: Equatable {
        var span: EntitlementSpan
        var bundleID: String?
        var environment: String?
        /// A stored kind this build does not know: never equal to a computed span, so it is rewritten.
        var unreadable = false
    }

    /// The spans stored for these subscriptions, oldest first; a kind this build does not know reads as a
    /// difference, so it is rewritten.
    static func keptSpans(of ids: [String], on connection: any SQLConnection) throws -> [String: [KeptSpan]] {
        var binds = SQLBinds()
        let list = binds.list(ids.map { .text($0) })
        var kept: [String: [KeptSpan]] = [:]
        for row in try connection.execute(
            """
            SELECT original_transaction_id, starts_at, ends_at, kind, by_grace, transaction_id, product_id,
                bundle_id, environment
            FROM entitlement_spans WHERE original_transaction_id IN (\(list)) ORDER BY original_transaction_id, starts_at
            """, binds.values)
        {
            let id = try row.text("original_transaction_id")
            let kind = EntitlementSpan.Kind(rawValue: try row.text("kind"))
            let span = EntitlementSpan(
                startsAt: try row.date("starts_at"), endsAt: try row.optionalDate("ends_at"), kind: kind ?? .paid,
                byGrace: try row.bool("by_grace"), transactionID: try row.text("transaction_id"),
                productID: try row.optionalText("product_id"))
            kept[id, default: []].append(
                KeptSpan(
                    span: span, bundleID: try row.optionalText("bundle_id"),
                    environment: try row.optionalText("environment"), unreadable: kind == nil))
        }
        return kept
    }

    static func insertSpans(_ rows: [[SQLValue]], on connection: any SQLConnection) throws {
        try connection.insert(
            rows, into: "entitlement_spans",
            columns: [
                "original_transaction_id", "starts_at", "ends_at", "kind", "by_grace", "transaction_id", "product_id",
                "bundle_id", "environment",
            ], perStatement: spanRowsPerInsert)
    }

    /// The ledgers (transactions and facts) of these subscriptions; one without any transaction is absent.
    static func ledgers(of ids: [String], on connection: any SQLConnection) throws -> [SubscriptionLedger] {
        guard !ids.isEmpty else { return [] }
        var binds = SQLBinds()
        let list = binds.list(ids.map { .text($0) })
        // Both halves of the ledger in one round trip (a save reads it before and after its write): the
        // transactions (part 0), then the facts (part 1), each row with the other half's columns NULL.
        let nulls = { (columns: [String]) in columns.map { "NULL AS \($0)" }.joined(separator: ", ") }
        let rows = try connection.execute(
            """
            SELECT 0 AS ledger_part, original_transaction_id, transaction_id, \(transactionColumns.joined(separator: ", ")),
                \(nulls(factColumns))
            FROM transactions WHERE original_transaction_id IN (\(list))
            UNION ALL
            SELECT 1, original_transaction_id, transaction_id, \(nulls(transactionColumns)), \(factColumns.joined(separator: ", "))
            FROM subscription_facts WHERE original_transaction_id IN (\(list))
            ORDER BY ledger_part, original_transaction_id, purchased_at, transaction_id
            """, binds.values)
        guard let names = rows.first?.names else { return [] }
        let columns = LedgerColumns(names)
        let part = names.column("ledger_part")
        var grouped: [String: [SQLRow]] = [:]
        var facts: [String: [SubscriptionFact]] = [:]
        for row in rows {
            if try row.int(part) == 0 {
                grouped[try row.text(columns.originalTransactionID), default: []].append(row)
            } else if let fact = try fact(of: row) {
                facts[fact.originalTransactionID, default: []].append(fact)
            }
        }
        return try grouped.keys.sorted().map { id in
            try columns.ledger(id, facts: facts[id] ?? [], rows: grouped[id] ?? [])
        }
    }

    /// The columns of `transactions` a ledger reads besides the two ids (`LedgerTransaction(ledgerRow:)`,
    /// the bundle and the environment).
    private static let transactionColumns = [
        "bundle_id", "environment", "product_id", "purchased_at", "expires_at", "price_milliunits", "currency",
        "storefront", "offer_type", "offer_discount_type", "is_trial", "quantity", "ownership_type", "revoked_at",
        "revocation_reason", "revocation_type", "revocation_percentage", "transaction_reason", "upgraded", "origin",
        "signed_at", "revoked_seat_quantity", "seats_revoked_at",
    ]

    /// The columns of `subscription_facts` a ledger reads besides the two ids.
    private static let factColumns = ["kind", "starts_at", "ends_at", "value", "stated_at"]

    /// Migration 22's rebuild into the table it has just created: every subscription in the ledger, a
    /// chunk of `chunkSize` at a time in original transaction id order (keyset pages), so memory stays
    /// flat however large the ledger. The table starts empty, so each chunk's spans are inserted without
    /// reading or deleting any: in the migration's transaction PostgreSQL has no statistics of the new
    /// table, and those reads, planned as scans of everything inserted so far, made the rebuild grow with
    /// the square of the ledger (17 min 48 s at a million subscriptions).
    static func rebuildSpans(on connection: any SQLConnection) throws {
        var after = ""
        while true {
            let rows = try connection.execute(
                """
                SELECT DISTINCT original_transaction_id FROM transactions WHERE original_transaction_id > $1
                ORDER BY original_transaction_id LIMIT $2
                """, [.text(after), .int64(Int64(chunkSize))])
            let ids = try rows.map { try $0.text("original_transaction_id") }
            guard let last = ids.last else { return }
            let spans = try ledgers(of: ids, on: connection).flatMap { ledger in
                ledger.timeline(in: ledger.environment ?? .production).spans.map { span in
                    spanRow(
                        id: ledger.originalTransactionID,
                        KeptSpan(span: span, bundleID: ledger.bundleID, environment: ledger.environment?.rawValue))
                }
            }
            try insertSpans(spans, on: connection)
            after = last
        }
    }

    /// Every fact recorded about these subscriptions, by original transaction id.
    static func facts(of ids: [String], on connection: any SQLConnection) throws -> [String: [SubscriptionFact]] {
        var facts: [String: [SubscriptionFact]] = [:]
        for chunk in ids.chunked(by: chunkSize) where !chunk.isEmpty {
            var binds = SQLBinds()
            let list = binds.list(chunk.map { .text($0) })
            for row in try connection.execute(
                """
                SELECT original_transaction_id, kind, transaction_id, starts_at, ends_at, value, stated_at
                FROM subscription_facts WHERE original_transaction_id IN (\(list))
                """, binds.values)
            {
                if let fact = try fact(of: row) { facts[fact.originalTransactionID, default: []].append(fact) }
            }
        }
        return facts
    }

    /// The fact a `subscription_facts` row states; nil for a kind this build does not know (written by a
    /// newer one), which says nothing it can read.
    private static func fact(of row: SQLRow) throws -> SubscriptionFact? {
        guard let kind = SubscriptionFact.Kind(rawValue: try row.text("kind")) else { return nil }
        return SubscriptionFact(
            originalTransactionID: try row.text("original_transaction_id"), kind: kind,
            transactionID: try row.optionalText("transaction_id"), startsAt: try row.date("starts_at"),
            endsAt: try row.optionalDate("ends_at"), value: try row.optionalText("value"),
            statedAt: try row.date("stated_at"))
    }
}

extension SQLSubscriptionStore {
    /// The stored entitlement spans of one subscription, oldest first: what SQL reads as its timeline
    /// (for checks and support; dashboards query `entitlement_spans` directly).
    public func entitlementSpans(of originalTransactionID: String) async throws -> [EntitlementSpan] {
        let rows = try await onConnection { connection in
            try connection.execute(
                """
                SELECT starts_at, ends_at, kind, by_grace, transaction_id, product_id FROM entitlement_spans
                WHERE original_transaction_id = $1 ORDER BY starts_at
                """, [.text(originalTransactionID)])
        }
        return try rows.map { row in
            guard let kind = EntitlementSpan.Kind(rawValue: try row.text("kind")) else {
                throw SubscriptionStoreError.corruptRow(
                    "entitlement_spans.kind of \(originalTransactionID) is neither paid nor trial; run a check of it")
            }
            return EntitlementSpan(
                startsAt: try row.date("starts_at"), endsAt: try row.optionalDate("ends_at"), kind: kind,
                byGrace: try row.bool("by_grace"), transactionID: try row.text("transaction_id"),
                productID: try row.optionalText("product_id"))
        }
    }
}
