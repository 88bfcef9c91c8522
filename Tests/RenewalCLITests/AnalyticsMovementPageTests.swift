import Foundation
import Testing

/// `renewal analytics --html`'s per-day MRR movement chart, drawn from the daily series (schema 28's
/// columns of `analytics_daily_series`), under the window's movement cards.
@Suite("renewal analytics --html: MRR movement each day from the daily series")
struct AnalyticsMovementPageTests {
    /// The `<title>` texts of the chart `id`'s bars and net dots, e.g. `2025-12-01 new: 18.22`.
    static func titles(in page: String, chart id: String) throws -> [String] {
        let start = try #require(page.range(of: "<svg class=\"chart\" id=\"\(id)\""), "no \(id) chart")
        let end = try #require(page.range(of: "</svg>", range: start.upperBound..<page.endIndex))
        let svg = page[start.upperBound..<end.lowerBound]
        return svg.matches(of: /<title>(\d{4}-\d{2}-\d{2} [^<]*)<\/title>/).map { String($0.output.1) }
    }

    @Test(
        """
        ben (8.99 EUR at 1.10) and cai (99.99 USD a year, from the catalogue) are paid from the end of Dec 1, \
        ben's refund ends his on Dec 3: the chart draws each day's buckets and net as the view holds them, in \
        a real browser; with the series' movement cleared, the chart shows none
        """,
        .enabled(if: ObservabilityTools.chromium != nil, "chromium is not installed (Debian package chromium)"))
    func movementChartFromTheDailySeries() async throws {
        let chromium = try #require(ObservabilityTools.chromium)
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await AnalyticsCommandTests.database(in: directory)
        try
            #"{"products": [{"product_id": "pro.monthly", "period": "P1M"}, {"product_id": "pro.yearly", "period": "P1Y", "prices": {"USD": "99.99"}}]}"#
            .write(toFile: directory + "/catalogue.json", atomically: true, encoding: .utf8)
        try #"{"currency": "USD", "rates": {"EUR": "1.10"}}"#
            .write(toFile: directory + "/rates.json", atomically: true, encoding: .utf8)
        let window = [
            "analytics", "--database", database, "--since", "2025-12-01", "--until", "2025-12-15",
            "--catalogue", directory + "/catalogue.json", "--rates", directory + "/rates.json",
        ]
        let refresh = try await CLI.run(window + ["--refresh-daily"])
        #expect(refresh.status == 0, "\(refresh.stderr)")
        let html = directory + "/analytics.html"
        let result = try await CLI.run(window + ["--html", html])
        #expect(result.status == 0, "\(result.stderr)")
        let page = try String(contentsOfFile: html, encoding: .utf8)

        // The view, summed per day, as the chart must draw it.
        let view = try SQLiteShell.query(
            database,
            """
            SELECT day, printf('%.2f', SUM(new_mrr)), printf('%.2f', SUM(churned_mrr)), printf('%.2f', SUM(net_new_mrr))
            FROM analytics_daily_series WHERE environment = 'Production' AND (new_mrr <> 0 OR churned_mrr <> 0)
            GROUP BY day ORDER BY day
            """)
        // Dec 1: ben 8.99 EUR × 1.10 = 9.89 and cai 99.99 ÷ 12 = 8.33 (two products, each rounded); Dec 2: ben
        // refunded at midnight, the end of the day.
        #expect(view == "2025-12-01|18.22|0.00|18.22\n2025-12-02|0.00|-9.89|-9.89", "\(view)")
        let titles = try Self.titles(in: page, chart: "mrr-movement")
        for expected in [
            "2025-12-01 new: 18.22", "2025-12-01 net: 18.22", "2025-12-02 churned: -9.89",
            "2025-12-02 net: -9.89", "2025-12-03 net: 0.00",
        ] {
            #expect(titles.contains(expected), "\(expected) in \(titles)")
        }
        #expect(titles.filter { !$0.contains(" net: ") }.count == 2, "one bar per non-zero bucket and day: \(titles)")
        #expect(page.contains("MRR movement each day"))
        // The day table's last column is the day's net new MRR.
        let net = try Regex(
            #"<tr data-day="(2025-12-0[123])">(?:<td[^>]*>[^<]*</td>){11}<td class="n">([^<]*)</td></tr>"#)
        let nets = page.matches(of: net).map { "\($0.output[1].substring ?? "") \($0.output[2].substring ?? "")" }
        #expect(nets == ["2025-12-01 18.22", "2025-12-02 -9.89", "2025-12-03 0.00"], "\(nets)")
        let charts = try #require(
            try await ReportFormatTests.pageAttribute("data-charts", of: html, chromium: chromium, window: "1200,2400")
                as? [[String: Any]])
        let chart = try #require(charts.first { $0["id"] as? String == "mrr-movement" }, "\(charts)")
        #expect(chart["marks"] as? Int == 3 && (chart["width"] as? Int ?? 0) > 300, "two bars and the net: \(chart)")

        // The chart reads the series, not the ledger: cleared there, it draws no bar (the cards still count).
        _ = try SQLiteShell.query(
            database,
            """
            UPDATE analytics_daily SET new_mrr_cents = 0, expansion_mrr_cents = 0, contraction_mrr_cents = 0,
                churned_mrr_cents = 0, reactivation_mrr_cents = 0
            """)
        #expect(try await CLI.run(window + ["--html", html]).status == 0)
        let cleared = try Self.titles(in: try String(contentsOfFile: html, encoding: .utf8), chart: "mrr-movement")
        #expect(cleared.allSatisfy { $0.hasSuffix(" net: 0.00") } && cleared.count == 14, "\(cleared)")
    }
}
