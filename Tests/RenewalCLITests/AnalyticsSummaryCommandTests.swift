import Foundation
import Testing
import RenewalCore

/// `renewal analytics --rebuild` and `--check-summaries` on both databases (issue 45): the summaries built
/// from the project's own ledger generator answer random UTC-day windows with exactly the recomputation's
/// figures; a write to the ledger behind the job's back is found by --check-summaries and put right by the
/// next --rebuild.
@Suite(
    "renewal analytics summaries: --rebuild, --check-summaries equal to the recomputation and finding a write behind the job's back"
)
struct AnalyticsSummaryCommandTests {
    /// Subscriptions generated: every window recomputes them, so small enough for seconds per database.
    static let subscriptions = 1500

    /// The benchmark generator at `subscriptions` (its 199999 replaced by N - 1, as its header says).
    static func generator(_ backend: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Benchmarks/analytics/ledger.\(backend).sql")
        // Without its comment lines: sqlite3 would read a leading "--" as an option.
        return try String(contentsOf: root, encoding: .utf8).split(separator: "\n")
            .filter { !$0.hasPrefix("--") }.joined(separator: "\n")
            .replacingOccurrences(of: "199999", with: "\(subscriptions - 1)")
    }

    /// A migrated database of `backend` holding the generated ledger, and a way to run SQL on it.
    static func withDatabase(
        _ backend: String, _ body: (_ database: String, _ sql: (String) throws -> Void) async throws -> Void
    ) async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        if backend == "sqlite" {
            let database = directory + "/renewal.sqlite"
            #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            _ = try SQLiteShell.query(database, try generator("sqlite"))
            try await body(database) { _ = try SQLiteShell.query(database, $0) }
            return
        }
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath, "psql is needed to create the test schema")
        let schema = "renewal_summary_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await PostgresKillTests.sqlOffPool("CREATE SCHEMA \(schema)", url: base, psql: psql)
        defer { _ = try? PostgresKillTests.sql("DROP SCHEMA \(schema) CASCADE", url: base, psql: psql) }
        let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        #expect(try await CLI.run(["migrate", "--database", url]).status == 0)
        try PostgresKillTests.sql(try generator("postgres"), url: url, psql: psql)
        try await body(url) { try PostgresKillTests.sql($0, url: url, psql: psql) }
    }

    static func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    static var backends: [String] { PostgresKillEnvironment.baseURL == nil ? ["sqlite"] : ["sqlite", "postgres"] }

    @Test(
        """
        after --rebuild, random windows of 1 to 90 UTC days from the summaries equal the recomputation, figure \
        by figure and product by product, and --json from them is --json --recompute byte for byte; a write to the ledger behind the job's back makes --check-summaries \
        exit 3 until the next --rebuild
        """, arguments: backends)
    func summariesEqualRecomputation(backend: String) async throws {
        try await Self.withDatabase(backend) { database, sql in
            let rebuilt = try await CLI.run(["analytics", "--rebuild", "--json", "--database", database])
            #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
            let built = try Self.object(rebuilt.stdout)
            #expect(built["subscriptions"] as? Int == Self.subscriptions, "\(built)")
            #expect((built["rows"] as? Int ?? 0) > 0, "\(built)")

            // The generator's purchases span 2024-10-27 to 2026-12: windows anywhere in it, on midnights.
            var random = SystemRandomNumberGenerator()
            let first = 1_730_419_200.0  // 2024-11-01
            var checked = 0
            for _ in 0..<10 {
                let start = first + Double(Int.random(in: 0..<700, using: &random)) * 86_400
                let end = start + Double(Int.random(in: 1...90, using: &random)) * 86_400
                let since = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: start))
                let until = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: end))
                let result = try await CLI.run([
                    "analytics", "--check-summaries", "--json", "--since", since, "--until", until, "--database",
                    database,
                ])
                let check = try Self.object(result.stdout)
                #expect(result.status == 0 && check["equal"] as? Bool == true, "\(since) to \(until): \(check)")
                #expect(check["summaries"] as? String == "current", "\(check)")
                // The whole --json object (movement, cohort tables, ARPU too) from the summaries is the
                // recomputation's, byte for byte.
                let window = ["--since", since, "--until", until, "--database", database]
                let answered = try await CLI.run(["analytics", "--json"] + window)
                let recomputed = try await CLI.run(["analytics", "--json", "--recompute"] + window)
                #expect(answered.status == 0 && recomputed.status == 0, "\(answered.stderr)\(recomputed.stderr)")
                #expect(answered.stdout == recomputed.stdout, "\(since) to \(until)")
                checked += 1
            }
            #expect(checked == 10)

            // A write behind the job's back is not kept: --check-summaries is the check that finds it (exit 3,
            // naming what differs), and --rebuild puts it right.
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            try sql(
                "UPDATE transactions SET revoked_at = purchased_at + 3600000, updated_at = \(now) WHERE transaction_id = 'tx-5-0'"
            )
            // tx-5-0 was bought at 2024-11-01T00:00Z: its refund an hour later falls on that day.
            let window = ["--since", "2024-11-01", "--until", "2024-11-02", "--database", database]
            let behind = try await CLI.run(["analytics", "--check-summaries", "--json"] + window)
            let stale = try Self.object(behind.stdout)
            #expect(behind.status == 3, "\(stale)")
            #expect(stale["summaries"] as? String == "current" && stale["equal"] as? Bool == false, "\(stale)")
            #expect((stale["differing"] as? [String])?.contains("total") == true, "\(stale)")
            // --json answers from the summaries (so it misses the write), --recompute reads the ledger.
            let summaryJSON = try await CLI.run(["analytics", "--json"] + window).stdout
            let ledgerJSON = try await CLI.run(["analytics", "--json", "--recompute"] + window).stdout
            #expect(summaryJSON != ledgerJSON)

            #expect(try await CLI.run(["analytics", "--rebuild", "--database", database]).status == 0)
            let again = try Self.object(
                try await CLI.run(["analytics", "--check-summaries", "--json"] + window).stdout)
            #expect(again["summaries"] as? String == "current" && again["equal"] as? Bool == true, "\(again)")
            #expect(
                try await CLI.run(["analytics", "--json"] + window).stdout
                    == (try await CLI.run(["analytics", "--json", "--recompute"] + window).stdout))
        }
    }

    @Test("no --rebuild yet: the window is recomputed and says why")
    func unusableSaysWhy() async throws {
        try await Self.withDatabase("sqlite") { database, _ in
            let none = try Self.object(
                try await CLI.run([
                    "analytics", "--check-summaries", "--json", "--since", "2025-11-01", "--until", "2025-12-01",
                    "--database", database,
                ]).stdout)
            #expect(
                (none["unusable_reason"] as? String)?.contains("run renewal analytics --rebuild") == true, "\(none)")
        }
    }

    @Test(
        """
        over the generator's ledger (every date on a midnight) windows with bounds inside days correct no \
        subscription, and --json is --json --recompute byte for byte
        """, arguments: backends)
    func midnightLedgerNeedsNoCorrection(backend: String) async throws {
        try await Self.withDatabase(backend) { database, _ in
            #expect(try await CLI.run(["analytics", "--rebuild", "--database", database]).status == 0)
            // An hour inside a day, a day and a half, 28 days noon to 06:30, 90 days.
            let windows = [
                ("2025-03-14T10:00:00Z", "2025-03-14T11:00:00.500Z"), ("2025-06-01T07:30:00Z", "2025-06-02T19:00:00Z"),
                ("2025-01-03T12:00:00Z", "2025-01-31T06:30:00Z"),
                ("2024-12-02T00:00:00.001Z", "2025-03-01T23:59:59.999Z"),
            ]
            for (since, until) in windows {
                let window = ["--since", since, "--until", until, "--database", database]
                let check = try Self.object(
                    try await CLI.run(["analytics", "--check-summaries", "--json"] + window).stdout)
                #expect(check["summaries"] as? String == "current" && check["equal"] as? Bool == true, "\(check)")
                #expect(check["corrected_subscriptions"] as? Int == 0, "\(since) to \(until): \(check)")
                let answered = try await CLI.run(["analytics", "--json"] + window)
                let recomputed = try await CLI.run(["analytics", "--json", "--recompute"] + window)
                #expect(answered.status == 0 && answered.stdout == recomputed.stdout, "\(since) to \(until)")
            }
        }
    }

    /// Moves the purchase and expiry of the subscriptions whose id ends in an odd digit off midnight, by
    /// 997 s times the id's last two digits (the generator dates everything on midnights).
    static func spreadOverTheDay(_ backend: String, _ sql: (String) throws -> Void) throws {
        let digits =
            backend == "sqlite"
            ? "CAST(substr(original_transaction_id, -2) AS INTEGER)"
            : "CAST(right(original_transaction_id, 2) AS INTEGER)"
        try sql(
            """
            UPDATE transactions SET purchased_at = purchased_at + \(digits) * 997000, \
            expires_at = expires_at + \(digits) * 997000 WHERE \(digits) % 2 = 1
            """)
    }

    @Test(
        """
        windows off UTC midnights (random milliseconds, an hour to 90 days, the default last 28 days) are \
        answered from the summaries, corrected by the subscriptions dated in their part-days: --json is \
        --json --recompute byte for byte
        """, arguments: backends)
    func windowsOffMidnights(backend: String) async throws {
        try await Self.withDatabase(backend) { database, sql in
            try Self.spreadOverTheDay(backend, sql)
            #expect(try await CLI.run(["analytics", "--rebuild", "--database", database]).status == 0)
            var random = SystemRandomNumberGenerator()
            let first = 1_730_419_200.0  // 2024-11-01
            var corrected = 0
            for round in 0..<8 {
                let end =
                    first + Double(Int.random(in: 1..<700, using: &random)) * 86_400
                    + Double(Int.random(in: 0..<86_400_000, using: &random)) / 1000
                let length =
                    round % 2 == 0
                    ? Double(Int.random(in: 3_600...172_800, using: &random))
                    : Double(Int.random(in: 1...90, using: &random)) * 86_400
                        + Double(Int.random(in: 0..<86_400_000, using: &random)) / 1000
                let since = Timestamp.string(Date(timeIntervalSince1970: end - length))
                let until = Timestamp.string(Date(timeIntervalSince1970: end))
                let window = ["--since", since, "--until", until, "--database", database]
                let check = try Self.object(
                    try await CLI.run(["analytics", "--check-summaries", "--json"] + window).stdout)
                #expect(check["summaries"] as? String == "current" && check["equal"] as? Bool == true, "\(check)")
                corrected += check["corrected_subscriptions"] as? Int ?? 0
                let answered = try await CLI.run(["analytics", "--json"] + window)
                let recomputed = try await CLI.run(["analytics", "--json", "--recompute"] + window)
                #expect(answered.status == 0 && recomputed.status == 0, "\(answered.stderr)\(recomputed.stderr)")
                #expect(answered.stdout == recomputed.stdout, "\(since) to \(until)")
            }
            #expect(corrected > 0)
            // The default window, the last 28 days to now: one process, one now.
            let recent = try Self.object(
                try await CLI.run(["analytics", "--check-summaries", "--json", "--database", database]).stdout)
            #expect(recent["summaries"] as? String == "current" && recent["equal"] as? Bool == true, "\(recent)")
        }
    }
}
