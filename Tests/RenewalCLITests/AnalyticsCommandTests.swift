import Foundation
import Testing

/// `renewal analytics` as an operator runs it: a real SQLite file, the catalogue and rates files, JSON and
/// the table, and what a bad file or window says.
@Suite("renewal analytics: the JSON contract, the table, the catalogue and rates files, and their errors")
struct AnalyticsCommandTests {
    /// Two Production subscribers and one sandbox tester, hand-countable: ana pays 9.99 USD a month and
    /// renewed inside the window; ben paid 8.99 EUR, then was refunded half; cai, a verifyReceipt row
    /// without a price, is priced from the catalogue; the sandbox tester is apart.
    static let ledger = """
        INSERT INTO transactions (transaction_id, original_transaction_id, user_id, bundle_id, product_id, environment,
            ownership_type, purchased_at, expires_at, price_milliunits, currency, is_trial, quantity, revoked_at,
            revocation_type, revocation_percentage, transaction_reason, upgraded, origin, recorded_at, updated_at)
        VALUES
        ('a1', 'a', 'ana', 'com.example.app', 'pro.monthly', 'Production', 'PURCHASED', 1761955200000, 1764547200000,
            9990, 'USD', 0, 1, NULL, NULL, NULL, 'PURCHASE', 0, 'status_answer', 0, 0),
        ('a2', 'a', 'ana', 'com.example.app', 'pro.monthly', 'Production', 'PURCHASED', 1764547200000, 1767225600000,
            9990, 'USD', 0, 1, NULL, NULL, NULL, 'RENEWAL', 0, 'status_answer', 0, 0),
        ('b1', 'b', 'ben', 'com.example.app', 'pro.monthly', 'Production', 'PURCHASED', 1764633600000, 1767312000000,
            8990, 'EUR', 0, 1, 1764720000000, 'REFUND_PRORATED', 50000, 'PURCHASE', 0, 'status_answer', 0, 0),
        ('c1', 'c', 'cai', 'com.example.app', 'pro.yearly', 'Production', 'PURCHASED', 1764633600000, 1796169600000,
            NULL, NULL, 0, 1, NULL, NULL, NULL, NULL, 0, 'verify_receipt', 0, 0),
        ('s1', 's', 'sam', 'com.example.app', 'pro.monthly', 'Sandbox', 'PURCHASED', 1764633600000, 1767312000000,
            9990, 'USD', 0, 1, NULL, NULL, NULL, 'PURCHASE', 0, 'status_answer', 0, 0);
        """

    /// A JSON number as cents ("4.94"): JSONSerialization reads numbers as doubles.
    static func cents(_ value: Any?) -> String? {
        (value as? NSNumber).map { String(format: "%.2f", $0.doubleValue) }
    }

    static func database(in directory: String) async throws -> String {
        let database = directory + "/renewal.sqlite"
        let migrate = try await CLI.run(["migrate", "--database", database])
        #expect(migrate.status == 0, "\(migrate.stderr)")
        _ = try SQLiteShell.query(database, ledger)
        return database
    }

    @Test(
        """
        --json gives the documented keys; MRR at --until, revenue by purchase time, a prorated refund by its \
        share, EUR at the file's rate, a verifyReceipt row at the catalogue's price; sandbox apart; the table \
        says the same
        """)
    func jsonAndTable() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await Self.database(in: directory)
        try
            #"{"products": [{"product_id": "pro.monthly", "period": "P1M"}, {"product_id": "pro.yearly", "period": "P1Y", "prices": {"USD": "99.99"}}]}"#
            .write(toFile: directory + "/catalogue.json", atomically: true, encoding: .utf8)
        try #"{"currency": "USD", "rates": {"EUR": "1.10"}}"#
            .write(toFile: directory + "/rates.json", atomically: true, encoding: .utf8)
        // The window is December 2025: ana's renewal (Dec 1) and ben's and cai's purchases (Dec 2) are in it.
        let arguments = [
            "analytics", "--database", database, "--since", "2025-12-01", "--until", "2025-12-15",
            "--catalogue", directory + "/catalogue.json",
        ]
        let result = try await CLI.run(
            arguments + ["--json"], environment: ["RENEWAL_RATES_FILE": directory + "/rates.json"])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        for key in [
            "since", "until", "currency", "active_subscriptions", "active_trials", "mrr", "new_subscriptions",
            "new_trials", "trial_conversions", "churned", "revenue", "refunds", "net_revenue", "unconverted",
            "by_product", "cohorts",
        ] {
            #expect(object[key] != nil, "no \(key) in \(result.stdout)")
        }
        #expect(object["since"] as? String == "2025-12-01T00:00:00Z")
        #expect(object["currency"] as? String == "USD")
        // ana and cai are active on Dec 15; ben's refund revoked him.
        #expect(object["active_subscriptions"] as? Int == 2, "\(result.stdout)")
        // MRR: ana 9.99 + cai 99.99 / 12 = 8.3325.
        #expect(Self.cents(object["mrr"]) == "18.32", "\(result.stdout)")
        // Revenue: ana's renewal 9.99 + ben's 8.99 EUR × 1.10 = 9.889 + cai's 99.99.
        #expect(Self.cents(object["revenue"]) == "119.87", "\(result.stdout)")
        // Refunds: half of ben's 8.99 EUR × 1.10.
        #expect(Self.cents(object["refunds"]) == "4.94", "\(result.stdout)")
        #expect(object["new_subscriptions"] as? Int == 2, "ben and cai; ana started in November")
        let products = try #require(object["by_product"] as? [[String: Any]])
        #expect(products.compactMap { $0["product_id"] as? String } == ["pro.monthly", "pro.yearly"])

        // Cohorts: ana's (November) renewed after her first period; December's have no period ended yet.
        let cohorts = try #require(object["cohorts"] as? [[String: Any]])
        #expect(cohorts.compactMap { $0["month"] as? String } == ["2025-11", "2025-12"], "\(cohorts)")
        #expect(
            (cohorts.first?["retained"] as? [Int])?.first == 1 && (cohorts.first?["observed"] as? [Int])?.first == 1)
        #expect(
            cohorts.last?["subscriptions"] as? Int == 2
                && (cohorts.last?["observed"] as? [Int])?.allSatisfy { $0 == 0 } == true)

        let table = try await CLI.run(arguments, environment: ["RENEWAL_RATES_FILE": directory + "/rates.json"])
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("amounts in USD"), "\(table.stdout)")
        let total = try #require(table.stdout.split(separator: "\n").first { $0.hasPrefix("all products") })
        #expect(total.contains("18.32") && total.contains("119.87") && total.contains("4.94"), "\(total)")
        #expect(
            table.stdout.contains("Retention by cohort") && table.stdout.contains("2025-11  1      100%"),
            "\(table.stdout)")

        // Without a rate for EUR, ben's amounts are reported apart, never converted at 1.
        let unrated = try await CLI.run(arguments + ["--json"])
        let apart = try #require(try JSONSerialization.jsonObject(with: Data(unrated.stdout.utf8)) as? [String: Any])
        let unconverted = try #require(apart["unconverted"] as? [String: [String: Any]])
        #expect(Self.cents(unconverted["EUR"]?["revenue"]) == "8.99", "\(unrated.stdout)")
        #expect(Self.cents(apart["revenue"]) == "109.98", "\(unrated.stdout)")
    }

    @Test("A bad catalogue, rates file or window is refused with exit 78, naming the file, the entry and the fix")
    func badInput() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await Self.database(in: directory)
        let cases: [(file: String, text: String, flag: String, says: String)] = [
            (
                "catalogue.json", #"{"products": [{"product_id": "pro.monthly", "period": "P5D"}]}"#, "--catalogue",
                "entry 1 (pro.monthly) has period P5D"
            ),
            (
                "catalogue.json", #"{"products": [{"product_id": "pro.monthly", "prices": {"usd": "9.99"}}]}"#,
                "--catalogue", "three-letter ISO 4217 code"
            ),
            ("rates.json", #"{"rates": {"EUR": 1.1}}"#, "--rates", "names no reporting currency"),
            ("rates.json", "not json", "--rates", "is not a JSON object"),
            // A misspelt key is refused rather than ignored, in either file and in a catalogue entry.
            ("rates.json", #"{"currency": "USD", "ratez": {"EUR": "1.08"}}"#, "--rates", #"unknown key "ratez""#),
            ("catalogue.json", #"{"product": []}"#, "--catalogue", #"unknown key "product""#),
            (
                "catalogue.json", #"{"products": [{"product_id": "pro.monthly", "price": {"USD": "9.99"}}]}"#,
                "--catalogue", #"entry 1 (pro.monthly) has the unknown key "price""#
            ),
            // A reporting currency that is not a code is named as such, not as missing.
            (
                "rates.json", #"{"currency": "euro", "rates": {}}"#, "--rates",
                #""currency": euro, which is not an ISO 4217"#
            ),
            ("rates.json", #"{"currency": "USD", "rates": {"usd": "1"}}"#, "--rates", "three-letter ISO 4217 code"),
            (
                "rates.json", #"{"currency": "USD", "rates": {"USD": "1", "EUR": "1.08"}}"#, "--rates",
                "the reporting currency itself, which is 1 by definition"
            ),
        ]
        for item in cases {
            let path = directory + "/" + item.file
            try item.text.write(toFile: path, atomically: true, encoding: .utf8)
            let result = try await CLI.run(["analytics", "--database", database, item.flag, path])
            #expect(result.status == 78, "\(item.text): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains(path) && result.stderr.contains(item.says), "\(result.stderr)")
            #expect(!item.says.contains("ISO 4217 code") || !result.stderr.contains("names no reporting currency"))
        }
        // A window that ends before it starts is a usage error, like a time that does not parse.
        let backwards = try await CLI.run([
            "analytics", "--database", database, "--since", "2025-12-15", "--until", "2025-12-01",
        ])
        #expect(backwards.status == 64 && backwards.stderr.contains("is not before --until"), "\(backwards.stderr)")
        let future = try await CLI.run(["analytics", "--database", database, "--since", "2999-01-01"])
        #expect(future.status == 64 && future.stderr.contains("--until"), "\(future.stderr)")
        let garbled = try await CLI.run(["analytics", "--database", database, "--since", "yesterday"])
        #expect(garbled.status == 64 && garbled.stderr.contains("--since yesterday"), "\(garbled.stderr)")
        let missing = try await CLI.run(["analytics", "--database", database, "--rates", directory + "/none.json"])
        #expect(missing.status == 78 && missing.stderr.contains("cannot be read"), "\(missing.stderr)")
    }

    @Test("--html writes the page readable by its owner only, like every other file the job writes")
    func htmlPageOwnerOnly() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await Self.database(in: directory)
        let html = directory + "/analytics.html"
        let result = try await CLI.run([
            "analytics", "--database", database, "--since", "2025-12-01", "--until", "2025-12-15", "--html", html,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: html)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue & 0o077 == 0, "the page has mode \(String(mode.intValue & 0o777, radix: 8))")
        #expect(try String(contentsOfFile: html, encoding: .utf8).contains("</html>"))
    }

    @Test(
        """
        --html writes one self-contained page: the window's figures as cards (the same as --json), MRR and \
        active subscriptions over time from the daily series, the trial funnel and churn; a browser draws each \
        chart, and a page without the daily series says which command fills it
        """,
        .enabled(if: ObservabilityTools.chromium != nil, "chromium is not installed (Debian package chromium)"))
    func htmlPage() async throws {
        let chromium = try #require(ObservabilityTools.chromium)
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await Self.database(in: directory)
        // dan starts a free trial on Dec 3 and pays from Dec 10; eve's trial from Dec 4 lapses on Dec 11.
        _ = try SQLiteShell.query(
            database,
            """
            INSERT INTO transactions (transaction_id, original_transaction_id, user_id, bundle_id, product_id,
                environment, ownership_type, purchased_at, expires_at, price_milliunits, currency, is_trial, quantity,
                transaction_reason, upgraded, origin, recorded_at, updated_at)
            VALUES
            ('d1', 'd', 'dan', 'com.example.app', 'pro.monthly', 'Production', 'PURCHASED', 1764720000000,
                1765324800000, 0, 'USD', 1, 1, 'PURCHASE', 0, 'status_answer', 0, 0),
            ('d2', 'd', 'dan', 'com.example.app', 'pro.monthly', 'Production', 'PURCHASED', 1765324800000,
                1768003200000, 9990, 'USD', 0, 1, 'RENEWAL', 0, 'status_answer', 0, 0),
            ('e1', 'e', 'eve', 'com.example.app', 'pro.monthly', 'Production', 'PURCHASED', 1764806400000,
                1765411200000, 0, 'USD', 1, 1, 'PURCHASE', 0, 'status_answer', 0, 0);
            """)
        try
            #"{"products": [{"product_id": "pro.monthly", "period": "P1M"}, {"product_id": "pro.yearly", "period": "P1Y", "prices": {"USD": "99.99"}}]}"#
            .write(toFile: directory + "/catalogue.json", atomically: true, encoding: .utf8)
        let window = [
            "analytics", "--database", database, "--since", "2025-12-01", "--until", "2025-12-15",
            "--catalogue", directory + "/catalogue.json",
        ]
        let bare = try await CLI.run(window + ["--html", directory + "/bare.html"])
        #expect(bare.status == 0, "\(bare.stderr)")
        let barePage = try String(contentsOfFile: directory + "/bare.html", encoding: .utf8)
        #expect(
            barePage.contains("renewal analytics --refresh-daily --since 2025-12-01 --until 2025-12-15"),
            "the page names the command that fills the daily series")

        #expect(try await CLI.run(window + ["--refresh-daily"]).status == 0)
        let html = directory + "/analytics.html"
        let result = try await CLI.run(window + ["--html", html, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(!page.contains("src=\"http") && !page.contains("href=\"http") && !page.contains("<link"))
        #expect(!page.contains("--refresh-daily"), "every day of the window is in the daily series")
        // The cards say what --json says.
        func card(_ name: String) -> String? {
            (try? Regex(#"data-figure="\#(name)"><span>[^<]*</span><strong>([^<]*)</strong>"#))
                .flatMap { page.firstMatch(of: $0) }.flatMap { $0.output[1].substring.map(String.init) }
        }
        #expect(card("mrr") == Self.cents(object["mrr"]).map { $0 + " USD" }, "\(card("mrr") ?? "no MRR card")")
        #expect(card("active_subscriptions") == "\(object["active_subscriptions"] as? Int ?? -1)")
        let funnel = try #require(object["trial_funnel"] as? [String: Int], "\(result.stdout)")
        #expect(funnel == ["started": 2, "converted": 1, "in_trial": 0, "lapsed": 1], "\(funnel)")
        #expect(card("trial_conversions") == "1")
        // The MRR movement cards say what mrr_movement says.
        let movement = try #require(object["mrr_movement"] as? [String: Any])
        for bucket in ["new", "expansion", "contraction", "churned", "reactivation", "net"] {
            #expect(card("mrr_movement.\(bucket)") == Self.cents(movement[bucket]), "\(bucket)")
        }
        // One row per day of the window, from the daily series: dan is paid from Dec 10, so the active
        // subscriptions at the end of Dec 8 and Dec 9 (midnight, when his first paid period begins) differ by one.
        let days = page.matches(of: try Regex(#"<tr data-day="(\d{4}-\d{2}-\d{2})">"#))
        #expect(days.count == 14, "\(days.count) day rows")
        let active = try Regex(#"<tr data-day="2025-12-(08|09)"><td>[^<]*</td><td class="n">(\d+)</td>"#)
        let counts = page.matches(of: active).compactMap { $0.output[2].substring.flatMap { Int($0) } }
        #expect(counts.count == 2 && counts[1] == counts[0] + 1, "\(counts)")

        let charts = try #require(
            try await ReportFormatTests.pageAttribute("data-charts", of: html, chromium: chromium, window: "1200,2400")
                as? [[String: Any]])
        #expect(
            charts.compactMap { $0["id"] as? String } == [
                "mrr-over-time", "active-over-time", "trial-funnel", "churn-over-time", "mrr-movement",
            ], "\(charts)")
        for chart in charts {
            #expect((chart["marks"] as? Int ?? 0) > 0 && (chart["width"] as? Int ?? 0) > 300, "\(chart)")
        }
        print("figures[analytics html]: \(page.utf8.count) bytes, charts \(charts)")
    }
}
