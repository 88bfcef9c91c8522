import Foundation
import RenewalPostgres
import RenewalSQL
import Testing

/// `renewal copy-database` and the commands that write, through the built binary: while a copy reads a
/// database, `import` and `run` on it are refused with exit 75 and write nothing, so the copy holds every
/// row the source holds when it ends. The copy is held mid-way by a PostgreSQL session that locks a table
/// of the target it has still to fill (a real lock on a real server, no hook in the binary).
@Suite(
    "copy-database: writers refused while a copy reads the database (real binary)",
    .enabled(
        if: PostgresKillEnvironment.baseURL != nil && PostgresKillTests.psqlPath != nil,
        "RENEWAL_TEST_POSTGRES_URL is not set, or psql is missing"))
struct CopyDatabaseWritersTests {
    static func lines(_ prefix: String, count: Int, firstID: Int) -> String {
        (0..<count).map { index in
            #"{"user_id": "\#(prefix)-\#(index)", "original_transaction_id": "\#(2_000_000_000_000_000 + firstID + index)"}"#
        }.joined(separator: "\n") + "\n"
    }

    /// A new PostgreSQL database (not a schema of the shared one) for the copy's target: the open
    /// transaction that holds the copy keeps `CREATE INDEX CONCURRENTLY` waiting only in this database,
    /// so other tests' migrations (which hold the database's migration lock meanwhile) never wait on it.
    static func separateDatabase() async throws -> StoreKit2ImportTests.Database {
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath, "psql is needed to create the test database")
        let name = "renewal_copy_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        var components = try #require(URLComponents(string: base))
        components.path = "/" + name
        let url = try #require(components.string)
        try await PostgresKillTests.sqlOffPool("CREATE DATABASE \(name)", url: base, psql: psql)
        return StoreKit2ImportTests.Database(
            url: url,
            drop: {
                _ = try? PostgresKillTests.sql("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", url: base, psql: psql)
            }
        )
    }

    static func users(_ database: String) async throws -> [String] {
        try await SeveralAppsTests.strings(
            "SELECT user_id AS value FROM receipts ORDER BY user_id",
            backend: database.hasPrefix("postgres") ? "postgres" : "sqlite", database: database)
    }

    @Test(
        """
        import and run on the source while copy-database copies it exit 75 naming the copy and write nothing; \
        the copy ends with every row the source holds, and the same import then goes through
        """,
        arguments: ["sqlite", "postgres"])
    func writersAreRefusedDuringACopy(sourceKind: String) async throws {
        try await CopyDatabaseTests.withSetup { directory, _, environment in
            let source = try await StoreKit2ImportTests.database(sourceKind, directory: directory, name: "source")
            defer { source.drop() }
            let target = try await Self.separateDatabase()
            defer { target.drop() }
            try await SeveralAppsTests.migrateAndImport(
                Self.lines("before", count: 5, firstID: 0), directory: directory, database: source.url)
            #expect(try await CLI.run(["migrate", "--database", target.url]).status == 0)

            // A session holding the target's subscriptions table: the copy fills receipts, then waits.
            let holder = try PostgresDatabase(url: target.url)
            try await holder.withConnection { connection in
                try connection.beginTransaction()
                _ = try connection.execute("LOCK TABLE subscriptions IN ACCESS EXCLUSIVE MODE", [])
            }
            let log = directory + "/copy.log"
            let copy = try PostgresKillTests.start(
                ["copy-database", source.url, target.url, "--batch-size", "2"], environment: environment, log: log)
            let deadline = Date().addingTimeInterval(60)
            var waiting = false
            while !waiting, copy.isRunning, Date() < deadline {
                waiting = try await holder.withConnection { connection in
                    try !connection.execute(
                        "SELECT 1 AS waiting FROM pg_locks WHERE NOT granted AND relation = 'subscriptions'::regclass",
                        []
                    ).isEmpty
                }
                if !waiting { try await Task.sleep(for: .milliseconds(20)) }
            }
            if !waiting {
                let sessions = try await holder.withConnection { connection in
                    try connection.execute(
                        """
                        SELECT string_agg(pid || ' ' || state || ' ' || COALESCE(wait_event_type, '-') || ' '
                            || COALESCE(wait_event, '-') || ' ' || left(query, 120), E'\n') AS value
                        FROM pg_stat_activity WHERE application_name = 'renewal'
                        """, []
                    ).first?["value"]
                }
                Issue.record(
                    """
                    the copy never waited on the target: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
                    renewal sessions: \(String(describing: sessions))
                    """)
            }

            // While it waits, the source's writers are refused.
            let imported = try await CLI.run(
                ["import", "-", "--database", source.url], environment: environment,
                stdin: Self.lines("during", count: 20, firstID: 100))
            #expect(imported.status == 75, "\(imported.stdout)\n\(imported.stderr)")
            #expect(imported.stderr.contains("copy-database is copying"), "\(imported.stderr)")
            #expect(!imported.stdout.contains("20 new"), "\(imported.stdout)")
            let run = try await CLI.run(
                ["run", "--database", source.url, "--max-attempts", "1", "--webhook-seconds", "0"],
                environment: environment)
            #expect(run.status == 75, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stderr.contains("copy-database is copying"), "\(run.stderr)")

            try await holder.withConnection { try $0.rollbackTransaction() }
            let reason = await PostgresKillTests.waitForExit(copy)
            let copyLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(reason == .exit && copy.terminationStatus == 0, "\(copyLog)")

            // Nothing was lost: the target holds exactly what the source holds, and no "during" user.
            let onSource = try await Self.users(source.url)
            #expect(onSource.count == 5 && onSource.allSatisfy { $0.hasPrefix("before-") }, "\(onSource)")
            #expect(try await Self.users(target.url) == onSource)

            // The copy has ended: the same import goes through.
            let again = try await CLI.run(
                ["import", "-", "--database", source.url], environment: environment,
                stdin: Self.lines("during", count: 20, firstID: 100))
            #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
            #expect(again.stdout.contains("20 new"), "\(again.stdout)")
        }
    }
}
