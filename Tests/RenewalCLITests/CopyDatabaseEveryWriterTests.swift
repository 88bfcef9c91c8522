import Foundation
import RenewalPostgres
import RenewalSQL
import Testing

/// Every command that writes, not only `import` and `run`, is refused (exit 75, nothing written) while
/// `renewal copy-database` copies the database: `migrate` (it compacts the summaries even when the
/// schema is current), `analytics --refresh-daily` (it replaces the daily series), `backfill` and
/// `deliver`. `check` writes nothing without Server API credentials and still answers. The copy is held
/// mid-way as in `CopyDatabaseWritersTests`: a PostgreSQL session locks a table of the target.
@Suite(
    "copy-database: migrate, analytics --refresh-daily, backfill and deliver refused during a copy (real binary)",
    .enabled(
        if: PostgresKillEnvironment.baseURL != nil && PostgresKillTests.psqlPath != nil,
        "RENEWAL_TEST_POSTGRES_URL is not set, or psql is missing"))
struct CopyDatabaseEveryWriterTests {
    /// Starts `copy-database source target` with the target's `subscriptions` table locked by `holder`,
    /// and returns once the copy waits on it.
    static func startHeldCopy(
        source: String, target: String, holder: PostgresDatabase, directory: String, environment: [String: String]
    ) async throws -> Process {
        try await holder.withConnection { connection in
            try connection.beginTransaction()
            _ = try connection.execute("LOCK TABLE subscriptions IN ACCESS EXCLUSIVE MODE", [])
        }
        let log = directory + "/copy.log"
        let copy = try PostgresKillTests.start(
            ["copy-database", source, target, "--batch-size", "2"], environment: environment, log: log)
        let deadline = Date().addingTimeInterval(60)
        var waiting = false
        while !waiting, copy.isRunning, Date() < deadline {
            waiting = try await holder.withConnection { connection in
                try !connection.execute(
                    "SELECT 1 AS waiting FROM pg_locks WHERE NOT granted AND relation = 'subscriptions'::regclass", []
                ).isEmpty
            }
            if !waiting { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(waiting, "the copy never waited on the target: \((try? String(contentsOfFile: log)) ?? "")")
        return copy
    }

    static func count(_ query: String, database: String) async throws -> [String] {
        try await SeveralAppsTests.strings(
            query, backend: database.hasPrefix("postgres") ? "postgres" : "sqlite", database: database)
    }

    @Test(
        """
        migrate, analytics --refresh-daily, backfill and deliver on the source while copy-database copies it \
        exit 75 naming the copy and write nothing; check still answers; after the copy they go through
        """,
        arguments: ["sqlite", "postgres"])
    func everyWriterIsRefusedDuringACopy(sourceKind: String) async throws {
        try await CopyDatabaseTests.withSetup { directory, _, environment in
            let source = try await StoreKit2ImportTests.database(sourceKind, directory: directory, name: "source")
            defer { source.drop() }
            let target = try await CopyDatabaseWritersTests.separateDatabase()
            defer { target.drop() }
            try await CopyDatabaseTests.populate(source.url, directory: directory, environment: environment)
            #expect(try await CLI.run(["migrate", "--database", target.url]).status == 0)
            let days = "SELECT CAST(COUNT(*) AS TEXT) AS value FROM analytics_daily"
            let runs = "SELECT CAST(COUNT(*) AS TEXT) AS value FROM runs"
            let daysBefore = try await Self.count(days, database: source.url)
            let runsBefore = try await Self.count(runs, database: source.url)

            let holder = try PostgresDatabase(url: target.url)
            let copy = try await Self.startHeldCopy(
                source: source.url, target: target.url, holder: holder, directory: directory,
                environment: environment)
            let window = ["--since", "2020-01-01", "--until", "2030-01-01"]
            let writers: [[String]] = [
                ["migrate"],
                ["analytics", "--refresh-daily"] + window,
                ["backfill", "--all", "--max-attempts", "1", "--webhook-seconds", "0"],
                ["deliver", "--max-age-hours", "1"],
            ]
            for writer in writers {
                let result = try await CLI.run(writer + ["--database", source.url], environment: environment)
                #expect(result.status == 75, "\(writer[0]): \(result.status) \(result.stdout)\n\(result.stderr)")
                #expect(result.stderr.contains("copy-database is copying"), "\(writer[0]): \(result.stderr)")
            }
            var checkEnvironment = environment
            checkEnvironment["RENEWAL_WEBHOOK_URL"] = nil
            checkEnvironment["RENEWAL_WEBHOOK_SECRET_FILE"] = nil
            let check = try await CLI.run(["check", "--database", source.url], environment: checkEnvironment)
            #expect(check.status == 0, "check writes nothing here and answers: \(check.stdout)\n\(check.stderr)")
            #expect(try await Self.count(days, database: source.url) == daysBefore, "no daily series written")
            #expect(try await Self.count(runs, database: source.url) == runsBefore, "no backfill run recorded")

            try await holder.withConnection { try $0.rollbackTransaction() }
            let reason = await PostgresKillTests.waitForExit(copy)
            #expect(reason == .exit && copy.terminationStatus == 0)

            // The copy has ended: the same commands go through.
            #expect(try await CLI.run(["migrate", "--database", source.url]).status == 0)
            let refreshed = try await CLI.run(
                ["analytics", "--refresh-daily", "--database", source.url] + window, environment: environment)
            #expect(refreshed.status == 0, "\(refreshed.stderr)")
        }
    }
}
