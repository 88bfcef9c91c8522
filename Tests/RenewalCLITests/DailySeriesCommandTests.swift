import Foundation
import Testing

/// `renewal analytics --refresh-daily` from the analytics summaries (issue 45): once they are built it reads
/// no ledger, and the daily series and cohort table it writes are those the ledger pass (`--recompute`)
/// writes, row for row, on both databases.
@Suite("renewal analytics --refresh-daily from the summaries equals the ledger pass")
struct DailySeriesCommandTests {
    /// The daily series and the cohort table as text, without when they were computed.
    static func series(_ backend: String, _ database: String) async throws -> (days: String, cohorts: String) {
        let days = """
            SELECT day, bundle_id, product_id, environment, currency, converted, active_subscriptions, active_trials,
                new_subscriptions, new_trials, trial_conversions, churned, reactivations, mrr_cents, revenue_cents,
                refunds_cents, new_mrr_cents, expansion_mrr_cents, contraction_mrr_cents, churned_mrr_cents,
                reactivation_mrr_cents
            FROM analytics_daily ORDER BY day, bundle_id, product_id, environment, currency
            """
        let cohorts = """
            SELECT cohort_month, bundle_id, period, subscriptions, observed, retained FROM analytics_cohorts
            ORDER BY cohort_month, bundle_id, period
            """
        guard backend == "postgres" else {
            return (try SQLiteShell.query(database, days), try SQLiteShell.query(database, cohorts))
        }
        let psql = try #require(PostgresKillTests.psqlPath)
        return (
            try await PostgresKillTests.sqlOffPool(days, url: database, psql: psql),
            try await PostgresKillTests.sqlOffPool(cohorts, url: database, psql: psql)
        )
    }

    @Test(
        """
        after --rebuild, --refresh-daily of 45 days ending at a midnight says it read the summaries, and the \
        rows and the cohort table equal those --refresh-daily --recompute writes from the ledger
        """, arguments: AnalyticsSummaryCommandTests.backends)
    func summariesEqualLedgerPass(backend: String) async throws {
        try await AnalyticsSummaryCommandTests.withDatabase(backend) { database, sql in
            // The generator's dates are fixed around 2025-12-01; moved by whole days to lie around today, so
            // the cohort table of the last twelve months (as of today, where the summaries' refresh ends) has
            // cohorts whatever day the test runs.
            let today = (Date().timeIntervalSince1970 / 86_400).rounded(.down)
            let shift = Int64(today - 1_764_547_200 / 86_400) * 86_400_000
            try sql(
                """
                UPDATE transactions SET purchased_at = purchased_at + \(shift), expires_at = expires_at + \(shift),
                    revoked_at = revoked_at + \(shift)
                """)
            #expect(try await CLI.run(["analytics", "--rebuild", "--database", database]).status == 0)
            // Ending tomorrow at midnight (the generator's purchases run past today), so both passes end together.
            let tomorrow = Date(timeIntervalSince1970: (today + 1) * 86_400)
            let window = [
                "--since",
                String(ISO8601DateFormatter().string(from: tomorrow.addingTimeInterval(-45 * 86_400)).prefix(10)),
                "--until", String(ISO8601DateFormatter().string(from: tomorrow).prefix(10)), "--database", database,
            ]
            let fromSummaries = try await CLI.run(["analytics", "--refresh-daily", "--json"] + window)
            #expect(fromSummaries.status == 0, "\(fromSummaries.stderr)")
            let answer = try AnalyticsSummaryCommandTests.object(fromSummaries.stdout)
            #expect(answer["source"] as? String == "summaries" && answer["subscriptions"] as? Int == 0, "\(answer)")
            let kept = try await Self.series(backend, database)

            let recomputed = try await CLI.run(["analytics", "--refresh-daily", "--json", "--recompute"] + window)
            #expect(recomputed.status == 0, "\(recomputed.stderr)")
            let ledger = try AnalyticsSummaryCommandTests.object(recomputed.stdout)
            #expect(ledger["source"] as? String == "ledger", "\(ledger)")
            let reference = try await Self.series(backend, database)
            #expect(reference.days.split(separator: "\n").count > 100, "a real series: \(reference.days.prefix(300))")
            #expect(kept.days == reference.days)
            #expect(
                !reference.cohorts.isEmpty && kept.cohorts == reference.cohorts,
                "\(kept.cohorts)\n---\n\(reference.cohorts)")
        }
    }

    @Test(
        """
        --check-summaries holds the stored daily series against the ledger: equal after a refresh, a day         changed behind the job's back is named and exits 3, and --refresh-daily puts it right
        """, arguments: AnalyticsSummaryCommandTests.backends)
    func checkNamesAStaleDay(backend: String) async throws {
        try await AnalyticsSummaryCommandTests.withDatabase(backend) { database, sql in
            #expect(try await CLI.run(["analytics", "--rebuild", "--database", database]).status == 0)
            let window = ["--since", "2025-11-01", "--until", "2025-12-01", "--database", database]
            #expect(try await CLI.run(["analytics", "--refresh-daily"] + window).status == 0)
            func check() async throws -> (status: Int32, json: [String: Any]) {
                let run = try await CLI.run(["analytics", "--check-summaries", "--json"] + window)
                return (run.status, try AnalyticsSummaryCommandTests.object(run.stdout))
            }
            let equal = try await check()
            #expect(equal.status == 0 && equal.json["daily_equal"] as? Bool == true, "\(equal.json)")

            try sql("UPDATE analytics_daily SET mrr_cents = mrr_cents + 1 WHERE day = '2025-11-17'")
            let stale = try await check()
            #expect(stale.status == 3, "\(stale.json)")
            #expect(stale.json["daily_equal"] as? Bool == false && stale.json["equal"] as? Bool == true)
            #expect(stale.json["daily_differing"] as? [String] == ["2025-11-17"], "\(stale.json)")

            #expect(try await CLI.run(["analytics", "--refresh-daily"] + window).status == 0)
            let mended = try await check()
            #expect(mended.status == 0 && mended.json["daily_equal"] as? Bool == true, "\(mended.json)")
        }
    }
}
