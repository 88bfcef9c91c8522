import AppStoreSimulator
import Foundation
import Testing

@Suite("renewal report: every format against golden files, and the HTML page in a real browser", .serialized)
struct ReportFormatTests {
    /// `RENEWAL_RECORD_GOLDEN=1 swift test --filter ReportFormatTests` rewrites the golden files.
    static let recording = ProcessInfo.processInfo.environment["RENEWAL_RECORD_GOLDEN"] == "1"
    static let goldenDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Golden"
    ).path

    /// Run ids, times, days and durations differ from run to run; everything else must not. Runs of
    /// spaces collapse to one, because a table's column widths follow the width of its durations
    /// (a loaded CI machine took 10.4 s where a quiet one takes 0.4 s).
    static func normalized(_ text: String) -> String {
        var text = text
        let rules: [(String, String)] = [
            ("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<run-id>"),
            (#"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z"#, "<time>"),
            (#"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC"#, "<minute>"),
            (#"\d{4}-\d{2}-\d{2}"#, "<day>"),
            (#"\d+\.\d s\b"#, "<took>"),
            (" {2,}", " "),
        ]
        for (pattern, replacement) in rules {
            text = text.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return text
    }

    @Test(
        """
        json, jsonl, csv, table and html of a stored run match their golden files; json equals the --report file; \
        --output is atomic
        """
    )
    func formatsMatchGoldenFiles() async throws {
        try await ObservedRun.with { observed in
            let jsonReport = observed.directory + "/run.json"
            let run = try await CLI.run(
                [
                    "run", "--concurrency", "1", "--report", jsonReport, "--report-html",
                    observed.directory + "/run.html",
                ], environment: observed.environment)
            #expect(run.status == 3, "\(run.stderr)")
            #expect(run.stdout.contains("html: \(observed.directory)/run.html"))
            #expect(FileManager.default.fileExists(atPath: observed.directory + "/run.html"))

            for format in ["json", "jsonl", "csv", "table", "html"] {
                let output = observed.directory + "/report.\(format)"
                let result = try await CLI.run(
                    ["report", "--format", format, "--output", output], environment: observed.environment)
                #expect(result.status == 0, "\(format): \(result.stderr)")
                let text = try String(contentsOfFile: output, encoding: .utf8)
                #expect(!FileManager.default.fileExists(atPath: output + ".tmp-\(0)"))
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: observed.directory).filter {
                    $0.contains(".tmp-")
                }
                #expect(leftovers.isEmpty, "temporary files left: \(leftovers)")
                for receipt in observed.receipts { #expect(!text.contains(receipt), "\(format) holds a whole receipt") }
                #expect(!text.contains(ObservedRun.secret))
                let golden = Self.goldenDirectory + "/report.\(format)"
                if Self.recording {
                    try FileManager.default.createDirectory(
                        atPath: Self.goldenDirectory, withIntermediateDirectories: true)
                    try Self.normalized(text).write(toFile: golden, atomically: true, encoding: .utf8)
                } else {
                    let expected = try? String(contentsOfFile: golden, encoding: .utf8)
                    #expect(expected != nil, "no golden file \(golden); record with RENEWAL_RECORD_GOLDEN=1")
                    if let expected, expected != Self.normalized(text) {
                        let ours = Self.normalized(text).split(separator: "\n", omittingEmptySubsequences: false)
                        let theirs = expected.split(separator: "\n", omittingEmptySubsequences: false)
                        let line =
                            zip(ours, theirs).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                            ?? min(ours.count, theirs.count)
                        Issue.record(
                            """
                            report.\(format) differs from its golden file at line \(line + 1): got \
                            \(line < ours.count ? String(ours[line].prefix(200)) : "<end>"), expected \
                            \(line < theirs.count ? String(theirs[line].prefix(200)) : "<end>")
                            """
                        )
                    }
                }
            }

            // The stored run renders as the same object the run wrote.
            let stored =
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: observed.directory + "/report.json"))) as? NSDictionary
            let written =
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: jsonReport)))
                as? NSDictionary
            #expect(stored != nil && stored == written, "report --format json differs from the --report file")

            // Ranges and bad selections.
            let range = try await CLI.run(
                ["report", "--format", "json", "--since", "2000-01-01"], environment: observed.environment)
            #expect(
                (try? JSONSerialization.jsonObject(with: Data(range.stdout.utf8)) as? [Any])?.count == 1,
                "a range is an array of runs")
            let missing = try await CLI.run(["report", "--run", "no-such-run"], environment: observed.environment)
            #expect(missing.status == 64 && missing.stderr.contains("no run with id no-such-run"), "\(missing.stderr)")
            let future = try await CLI.run(["report", "--since", "2099-01-01"], environment: observed.environment)
            #expect(future.status == 64 && future.stderr.contains("widen --since/--until"), "\(future.stderr)")
        }
    }

    @Test(
        "The HTML page opens in headless Chromium with no network, and its three charts render with size and marks",
        .enabled(if: ObservabilityTools.chromium != nil, "chromium is not installed (Debian package chromium)"))
    func htmlRendersInChromium() async throws {
        let chromium = try #require(ObservabilityTools.chromium)
        try await ObservedRun.with { observed in
            let html = observed.directory + "/report.html"
            #expect(try await CLI.run(["run", "--report", html], environment: observed.environment).status == 3)
            let page = try String(contentsOfFile: html, encoding: .utf8)
            // Self-contained: nothing to fetch (the SVG namespace is a name, never loaded).
            let external = page.replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
            for marker in ["http://", "https://", " src=", " href=", "url(", "@import"] {
                #expect(!external.contains(marker), "the page refers to something outside itself: \(marker)")
            }
            // A proxy that refuses everything: any fetch would fail.
            let browser = [
                "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--window-size=1200,2000",
            ]
            let charts = try #require(
                try await Self.pageAttribute("data-charts", of: html, chromium: chromium, window: "1200,2000")
                    as? [[String: Any]])
            #expect(
                charts.compactMap { $0["id"] as? String } == [
                    "changes-by-kind", "entitled-by-product", "failures-by-reason",
                ])
            for chart in charts {
                let width = chart["width"] as? Int ?? 0, height = chart["height"] as? Int ?? 0,
                    marks = chart["marks"] as? Int ?? 0
                #expect(width > 100 && height > 20 && marks > 0, "chart \(chart)")
            }
            let screenshot = observed.directory + "/report.png"
            _ = try await toolOffPool(chromium, browser + ["--screenshot=" + screenshot, "file://" + html])
            let size = (try? FileManager.default.attributesOfItem(atPath: screenshot)[.size] as? Int) ?? 0
            #expect(size > 20_000, "screenshot of \(size) bytes")
            print(
                "figures[html report]: \(page.utf8.count) bytes, charts \(charts.map { "\($0["id"] ?? "?") \($0["width"] ?? 0)x\($0["height"] ?? 0) marks \($0["marks"] ?? 0)" }.joined(separator: ", ")), screenshot \(size) bytes"
            )
        }
    }

    @Test(
        """
        HTML times read as '2026-11-24 01:22 UTC' on one line in Chromium, the exact value in datetime and title; \
        'took' of a range is the total
        """,
        .enabled(if: ObservabilityTools.chromium != nil, "chromium is not installed (Debian package chromium)"))
    func htmlTimesAndTotals() async throws {
        let chromium = try #require(ObservabilityTools.chromium)
        try await ObservedRun.with { observed in
            // Two runs make a range.
            #expect(try await CLI.run(["run"], environment: observed.environment).status == 3)
            observed.state.advance(by: 11 * 86_400)
            let second = try await CLI.run(["run"], environment: observed.environment)
            #expect([0, 3, 4].contains(second.status), "\(second.stderr)")
            let html = observed.directory + "/range.html"
            let rendered = try await CLI.run(
                ["report", "--since", "2000-01-01", "--format", "html", "--output", html],
                environment: observed.environment)
            #expect(rendered.status == 0, "\(rendered.stderr)")
            let page = try String(contentsOfFile: html, encoding: .utf8)

            // Every time: the reader's form shown, the exact instant kept, and both the same minute.
            let times = page.matches(of: /<time datetime="([^"]+)" title="([^"]+)">([^<]*)<\/time>/)
            #expect(times.count > 20, "only \(times.count) times on the page")
            for time in times {
                let exact = String(time.output.1), shown = String(time.output.3)
                #expect(String(time.output.2) == exact)
                #expect(shown.wholeMatch(of: /\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC/) != nil, "shown as \(shown)")
                #expect(
                    exact.prefix(16).replacingOccurrences(of: "T", with: " ") + " UTC" == shown,
                    "\(exact) shown as \(shown)")
            }
            #expect(!page.contains(/<td>\d{4}-\d{2}-\d{2}T/), "a table cell shows a raw RFC 3339 time")

            // 'took' of the range: the runs' durations added up (each rounded to a tenth in the table).
            let report = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(
                        try await CLI.run(
                            ["report", "--since", "2000-01-01", "--format", "json"], environment: observed.environment
                        ).stdout.utf8)) as? [[String: Any]])
            #expect(report.count == 2)
            let seconds = report.reduce(0.0) { total, run in
                let started = (run["started_at"] as? String).flatMap(Self.date),
                    finished = (run["finished_at"] as? String).flatMap(Self.date)
                return total + (finished.map { f in started.map { f.timeIntervalSince($0) } ?? 0 } ?? 0)
            }
            let took = try #require(
                page.firstMatch(of: /<span>took<\/span><strong>([^<]*)<\/strong>/).map { String($0.output.1) })
            let shownSeconds = try #require(
                took.firstMatch(of: /^(\d+\.\d) s$/).flatMap { Double($0.output.1) }, "took shows \(took)")
            #expect(abs(shownSeconds - seconds) < 0.11, "took \(took), runs took \(seconds) s")

            // Laid out in a real browser, in a window narrow enough to squeeze the tables: no time breaks.
            let layout = try #require(
                try await Self.pageAttribute("data-times", of: html, chromium: chromium, window: "720,2000")
                    as? [String: Int])
            #expect(layout["shown"] == times.count)
            #expect(layout["wrapped"] == 0, "times broken over two lines: \(layout)")
        }
    }

    /// Opens `html` in headless Chromium behind a proxy that refuses every connection and reads the JSON
    /// the page's closing script left in the body attribute `name` (`data-charts`, `data-times`).
    static func pageAttribute(_ name: String, of html: String, chromium: String, window: String) async throws -> Any {
        let browser = [
            "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--window-size=" + window,
        ]
        let dom = try await toolOffPool(chromium, browser + ["--dump-dom", "file://" + html])
        let pattern = try Regex(name + #"="([^"]*)""#)
        let attribute = try #require(
            dom.firstMatch(of: pattern).flatMap { $0.output[1].substring.map(String.init) }, "no \(name) in the DOM")
        return try JSONSerialization.jsonObject(
            with: Data(attribute.replacingOccurrences(of: "&quot;", with: "\"").utf8))
    }

    static func date(_ text: String) -> Date? {
        (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
            ?? (try? Date(text, strategy: Date.ISO8601FormatStyle()))
    }

    @Test("renewal demo writes an HTML report and prints its path")
    func demoWritesHTML() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let demo = try await CLI.run(["demo", "--directory", dir + "/demo"])
        #expect(demo.status == 0, "\(demo.stderr)")
        let line = demo.stdout.split(separator: "\n").first { $0.hasPrefix("HTML report: ") }
        let path = try #require(line.map { String($0.dropFirst("HTML report: ".count)) })
        let page = try String(contentsOfFile: path, encoding: .utf8)
        #expect(page.contains("<svg class=\"chart\" id=\"changes-by-kind\""))
        #expect(page.contains("billing_recovered"))
        // The StoreKit 2 customer waits for the Server API (runs 1-3), then run 5 verifies her.
        let runFive = demo.stdout.components(separatedBy: "Run 5:").last ?? ""
        #expect(demo.stdout.contains("rosa         failed: needs_server_api"), "\(demo.stdout)")
        #expect(runFive.contains("rosa         verified               unverified -> active"), "\(runFive)")
        // Sam's refund on day 16, mid-period, is not due on any schedule: the change feed names it.
        let runSeven = demo.stdout.components(separatedBy: "Run 7:").last ?? ""
        #expect(runSeven.contains("sam          refunded               active -> revoked"), "\(runSeven)")
        #expect(runSeven.contains("healthy, Server API rows polled on the feed's long schedule"), "\(runSeven)")
        // Apple's operator actions: rita's refund request answered with her consent, olga's seat refund changing
        // nothing, an extension of alice and of every yearly subscriber in France, read back by run 9.
        #expect(runSeven.contains("refund requests: 1 read from the feed, 1 answered"), "\(runSeven)")
        #expect(runSeven.contains("rita         consumption information sent: DELIVERED"), "\(runSeven)")
        #expect(!runSeven.contains("olga         refunded"), "a seat refund is no refund of the purchase")
        let runNine = demo.stdout.components(separatedBy: "Run 9:").last ?? ""
        #expect(demo.stdout.contains("alice        extended"), "\(demo.stdout)")
        #expect(demo.stdout.contains("ivan         ineligible:family_shared"), "\(demo.stdout)")
        #expect(runNine.contains("alice        renewed"), "\(runNine)")
        #expect(runNine.contains("tomas        renewed"), "\(runNine)")
        #expect(runNine.contains("the mass extension is complete, 1 extended, 0 failed"), "\(runNine)")
        // A second app joins the database: one run checks both apps, the row imported without its app
        // is pinned by Apple's answer.
        let runEight = demo.stdout.components(separatedBy: "Run 8:").last ?? ""
        #expect(runEight.contains("mac-uma      verified               unverified -> active"), "\(runEight)")
        #expect(runEight.contains("by app: com.example.app 1 changes, com.example.mac 3 changes"), "\(runEight)")
        // The analytics of the demo's days: MRR from prices in four currencies at the demo's rates (the yearly
        // plan bought in France counts a twelfth of 99.99 EUR), and the page.
        let analytics = demo.stdout.components(separatedBy: "Analytics of the demo's days").last ?? ""
        let yearly = try #require(
            analytics.split(separator: "\n").first { $0.contains("com.example.pro.yearly") }, "\(analytics)")
        #expect(yearly.hasSuffix("active 1, MRR 9.00"), "99.99 EUR × 1.08 ÷ 12: \(yearly)")
        let pageLine = demo.stdout.split(separator: "\n").first { $0.hasPrefix("Analytics page: ") }
        let analyticsPage = try String(
            contentsOfFile: try #require(pageLine.map { String($0.dropFirst("Analytics page: ".count)) }),
            encoding: .utf8)
        #expect(analyticsPage.contains("data-figure=\"mrr\"") && !analyticsPage.contains("--refresh-daily"))
        // The demo ends with how MRR moved over its days: the last section, its five buckets adding up to the
        // net, which is MRR at the end less MRR at the start.
        let sections = demo.stdout.components(separatedBy: "\nMRR movement over the demo's days")
        let movement = try #require(sections.dropFirst().last, "\(demo.stdout)")
        #expect(!movement.contains("Database: ") && !movement.contains("Analytics page: "), "last: \(movement)")
        func cents(_ text: Substring) -> Int? { Double(text).map { Int(($0 * 100).rounded()) } }
        let ends = movement.split(separator: "\n")[0].matches(of: /(-?\d+\.\d\d)/).compactMap { cents($0.output.1) }
        var buckets: [String: Int] = [:]
        for line in movement.split(separator: "\n").dropFirst() {
            let words = line.split(separator: " ")
            if words.count >= 2, let amount = cents(words[1]) { buckets[String(words[0])] = amount }
        }
        let names = ["new", "expansion", "contraction", "churned", "reactivation"]
        #expect(Set(buckets.keys) == Set(names + ["net"]), "\(movement)")
        let sum = names.compactMap { buckets[$0] }.reduce(0, +)
        #expect(ends.count == 2 && sum == buckets["net"] && buckets["net"] == ends[1] - ends[0], "\(movement)")
        #expect((buckets["new"] ?? 0) > 0 && (buckets["churned"] ?? 0) < 0, "\(movement)")
        let pageMode = try FileManager.default.attributesOfItem(atPath: dir + "/demo/analytics.html")[.posixPermissions]
        #expect(
            (pageMode as? NSNumber).map { $0.intValue & 0o077 } == 0, "analytics.html is owner-only: \(pageMode ?? "")")
        let status = try await CLI.run([
            "status", "--json", "--user", "mac-uma", "--database", dir + "/demo/renewal.sqlite",
        ])
        #expect(status.stdout.contains(#""bundle_id":"com.example.mac""#), "\(status.stdout)")
        // Issue 44: vera's purchase never reached the server; run 9 adopts it from the feed (unclaimed),
        // support finds it by her order ID and claims it for her.
        #expect(runNine.contains("purchase_unclaimed     unverified -> unverified"), "\(runNine)")
        let support = demo.stdout.components(separatedBy: "vera writes to support").last ?? ""
        #expect(support.contains("com.example.pro.monthly  unclaimed  active  yes"), "\(support)")
        #expect(support.contains("for vera: was unclaimed; purchase_claimed recorded"), "\(support)")
        let vera = try await CLI.run(["status", "--json", "--user", "vera", "--database", dir + "/demo/renewal.sqlite"])
        #expect(
            vera.stdout.contains(#""user_id":"vera""#) && vera.stdout.contains(#""entitled":true"#), "\(vera.stdout)")
        // Each run's line adds up: receipts changed, unchanged and failed make the receipts checked; the
        // events come after.
        let countLines = demo.stdout.split(separator: "\n").filter {
            $0.contains("checked ") && $0.contains("receipts:")
        }
        #expect(countLines.count == 9, "\(countLines)")
        for line in countLines {
            let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            #expect(numbers.count >= 4 && numbers[0] == numbers[1] + numbers[2] + numbers[3], "\(line)")
        }
        // Each run's line and `renewal report --format table` of that run name the same numbers the same way
        // (the table's `changed` once showed 22 where the demo's line said "21 changed").
        for (index, line) in countLines.enumerated() {
            let report = try CountWordsTests.object(
                try #require(FileManager.default.contents(atPath: dir + "/demo/report-run-\(index + 1).json")))
            let runID = try #require(report["run_id"] as? String)
            let table = try await CLI.run([
                "report", "--run", runID, "--format", "table", "--database", dir + "/demo/renewal.sqlite",
            ])
            let row = try CountWordsTests.tableRow(table.stdout)
            #expect(
                CountWordsTests.number(after: "changed", in: String(line)) == row["changed"], "\(line)\n\(table.stdout)")
            #expect(
                CountWordsTests.number(after: "checked", in: String(line)) == row["checked"], "\(line)\n\(table.stdout)")
        }
        // One state move per receipt: the refund shows it, auto-renew turned off with it does not again.
        let runTwo = (demo.stdout.components(separatedBy: "Run 2:").last ?? "").components(separatedBy: "Run 3:")[0]
        let frank = runTwo.split(separator: "\n").filter { $0.contains("frank") }
        #expect(frank.count == 2 && frank.filter { $0.contains("active -> revoked") }.count == 1, "\(frank)")
        // The upgrade names the plan it left.
        #expect(
            runTwo.contains("com.example.pro.monthly -> com.example.pro.monthly.premium"), "\(runTwo)")

        // The HTML: runs that took seconds say so, and the entitled chart walks history back right: the
        // premium plan has no subscriber before grace upgrades (run 2), and sandbox testers are apart.
        #expect(!page.contains("<span>took</span><strong>0.0 s</strong>"), "the demo's runs took no time?")
        let table = try #require(Self.htmlTable(after: "Entitled subscribers by product", in: page))
        let header = try #require(table.first)
        let premium = try #require(header.firstIndex(of: "com.example.pro.monthly.premium"), "\(header)")
        let monthly = try #require(header.firstIndex(of: "com.example.pro.monthly"), "\(header)")
        let sandbox = try #require(header.firstIndex(of: "com.example.pro.monthly (Sandbox)"), "\(header)")
        let rows = table.dropFirst().map { $0 }
        #expect(rows.count == 9, "\(table)")
        #expect(rows.first?[premium] == "0" && rows.dropFirst().allSatisfy { $0[premium] == "1" }, "\(table)")
        // Run 1: 17 production subscribers on the monthly plan (heidi, the tester, is in sandbox; judy is on the
        // weekly plan and tomas on the yearly one; ivan's family-shared and piet's assigned seat count too).
        #expect(rows.first?[monthly] == "17" && rows.allSatisfy { $0[sandbox] == "1" }, "\(table)")
    }

    /// The cells of the first `<table>` after `heading`, header row first.
    static func htmlTable(after heading: String, in page: String) -> [[String]]? {
        guard let start = page.range(of: heading),
            let open = page.range(of: "<table", range: start.upperBound..<page.endIndex),
            let close = page.range(of: "</table>", range: open.upperBound..<page.endIndex)
        else { return nil }
        let html = String(page[open.lowerBound..<close.lowerBound])
        let cell = /<t[dh][^>]*>(.*?)<\/t[dh]>/
        let tag = /<[^>]+>/
        return html.components(separatedBy: "</tr>").dropLast().map { row in
            row.matches(of: cell).map {
                String($0.output.1).replacing(tag, with: "").trimmingCharacters(in: .whitespaces)
            }
        }
    }
}
