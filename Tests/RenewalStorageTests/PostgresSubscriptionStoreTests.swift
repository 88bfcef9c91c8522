import Foundation

@testable import RenewalPostgres
@testable import RenewalSQL
@testable import RenewalStorage
import RenewalTesting
import Testing

/// The storage conformance suite and the PostgreSQL-only behaviours, against a real server named by
/// `RENEWAL_TEST_POSTGRES_URL` (`.ci/run` starts one). Without it these tests show as skipped.
@Suite(
    "PostgresSubscriptionStore", .enabled(if: PostgresTestSchema.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set")
)
struct PostgresSubscriptionStoreTests {
    @Test("conforms to SubscriptionStore", arguments: SubscriptionStoreConformance.checks)
    func conformance(_ check: SubscriptionStoreConformance.Check) async throws {
        try await PostgresTestSchema.with { schema in
            try await check.run(try PostgresSubscriptionStore.open(url: schema.url))
        }
    }

    @Test(
        "the due query is an index range scan on receipts(next_check_at, id), with or without cursor and lease",
        arguments: [(false, false), (true, false), (false, true), (true, true)])
    func dueQueryPlan(withCursor: Bool, withLease: Bool) async throws {
        try await PostgresTestSchema.with { schema in
            let store = try PostgresSubscriptionStore.open(url: schema.url)
            _ = try await store.migrate()
            // Given 20 000 receipts, one due every 2 minutes over four weeks, and fresh statistics
            let start = Date(timeIntervalSince1970: 1_700_000_000)
            try await store.database.withConnection { connection in
                _ = try connection.execute(
                    """
                    INSERT INTO receipts (user_id, latest_receipt, status, next_check_at, consecutive_failures,
                        consecutive_malformed, created_at, updated_at)
                    SELECT 'user-' || g, 'receipt', 'unverified', $1::bigint + g::bigint * 120000, 0, 0, $1::bigint, $1::bigint
                    FROM generate_series(1, 20000) AS g
                    """,
                    [SQLValue(start)]
                )
                _ = try connection.execute("ANALYZE receipts", [])
            }
            // When the due page an hour in is planned
            let now = start.addingTimeInterval(3600)
            let statement = try #require(
                PostgresSubscriptionStore.batchStatement(
                    .due(asOf: now),
                    after: withCursor ? ReceiptCursor(nextCheckAt: start.addingTimeInterval(600), id: 5) : nil,
                    limit: 32, lease: withLease ? Lease(owner: "w", until: now.addingTimeInterval(600), now: now) : nil,
                    dialect: .postgres
                ))
            let plan = try await store.database.withConnection { connection in
                try connection.execute("EXPLAIN " + statement.sql, statement.binds).compactMap { row -> String? in
                    if case .text(let line)? = row["QUERY PLAN"] { return line }
                    return nil
                }.joined(separator: "\n")
            }
            // Then it walks the index from the soonest row, without a sort or a sequential scan
            #expect(plan.contains("Index Scan using receipts_next_check_at_idx on receipts r"), "\(plan)")
            let indexCondition = plan.split(separator: "\n").first {
                $0.contains("Index Cond:") && $0.contains("next_check_at <= ")
            }
            #expect(indexCondition != nil, "\(plan)")
            #expect(!plan.contains("Seq Scan on receipts"), "\(plan)")
            #expect(!plan.contains("Sort"), "\(plan)")
            if withLease { #expect(plan.contains("LockRows"), "\(plan)") }
            if ProcessInfo.processInfo.environment["RENEWAL_PRINT_PLANS"] != nil { print(plan) }
        }
    }

    @Test("a store claiming while another holds uncommitted claims skips the locked rows instead of waiting")
    func skipLockedDoesNotWait() async throws {
        try await PostgresTestSchema.with { schema in
            let first = try PostgresSubscriptionStore.open(url: schema.url)
            // The second connection gives up after 5 s instead of hanging if rows were waited for.
            let second = try PostgresSubscriptionStore.open(url: schema.url(statementTimeoutMilliseconds: 5000))
            _ = try await first.migrate()
            let now = Date(timeIntervalSince1970: 1_700_000_000)
            _ = try await first.importReceipts(
                (0..<10).map { ReceiptImport(userID: "user-\($0)", latestReceipt: "r") }, now: now)
            // Given the first worker's claim statement has run inside a still-open transaction
            let statement = try #require(
                PostgresSubscriptionStore.batchStatement(
                    .due(asOf: now), after: nil, limit: 4,
                    lease: Lease(owner: "A", until: now.addingTimeInterval(600), now: now),
                    dialect: .postgres
                ))
            let heldByFirst = try await first.database.withConnection { connection in
                try connection.beginTransaction()
                return try connection.execute(statement.sql, statement.binds).map { try $0.int64("id") }
            }
            // When the second worker claims everything it can
            let takenBySecond = try await second.nextBatch(
                .due(asOf: now), after: nil, limit: 100,
                lease: Lease(owner: "B", until: now.addingTimeInterval(600), now: now)
            ).map(\.id)
            try await first.database.withConnection { try $0.commitTransaction() }
            // Then it got the other six at once, and nothing is left for anyone
            #expect(heldByFirst.count == 4)
            #expect(takenBySecond.count == 6)
            #expect(Set(heldByFirst).isDisjoint(with: takenBySecond))
            let left = try await second.nextBatch(
                .due(asOf: now), after: nil, limit: 100,
                lease: Lease(owner: "C", until: now.addingTimeInterval(600), now: now))
            #expect(left.isEmpty)
        }
    }

    @Test("three stores leasing concurrently never take the same receipt")
    func concurrentLeasesDoNotOverlap() async throws {
        try await PostgresTestSchema.with { schema in
            let setup = try PostgresSubscriptionStore.open(url: schema.url)
            _ = try await setup.migrate()
            let now = Date(timeIntervalSince1970: 1_700_000_000)
            _ = try await setup.importReceipts(
                (0..<300).map { ReceiptImport(userID: "user-\($0)", latestReceipt: "r") }, now: now)
            let stores: [any SubscriptionStore] = try (0..<3).map { _ in
                try PostgresSubscriptionStore.open(url: schema.url)
            }
            let taken = try await SubscriptionStoreConformance.claimConcurrently(stores, now: now)
            #expect(taken.count == 300)
            #expect(Set(taken).count == 300)
        }
    }

    @Test("another worker's live lease is respected; once it expires the rows are taken over")
    func expiredLeaseIsTakenOver() async throws {
        try await PostgresTestSchema.with { schema in
            let dead = try PostgresSubscriptionStore.open(url: schema.url)
            let alive = try PostgresSubscriptionStore.open(url: schema.url)
            _ = try await dead.migrate()
            let now = Date(timeIntervalSince1970: 1_700_000_000)
            _ = try await dead.importReceipts(
                (0..<5).map { ReceiptImport(userID: "user-\($0)", latestReceipt: "r") }, now: now)
            // Given a worker claimed every row for 30 s and died
            let claimed = try await dead.nextBatch(
                .due(asOf: now), after: nil, limit: 10,
                lease: Lease(owner: "dead", until: now.addingTimeInterval(30), now: now))
            #expect(claimed.count == 5)
            // Then another worker gets nothing while the lease lasts, and everything once it has run out
            let during = now.addingTimeInterval(29)
            #expect(
                try await alive.nextBatch(
                    .due(asOf: during), after: nil, limit: 10,
                    lease: Lease(owner: "alive", until: during.addingTimeInterval(30), now: during)
                ).isEmpty)
            let after = now.addingTimeInterval(30)
            let takenOver = try await alive.nextBatch(
                .due(asOf: after), after: nil, limit: 10,
                lease: Lease(owner: "alive", until: after.addingTimeInterval(30), now: after))
            #expect(takenOver.map(\.id) == claimed.map(\.id))
            let owners = try await alive.database.withConnection { connection in
                try connection.execute("SELECT DISTINCT lease_owner FROM receipts", []).map {
                    try $0.text("lease_owner")
                }
            }
            #expect(owners == ["alive"])
        }
    }

    @Test("two processes migrating the same database at once both succeed and apply each version once")
    func concurrentMigrate() async throws {
        try await PostgresTestSchema.with { schema in
            let stores = try (0..<3).map { _ in try PostgresSubscriptionStore.open(url: schema.url) }
            let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                for store in stores { group.addTask { try await store.migrate() } }
                return try await group.reduce(into: [[Int]]()) { $0.append($1) }
            }
            #expect(applied.filter { !$0.isEmpty } == [Array(1...SQLSchema.currentVersion)])
            for store in stores { try await store.checkSchema() }
            let versions = try await stores[0].database.withConnection { connection in
                try connection.execute("SELECT version FROM schema_migrations ORDER BY version", []).map {
                    try $0.int("version")
                }
            }
            #expect(versions == Array(1...SQLSchema.currentVersion))
        }
    }
}

/// Behaviours of the libpq layer itself.
@Suite("PostgresDatabase", .enabled(if: PostgresTestSchema.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct PostgresDatabaseTests {
    @Test("result columns map to SQLValue by type")
    func columnTypes() async throws {
        let database = try PostgresDatabase(url: try #require(PostgresTestSchema.baseURL))
        let row = try await database.withConnection { connection in
            try connection.execute(
                """
                SELECT 1::int2 AS a, 2::int4 AS b, $1::int8 AS c, 1.5::float8 AS d, $2::text AS e, true AS f, \
                NULL::text AS g, 10::numeric AS h
                """,
                [.int64(Int64.max), .text("ünïcode ✓")]
            ).first
        }
        #expect(
            row?.values == [
                .int64(1), .int64(2), .int64(Int64.max), .double(1.5), .text("ünïcode ✓"), .int64(1), .null, .int64(10),
            ])
    }

    @Test("errors carry the server's message and SQLSTATE but never the bound values")
    func errorsDoNotLeakValues() async throws {
        try await PostgresTestSchema.with { schema in
            let store = try PostgresSubscriptionStore.open(url: schema.url)
            _ = try await store.migrate()
            let secret = "MIIT-secret-receipt-data"
            for (sql, binds) in [
                (
                    "INSERT INTO receipts (user_id, latest_receipt) VALUES ($1, $2)",
                    [SQLValue.text("u"), .text(secret)]
                ),
                ("SELECT id FROM receipts WHERE next_check_at = $1", [SQLValue.text(secret)]),
            ] {
                await #expect {
                    try await store.database.withConnection { _ = try $0.execute(sql, binds) }
                } throws: { error in
                    guard case .query(let detail)? = error as? SubscriptionStoreError else { return false }
                    return !detail.contains(secret) && detail.hasPrefix("PostgreSQL error ")
                }
            }
        }
    }

    @Test("a session killed by the server is replaced on the next use, with the timeout defaults set again")
    func lostConnection() async throws {
        try await PostgresTestSchema.with { schema in
            let database = try PostgresDatabase(url: schema.url)
            let pid = try await database.withConnection {
                try $0.execute("SELECT pg_backend_pid() AS pid", []).first?.int64("pid")
            }
            let admin = try PostgresDatabase(url: try #require(PostgresTestSchema.baseURL))
            _ = try await admin.withConnection {
                try $0.execute("SELECT pg_terminate_backend($1::int)", [SQLValue(pid)])
            }
            // The statement that finds the session gone runs again once on a new one.
            let after = try await database.withConnection { connection in
                try connection.execute(
                    "SELECT pg_backend_pid() AS pid, current_setting('statement_timeout') AS timeout", []
                ).first
            }
            #expect(try after?.int64("pid") != pid)
            #expect(after?["timeout"] == .text("1min"))
        }
    }

    @Test("timeouts default to a minute per statement unless the URL sets its own")
    func timeoutDefaults() async throws {
        try await PostgresTestSchema.with { schema in
            let plain = try PostgresDatabase(url: schema.url)
            let setting =
                """
                SELECT current_setting('statement_timeout') AS s, \
                current_setting('idle_in_transaction_session_timeout') AS i
                """
            let defaults = try await plain.withConnection { try $0.execute(setting, []).first }
            #expect(defaults?["s"] == .text("1min"))
            #expect(defaults?["i"] == .text("2min"))
            let custom = try PostgresDatabase(url: schema.url(statementTimeoutMilliseconds: 5000))
            let overridden = try await custom.withConnection { try $0.execute(setting, []).first }
            #expect(overridden?["s"] == .text("5s"))
        }
    }

    @Test("a statement stuck behind another session's lock fails after the statement timeout, naming the server")
    func stalledStatementTimesOut() async throws {
        try await PostgresTestSchema.with { schema in
            _ = try await PostgresSubscriptionStore.open(url: schema.url).migrate()
            let store = try PostgresSubscriptionStore.open(url: schema.url(statementTimeoutMilliseconds: 1000))
            let blocker = try PostgresDatabase(url: schema.url)
            try await blocker.withConnection { connection in
                _ = try connection.execute("BEGIN", [])
                _ = try connection.execute("LOCK TABLE receipts IN ACCESS EXCLUSIVE MODE", [])
            }
            let started = ContinuousClock.now
            await #expect {
                _ = try await store.nextBatch(.due(asOf: Date()), after: nil, limit: 10, lease: nil)
            } throws: { error in
                guard case .unavailable(let detail)? = error as? SubscriptionStoreError else { return false }
                return detail.contains("57014") && detail.contains("statement timeout")
                    && detail.contains("PostgreSQL at postgres")
            }
            // Far below the server's default statement timeout (a minute), with room for two busy
            // cores: the parallel test phase once took 10.5 s here for a 1 s timeout.
            #expect(ContinuousClock.now - started < .seconds(30))
            try await blocker.withConnection { _ = try $0.execute("ROLLBACK", []) }
        }
    }
}

/// URL handling needs no server: these always run.
@Suite("PostgresURL")
struct PostgresURLTests {
    @Test(
        "redaction hides the password in the user part and in a password parameter",
        arguments: [
            (
                "postgresql://bob:s3cret@db.example:5432/app?sslmode=require",
                "postgresql://bob:***@db.example:5432/app?sslmode=require"
            ),
            ("postgres://bob@db/app", "postgres://bob@db/app"),
            ("postgres://db/app?user=bob&password=s3cret", "postgres://db/app?user=bob&password=***"),
            ("postgresql://bob:p%40ss@db/app", "postgresql://bob:***@db/app"),
        ])
    func redaction(url: String, expected: String) {
        #expect(PostgresURL.redacted(url) == expected)
    }

    @Test(
        "a URL libpq rejects gives a clear error without the password",
        arguments: [
            "postgresql://bob:s3cret-pw@127.0.0.1:notaport/db",
            "postgresql://bob:s3cret-pw@127.0.0.1/db?nosuchparameter=1",
            "postgresql://bob:s3cret-pw@127.0.0.1/db?sslmode=sometimes",
        ])
    func rejectedURL(url: String) {
        #expect {
            _ = try PostgresSubscriptionStore.open(url: url)
        } throws: { error in
            let message = "\(error)"
            return message.contains("bob:***@127.0.0.1") && !message.contains("s3cret-pw")
                && (message.contains("invalid PostgreSQL URL") || message.contains("cannot connect"))
        }
    }

    @Test("an unreachable server gives a clear error without the password")
    func unreachable() {
        #expect {
            _ = try PostgresSubscriptionStore.open(url: "postgresql://bob:s3cret-pw@127.0.0.1:1/db?connect_timeout=2")
        } throws: { error in
            let message = "\(error)"
            return message.contains("cannot connect to PostgreSQL at postgresql://bob:***@127.0.0.1:1/db")
                && !message.contains("s3cret-pw")
        }
    }
}

/// A uniquely named schema on the server from `RENEWAL_TEST_POSTGRES_URL`, dropped afterwards.
struct PostgresTestSchema {
    static var baseURL: String? {
        ProcessInfo.processInfo.environment["RENEWAL_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    let name: String
    let base: String

    /// The base URL with `search_path` set to this schema (and an optional statement timeout).
    func url(statementTimeoutMilliseconds: Int? = nil) -> String {
        var options = "-csearch_path%3D\(name)"
        if let statementTimeoutMilliseconds { options += "%20-cstatement_timeout%3D\(statementTimeoutMilliseconds)" }
        return base + (base.contains("?") ? "&" : "?") + "options=" + options
    }

    var url: String { url() }

    static func with(_ body: (PostgresTestSchema) async throws -> Void) async throws {
        let base = try #require(baseURL)
        let schema = PostgresTestSchema(
            name: "renewal_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""), base: base)
        let admin = try PostgresDatabase(url: base)
        // The name is ours (hex digits), so splicing it is safe; identifiers cannot be bound.
        _ = try await admin.withConnection { try $0.execute("CREATE SCHEMA \(schema.name)", []) }
        do {
            try await body(schema)
        } catch {
            _ = try? await admin.withConnection { try $0.execute("DROP SCHEMA \(schema.name) CASCADE", []) }
            throw error
        }
        _ = try await admin.withConnection { try $0.execute("DROP SCHEMA \(schema.name) CASCADE", []) }
    }
}
