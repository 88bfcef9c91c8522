import Foundation
import RenewalCore
import RenewalStorage
import Synchronization

/// Keeps the analytics summaries in step with one database transaction's ledger writes (schema 29): the
/// subscriptions a write touches are read before it, their contribution rows
/// (`AnalyticsContributions.rows(of:)`) computed before and after, and the difference added to the
/// transaction's `AnalyticsSummaryWrites`, which appends the sum of its writes to
/// `analytics_summary_deltas` once, before the commit. Work in proportion to the subscriptions written;
/// nothing is read when the write adds nothing to the ledger or the summaries are not kept.
///
/// A `--rebuild` page and a write never interleave on one subscription: on PostgreSQL a writer holds
/// `lockName` shared from before its first read to its commit and a rebuild page holds it exclusively
/// (SQLite has one writer at a time anyway), and the writer records only what the rebuild has already
/// read (`rebuilt_through`).
struct AnalyticsSummaryUpkeep {
    /// The lock of `begin` (shared) and of a rebuild page (exclusive), per schema.
    static let lockName = "renewal.analytics-summaries"

    /// The subscriptions whose change is recorded.
    private let kept: Set<String>
    /// Their rows before the write (absent: none).
    private var before: [String: [ContributionKey: Int]] = [:]
    /// The ledgers read for them: the write's facts need not read these rows again.
    private(set) var read = LedgersRead()
    /// The transaction's sum the difference goes to.
    private let writes: AnalyticsSummaryWrites

    private init(kept: Set<String>, writes: AnalyticsSummaryWrites) {
        self.kept = kept
        self.writes = writes
    }

    /// Before a write to the ledger of `ids` (and of `fresh` subscriptions, whose ledger holds nothing
    /// yet, so nothing of them is read), one of the transaction's `writes`. Nil when there is nothing to
    /// keep: no subscription, summaries never built or built by other definitions, or a rebuild that has
    /// not read any of them yet.
    static func begin(
        _ ids: some Collection<String>, fresh: some Collection<String> = [String](),
        into writes: AnalyticsSummaryWrites, on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> AnalyticsSummaryUpkeep? {
        guard !ids.isEmpty || !fresh.isEmpty else { return nil }
        var kept = Set(ids).union(fresh)
        switch try writes.standing(on: connection, dialect: dialect) {
        case .notKept: return nil
        case .built: break
        case .building: kept = try kept.filter { try rebuilt($0, on: connection) }
        }
        guard !kept.isEmpty else { return nil }
        var upkeep = AnalyticsSummaryUpkeep(kept: kept, writes: writes)
        let contributions = AnalyticsContributions()
        let unread = Set(fresh)
        for chunk in kept.filter({ !unread.contains($0) }).sorted().chunked(by: LedgerSQL.chunkSize)
        where !chunk.isEmpty {
            upkeep.read.subscriptions.formUnion(chunk)
            for ledger in try LedgerSQL.ledgers(of: chunk, on: connection) {
                upkeep.before[ledger.originalTransactionID] = contributions.rows(of: ledger)
                upkeep.read.add(ledger)
            }
        }
        return upkeep
    }

    /// Whether a rebuild in progress has summed `id` already (compared by the database, in the order
    /// the rebuild pages in).
    private static func rebuilt(_ id: String, on connection: any SQLConnection) throws -> Bool {
        let rows = try connection.execute(
            "SELECT 1 AS done FROM analytics_summary_state WHERE id = 1 AND $1 <= rebuilt_through", [.text(id)])
        return !rows.isEmpty
    }

    /// After the write: `ledgers` are the written subscriptions' ledgers as the transaction now holds them
    /// (one without transactions may be absent). Adds the difference to the transaction's writes.
    func finish(after ledgers: [SubscriptionLedger]) {
        let contributions = AnalyticsContributions()
        var compared: Set<String> = []
        for ledger in ledgers where kept.contains(ledger.originalTransactionID) {
            let rows = contributions.rows(of: ledger)
            // Each subscription's own difference first: only the keys its write changed reach the delta.
            guard compared.insert(ledger.originalTransactionID).inserted,
                let old = before[ledger.originalTransactionID]
            else {
                writes.delta.add(rows)
                continue
            }
            writes.delta.add(AnalyticsSummary.difference(from: old, to: rows))
        }
        for (id, rows) in before where !compared.contains(id) { writes.delta.add(rows, sign: -1) }
    }

    /// Inserts `rows` into `table` (`analytics_summary_deltas`, or the rows of a rebuild page with
    /// `upsert`), a few hundred per statement. No two transactions upsert at once (a rebuild page holds
    /// the lock exclusively), so the order of the rows does not matter.
    static func append(
        _ rows: [ContributionKey: Int], to table: String, upsert: Bool = false, on connection: any SQLConnection
    ) throws {
        var insert = RowInsert(table: table, upsert: upsert, expected: rows.count, connection: connection)
        for (key, count) in rows where count != 0 {
            let (shape, day, sinceDay) = columns(of: key.shape)
            try insert.add(
                shape: shape, day: day, sinceDay: sinceDay, environment: key.environment.rawValue,
                bundleID: key.bundleID ?? "", keyText: try keyText(key), count: count)
        }
        try insert.finish()
    }

    /// Rows of the summary tables' columns, sent `rowsPerStatement` to an `INSERT` (`append`, and a rebuild
    /// page's `PackedSummaryRows`).
    struct RowInsert {
        let table: String
        let upsert: Bool
        let connection: any SQLConnection
        private var binds: [SQLValue] = []
        private var pending = 0

        init(table: String, upsert: Bool, expected: Int, connection: any SQLConnection) {
            self.table = table
            self.upsert = upsert
            self.connection = connection
            binds.reserveCapacity(min(expected, rowsPerStatement) * columnCount)
        }

        mutating func add(
            shape: String, day: Int64, sinceDay: Int64, environment: String, bundleID: String, keyText: String,
            count: Int
        ) throws {
            binds += [
                .text(shape), .int64(day), .int64(sinceDay), .text(environment), .text(bundleID), .text(keyText),
                .int64(Int64(count)),
            ]
            pending += 1
            if pending == rowsPerStatement { try finish() }
        }

        /// Sends the rows not sent yet.
        mutating func finish() throws {
            guard pending > 0 else { return }
            _ = try connection.execute(insertSQL(into: table, rows: pending, upsert: upsert), binds)
            binds.removeAll(keepingCapacity: true)
            pending = 0
        }
    }

    /// Rows per `INSERT` of `append`, and the columns each binds.
    static let rowsPerStatement = 200
    static let columnCount = 7

    /// The statements of full `INSERT`s by table and upsert: the same text every time, so it is built once
    /// (and SQLite's statement cache finds it) rather than numbering 1,400 placeholders per statement.
    private static let fullStatements = Mutex<[String: String]>([:])

    /// `INSERT INTO table (…) VALUES ($1, …, $7), …` for `rows` rows (`ON CONFLICT … DO UPDATE` adding the
    /// counts when `upsert`).
    static func insertSQL(into table: String, rows: Int, upsert: Bool) -> String {
        let name = "\(table) \(upsert)"
        if rows == rowsPerStatement, let sql = fullStatements.withLock({ $0[name] }) { return sql }
        var tuples = ""
        for row in 0..<rows {
            let first = row * columnCount + 1
            tuples += row == 0 ? "(" : ", ("
            tuples += (first..<(first + columnCount)).map { "$\($0)" }.joined(separator: ", ")
            tuples += ")"
        }
        let sql = """
            INSERT INTO \(table) (shape, day, since_day, environment, bundle_id, row_key, count)
            VALUES \(tuples)\(upsert ? """

                ON CONFLICT (shape, day, since_day, row_key)
                DO UPDATE SET count = \(table).count + excluded.count
                """ : "")
            """
        if rows == rowsPerStatement { fullStatements.withLock { $0[name] = sql } }
        return sql
    }

    /// Row keys as text, by key without its shape: the rows of a page or a write repeat a few keys
    /// (figure, product, price) at many days, and encoding the JSON is most of what writing them costs.
    private static let keyTexts = Mutex<[ContributionKey: String]>([:])

    /// `AnalyticsSummaryRowKey.text(of:)`, encoded once per key (the cache is emptied at 100,000 keys).
    static func keyText(_ key: ContributionKey) throws -> String {
        let bare = key.withoutShape
        if let text = keyTexts.withLock({ $0[bare] }) { return text }
        let text = try AnalyticsSummaryRowKey.text(of: bare)
        keyTexts.withLock { texts in
            if texts.count >= 100_000 { texts.removeAll() }
            texts[bare] = text
        }
        return text
    }

    /// A shape as the tables' (shape, day, since_day) columns.
    static func columns(of shape: ContributionShape) -> (String, Int64, Int64) {
        switch shape {
        case .event(let index): return ("event", Int64(index), 0)
        case .step(let index): return ("step", Int64(index), 0)
        case .corner(let since, let until): return ("corner", Int64(until), Int64(since))
        }
    }
}

/// What the ledger writes of one database transaction share for the summaries: whether they are kept,
/// read once at the first write that needs it, and the changes of every write, summed, so a batch of
/// checks or a page of the change feed appends one row per key (`keeping(on:_:)`, before the commit)
/// rather than each write its own. On PostgreSQL the first read takes `AnalyticsSummaryUpkeep.lockName` shared
/// until the commit, and a rebuild changes the state only holding it exclusively, so what was read holds
/// for the whole transaction. One per transaction, used on its connection only.
final class AnalyticsSummaryWrites {
    /// Whether the writes keep the summaries.
    enum Standing {
        /// Never built, or built by other definitions.
        case notKept
        case built
        /// A rebuild is paging: only the subscriptions it has read are kept.
        case building
    }

    private var read: Standing?
    /// The sum of the writes' changes so far.
    var delta = AnalyticsSummary()

    /// Takes the lock and reads the state at the first call; the same answer after.
    func standing(on connection: any SQLConnection, dialect: SQLDialect) throws -> Standing {
        if let read { return read }
        if dialect == .postgres {
            _ = try connection.execute(
                "SELECT pg_advisory_xact_lock_shared(hashtextextended(current_schema() || '/' || $1, 0))",
                [.text(AnalyticsSummaryUpkeep.lockName)])
        }
        let state = try connection.execute(
            "SELECT status, definition_version FROM analytics_summary_state WHERE id = 1", []
        ).first
        let standing: Standing
        if let state, try state.int("definition_version") == AnalyticsSummaryState.definitionVersion {
            standing = try state.text("status") == "built" ? .built : .building
        } else {
            standing = .notKept
        }
        read = standing
        return standing
    }

    /// Runs `body`, the ledger writes of one transaction on `connection`, with one `AnalyticsSummaryWrites`,
    /// then appends their summed changes to `analytics_summary_deltas` (nothing when they cancel).
    static func keeping<T>(on connection: any SQLConnection, _ body: (AnalyticsSummaryWrites) throws -> T) throws
        -> T
    {
        let writes = AnalyticsSummaryWrites()
        let result = try body(writes)
        try AnalyticsSummaryUpkeep.append(writes.delta.counts, to: "analytics_summary_deltas", on: connection)
        return result
    }
}
