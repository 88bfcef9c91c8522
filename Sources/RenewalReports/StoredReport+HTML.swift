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
        try await writeOutsideRunsList(selection, to: output)
        try await writeFailureList(selection, to: output)
        try await output.write(HTMLPage.tail)
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
            : "renewal runs \(HTMLPage.readable(summary.first?.startedAt ?? last.startedAt)) to \(HTMLPage.readable(last.startedAt))"
        var page = HTMLPage.head(title: title)
        page += "<h1>\(HTMLPage.escape(title))</h1>\n<section class=\"cards\">\n"
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
            page +=
                "<div class=\"card\"><span>\(HTMLPage.escape(label))</span><strong>\(HTMLPage.escape(value))</strong></div>\n"
        }
        page += "</section>\n"

        let kindRows = summary.kinds.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
        page += "<h2>Changes by kind</h2>\n" + SVGChart.bars(id: "changes-by-kind", kindRows.map { ($0.key, $0.value) })
        page += HTMLPage.table(["kind", "changes"], kindRows.map { [.text($0.key), .text("\($0.value)")] })

        page += "<h2>Entitled subscribers by product, last \(entitled.runs.count) runs</h2>\n"
        page += SVGChart.lines(
            id: "entitled-by-product", series: entitled.series,
            xLabels: entitled.runs.map { Timestamp.string($0.startedAt) })
        page += HTMLPage.table(
            ["run started"] + entitled.series.map(\.name),
            entitled.runs.indices.map { index in
                [.time(entitled.runs[index].startedAt)] + entitled.series.map { .text("\($0.values[index])") }
            })

        let reasonRows = summary.reasons.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
        page +=
            "<h2>Failures by reason</h2>\n"
            + SVGChart.bars(id: "failures-by-reason", reasonRows.map { ($0.key, $0.value) })
        page += HTMLPage.table(["reason", "failures"], reasonRows.map { [.text($0.key), .text("\($0.value)")] })

        page +=
            "<h2>Runs</h2>\n"
            + HTMLPage.table(
                [
                    "started", "command", "status", "exit", "took", "checked", "changed", "failed", "conflicts",
                    "run id",
                ],
                summary.runs.map {
                    [.time($0.startedAt)]
                        + [
                            $0.command, $0.status.rawValue, $0.exitCode.map(String.init) ?? "-", duration($0),
                            "\($0.checked)", "\($0.changed)", "\($0.failed)", "\($0.conflicts)", $0.id,
                        ].map(HTMLPage.Cell.text)
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
                    let cells: [HTMLPage.Cell] = [
                        .time(change.occurredAt), .text(ReportChange.shownUser(change.userID) ?? "unclaimed"),
                        .text(event.productID ?? ""),
                        .text(event.kind.rawValue),
                        .text(event.fromState.rawValue), .text(event.toState.rawValue), .time(event.newExpiresAt),
                        .text(event.environment?.rawValue ?? ""),
                    ]
                    try await output.write(HTMLPage.row(cells))
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
                    let cells: [HTMLPage.Cell] = [
                        .time(failure.occurredAt), .text(failure.userID), .text(failure.failure.reason.rawValue),
                        .text(failure.failure.message),
                    ]
                    try await output.write(HTMLPage.row(cells))
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
}
