import Foundation
import RenewalCore
import RenewalStorage

extension StoredReport {
    /// How many recent runs the entitled-subscribers chart goes back.
    static let entitledHistoryRuns = 30

    /// One self-contained page: no network, no external file. Charts are inline SVG, each followed by
    /// the table it draws; the changes and failures lists stop at `htmlRowLimit` rows.
    func renderHTML(_ selection: ReportSelection, to output: ReportOutput) async throws {
        // First pass: totals and the runs' outcomes.
        let summary = try await htmlSummary(selection)
        guard let last = summary.last else { return }
        let entitled = try await entitledSeries(upTo: last.startedAt)
        try await output.write(Self.summaryPage(summary, last: last, entitled: entitled))
        // Second pass: the lists, streamed.
        try await writeChangeList(selection, changed: summary.totals.changed, to: output)
        try await writeFailureList(selection, to: output)
        try await output.write(Self.pageTail)
    }

    /// What the page's head shows of the selected runs.
    struct HTMLSummary {
        var kinds: [String: Int] = [:]
        var reasons: [String: Int] = [:]
        /// The last 200 runs, for the runs table.
        var runs: [RunRecord] = []
        var runCount = 0
        var totals = RenewalCounts()
        var first: RunRecord?
        var last: RunRecord?
        var took: TimeInterval = 0
        var unfinished = 0
    }

    private func htmlSummary(_ selection: ReportSelection) async throws -> HTMLSummary {
        var summary = HTMLSummary()
        try await forEachRun(selection) { run in
            summary.runCount += 1
            if summary.first == nil { summary.first = run }
            summary.last = run
            if let finished = run.finishedAt {
                summary.took += finished.timeIntervalSince(run.startedAt)
            } else {
                summary.unfinished += 1
            }
            if summary.runs.count == 200 { summary.runs.removeFirst() }
            summary.runs.append(run)
            summary.totals.checked += run.checked
            summary.totals.changed += run.changed
            summary.totals.failed += run.failed
            summary.totals.conflicts += run.conflicts
            summary.totals.unchanged += run.unchanged
            for (kind, count) in try await store.changeCounts(ofRun: run.id, app: app) {
                summary.kinds[kind, default: 0] += count
            }
            for (reason, count) in try await store.failureCounts(ofRun: run.id, app: app) {
                summary.reasons[reason, default: 0] += count
            }
        }
        return summary
    }

    /// The page up to the lists: title, cards, the charts with their tables, and the runs.
    private static func summaryPage(
        _ summary: HTMLSummary, last: RunRecord, entitled: (runs: [RunRecord], series: [(name: String, values: [Int])])
    ) -> String {
        let runCount = summary.runCount
        let title =
            runCount == 1
            ? "renewal run \(last.id)"
            : "renewal runs \(readable(summary.first?.startedAt ?? last.startedAt)) to \(readable(last.startedAt))"
        var page = pageHead(title: title)
        page += "<h1>\(escape(title))</h1>\n<section class=\"cards\">\n"
        let totals = summary.totals
        let cards: [(String, String)] = [
            (
                "status",
                runCount == 1 ? "\(last.status) (exit \(last.exitCode.map(String.init) ?? "-"))" : "\(runCount) runs"
            ),
            ("checked", "\(totals.checked)"), ("changes", "\(totals.changed)"), ("unchanged", "\(totals.unchanged)"),
            ("failed", "\(totals.failed)"), ("conflicts", "\(totals.conflicts)"),
            ("took", runCount == 1 ? duration(last) : totalDuration(summary.took, unfinished: summary.unfinished)),
        ]
        for (label, value) in cards {
            page += "<div class=\"card\"><span>\(escape(label))</span><strong>\(escape(value))</strong></div>\n"
        }
        page += "</section>\n"

        let kindRows = summary.kinds.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
        page += "<h2>Changes by kind</h2>\n" + SVGChart.bars(id: "changes-by-kind", kindRows.map { ($0.key, $0.value) })
        page += htmlTable(["kind", "changes"], kindRows.map { [.text($0.key), .text("\($0.value)")] })

        page += "<h2>Entitled subscribers by product, last \(entitled.runs.count) runs</h2>\n"
        page += SVGChart.lines(
            id: "entitled-by-product", series: entitled.series,
            xLabels: entitled.runs.map { Timestamp.string($0.startedAt) })
        page += htmlTable(
            ["run started"] + entitled.series.map(\.name),
            entitled.runs.indices.map { index in
                [.time(entitled.runs[index].startedAt)] + entitled.series.map { .text("\($0.values[index])") }
            })

        let reasonRows = summary.reasons.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
        page +=
            "<h2>Failures by reason</h2>\n"
            + SVGChart.bars(id: "failures-by-reason", reasonRows.map { ($0.key, $0.value) })
        page += htmlTable(["reason", "failures"], reasonRows.map { [.text($0.key), .text("\($0.value)")] })

        page +=
            "<h2>Runs</h2>\n"
            + htmlTable(
                [
                    "started", "command", "status", "exit", "took", "checked", "changed", "failed", "conflicts",
                    "run id",
                ],
                summary.runs.map {
                    [.time($0.startedAt)]
                        + [
                            $0.command, $0.status.rawValue, $0.exitCode.map(String.init) ?? "-", duration($0),
                            "\($0.checked)", "\($0.changed)", "\($0.failed)", "\($0.conflicts)", $0.id,
                        ].map(HTMLCell.text)
                })
        return page
    }

    /// The changes, at most `htmlRowLimit`, with a note when the runs hold more.
    private func writeChangeList(_ selection: ReportSelection, changed: Int, to output: ReportOutput) async throws {
        try await output.write(
            "<h2>Changes</h2>\n<table><thead><tr>"
                + ["time", "user", "product", "kind", "from", "to", "expires", "environment"].map { "<th>\($0)</th>" }
                .joined() + "</tr></thead><tbody>\n")
        var listed = 0
        try await forEachRun(selection) { run in
            guard listed < htmlRowLimit else { return }
            try await forEachChangePage(of: run.id, limit: htmlRowLimit - listed) { changes in
                for change in changes {
                    let event = change.event
                    let cells: [HTMLCell] = [
                        .time(change.occurredAt), .text(change.userID), .text(event.productID ?? ""),
                        .text(event.kind.rawValue),
                        .text(event.fromState.rawValue), .text(event.toState.rawValue), .time(event.newExpiresAt),
                        .text(event.environment?.rawValue ?? ""),
                    ]
                    try await output.write(Self.htmlRow(cells))
                }
                listed += changes.count
            }
        }
        try await output.write("</tbody></table>\n")
        if changed > listed {
            try await output.write(
                """
                <p class=\"note\">\(listed) of \(changed) changes listed; <code>renewal report --format \
                csv</code> has them all.</p>\n
                """
            )
        }
    }

    /// The failures, at most `htmlRowLimit`.
    private func writeFailureList(_ selection: ReportSelection, to output: ReportOutput) async throws {
        try await output.write(
            "<h2>Failures</h2>\n<table><thead><tr><th>time</th><th>user</th><th>reason</th><th>message</th></tr>"
                + "</thead><tbody>\n"
        )
        var failuresListed = 0
        try await forEachRun(selection) { run in
            guard failuresListed < htmlRowLimit else { return }
            try await forEachFailurePage(of: run.id, limit: htmlRowLimit - failuresListed) { failures in
                for failure in failures {
                    let cells: [HTMLCell] = [
                        .time(failure.occurredAt), .text(failure.userID), .text(failure.failure.reason.rawValue),
                        .text(failure.failure.message),
                    ]
                    try await output.write(Self.htmlRow(cells))
                }
                failuresListed += failures.count
            }
        }
        try await output.write("</tbody></table>\n")
    }

    /// Entitled subscriptions per product after each of the last runs up to `upTo`, Production and
    /// Sandbox apart: today's count, walked back through every later run's net change.
    func entitledSeries(upTo: Date) async throws -> (runs: [RunRecord], series: [(name: String, values: [Int])]) {
        let recent = try await store.recentRuns(upTo: upTo, limit: Self.entitledHistoryRuns)
        guard let oldest = recent.last else { return ([], []) }
        let deltas = try await store.entitledDeltas(since: oldest.startedAt)
        var current = try await store.entitledNow()
        // Every run from the oldest shown to now, newest first (ids only: flat memory).
        var later: [RunRecord] = []
        var cursor: RunRecord?
        while true {
            let page = try await store.runs(startedFrom: oldest.startedAt, before: nil, after: cursor, limit: pageSize)
            later += page.map { RunRecord(id: $0.id, command: "", startedAt: $0.startedAt, host: "", processID: 0) }
            guard page.count == pageSize, let last = page.last else { break }
            cursor = last
        }
        let shown = Set(recent.map(\.id))
        var values: [String: [EntitledPlan: Int]] = [:]
        for run in later.reversed() {
            if shown.contains(run.id) { values[run.id] = current }
            for (plan, delta) in deltas[run.id] ?? [:] { current[plan, default: 0] -= delta }
        }
        let ordered = Array(recent.reversed())
        let plans = Set(values.values.flatMap(\.keys)).sorted()
        let series = plans.map { plan in
            (name: Self.seriesName(plan), values: ordered.map { max(0, values[$0.id]?[plan] ?? 0) })
        }
        return (ordered, series)
    }

    /// The product, with its environment unless it is Production: `pro.monthly (Sandbox)`.
    static func seriesName(_ plan: EntitledPlan) -> String {
        let product = plan.productID.isEmpty ? "(unknown product)" : plan.productID
        switch plan.environment {
        case "Production": return product
        case "": return product + " (unknown environment)"
        default: return product + " (\(plan.environment))"
        }
    }

    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }

    /// One cell of a table on the page.
    enum HTMLCell {
        /// Text, escaped; a whole number is right-aligned.
        case text(String)
        /// A time as a reader writes it (`2026-11-24 01:22 UTC`) on one line, the exact RFC 3339 value
        /// in its `datetime` and `title` (shown on hover); empty for nil.
        case time(Date?)

        var html: String {
            switch self {
            case .text(let text):
                return Int(text) != nil ? "<td class=\"n\">\(text)</td>" : "<td>\(StoredReport.escape(text))</td>"
            case .time(let date):
                guard let date else { return "<td></td>" }
                let exact = Timestamp.string(date)
                return "<td><time datetime=\"\(exact)\" title=\"\(exact)\">\(StoredReport.readable(date))</time></td>"
            }
        }
    }

    /// `2026-11-24 01:22 UTC`: to the minute, in UTC, as the page shows times.
    static func readable(_ date: Date) -> String {
        let exact = Timestamp.string(date)
        return exact.prefix(10) + " " + exact.dropFirst(11).prefix(5) + " UTC"
    }

    /// The summed wall time of a range of runs, with how many had not finished.
    static func totalDuration(_ seconds: TimeInterval, unfinished: Int) -> String {
        let total: String
        switch seconds {
        case ..<60: total = String(format: "%.1f s", seconds)
        case ..<3600: total = "\(Int(seconds) / 60) min \(Int(seconds) % 60) s"
        default: total = "\(Int(seconds) / 3600) h \(Int(seconds) % 3600 / 60) min"
        }
        return unfinished == 0 ? total : "\(total) (+\(unfinished) unfinished)"
    }

    static func htmlRow(_ cells: [HTMLCell]) -> String {
        "<tr>" + cells.map(\.html).joined() + "</tr>\n"
    }

    static func htmlTable(_ header: [String], _ rows: [[HTMLCell]]) -> String {
        guard !rows.isEmpty else { return "<p class=\"note\">None.</p>\n" }
        var html = "<table><thead><tr>" + header.map { "<th>\(escape($0))</th>" }.joined() + "</tr></thead><tbody>\n"
        for row in rows { html += htmlRow(row) }
        return html + "</tbody></table>\n"
    }

    static func pageHead(title: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title>
        <style>
        body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1100px; padding: 0 16px; color: #1d232a; }
        h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 32px; }
        .cards { display: flex; flex-wrap: wrap; gap: 12px; }
        .card { border: 1px solid #d8dde3; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
        .card span { display: block; color: #5b6570; font-size: 12px; } .card strong { font-size: 18px; }
        table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
        th, td { border-bottom: 1px solid #e3e7eb; padding: 3px 10px; text-align: left; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
        svg.chart { display: block; margin: 8px 0; } .note { color: #5b6570; } time { white-space: nowrap; }
        svg text { font: 12px system-ui, sans-serif; fill: #1d232a; }
        </style></head><body>

        """
    }

    /// The closing script records what each chart drew (size and marks) in `data-charts`, and how
    /// many of the times shown broke over more than one line in `data-times`, so a headless browser's
    /// DOM dump shows the page laid out as meant; the page works without it.
    static let pageTail = """
        <script>
        (function () {
          var charts = Array.prototype.map.call(document.querySelectorAll('svg.chart'), function (svg) {
            var box = svg.getBoundingClientRect();
            return { id: svg.id, width: Math.round(box.width), height: Math.round(box.height), marks: svg.querySelectorAll('.mark').length };
          });
          document.body.setAttribute('data-charts', JSON.stringify(charts));
          var times = document.querySelectorAll('time');
          var wrapped = Array.prototype.filter.call(times, function (time) { return time.getClientRects().length > 1; }).length;
          document.body.setAttribute('data-times', JSON.stringify({ shown: times.length, wrapped: wrapped }));
        })();
        </script>
        </body></html>

        """
}
