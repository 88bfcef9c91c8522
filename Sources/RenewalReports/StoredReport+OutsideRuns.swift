import Foundation
import RenewalCore
import RenewalStorage

/// The part of a run's time in which changes recorded outside any run count as its: `renewal claim`
/// and import lines that claim a purchase store their change with no run id, so the report files each
/// one under the run it followed.
struct OutsideRunsWindow: Sendable, Hashable {
    /// Inclusive; nil: unbounded (the first run of a range without `--since`).
    var from: Date?
    /// Exclusive; nil: unbounded (the last run, or a range without `--until`).
    var to: Date?
}

extension StoredReport {
    /// The heading of the text and HTML sections, and what the JSON key is named after.
    static let outsideRunsTitle = "Changes outside runs (claims, imports)"

    /// Calls `body` with each selected run, oldest first, and the window of changes outside runs
    /// filed under it: from its start (a range's first run: from `--since`) to the next run's start
    /// (the last run: to `--until`, or without end). The windows tile the selection, so each change
    /// outside runs is reported once.
    func forEachRunWithWindow(
        _ selection: ReportSelection, _ body: (RunRecord, OutsideRunsWindow) async throws -> Void
    ) async throws {
        var pending: (run: RunRecord, from: Date?)?
        try await forEachRun(selection) { run in
            if let pending {
                try await body(pending.run, OutsideRunsWindow(from: pending.from, to: run.startedAt))
            }
            var from: Date? = run.startedAt
            if pending == nil, case .range(let since, _) = selection { from = since }
            pending = (run, from)
        }
        guard let pending else { return }
        let to: Date?
        switch selection {
        case .last: to = nil
        case .run:
            to = try await store.runs(startedFrom: nil, before: nil, after: pending.run, limit: 1).first?.startedAt
        case .range(_, let until): to = until
        }
        try await body(pending.run, OutsideRunsWindow(from: pending.from, to: to))
    }

    /// Calls `body` with each page of the changes recorded outside runs in `window` (of `app` only,
    /// when the report is), at most `limit` in all.
    func forEachOutsideChangePage(
        in window: OutsideRunsWindow, limit: Int = .max, _ body: ([RecordedChange]) async throws -> Void
    ) async throws {
        try await forEachPage(
            limit: limit,
            fetch: {
                try await store.changesOutsideRuns(
                    from: window.from, before: window.to, app: app, afterID: $0, limit: $1)
            }, id: \.id
        ) {
            try await body($0.map(\.change))
        }
    }

    /// The JSON key `changes_outside_runs` of a run's object, after its conflicts, when its window holds
    /// any (omitted otherwise, so a report without such changes reads as before). Opens the array the
    /// object's tail closes.
    func writeOutsideChangesJSON(_ window: OutsideRunsWindow, to output: ReportOutput) async throws {
        var first = true
        try await forEachOutsideChangePage(in: window) { page in
            for change in page {
                if first { try await output.write("\n],\"changes_outside_runs\":[") }
                try await output.write(ReportJSON.separator(first: first) + Self.json(ReportChange(change)))
                first = false
            }
        }
    }

    /// The text section listing changes outside runs over the whole selection: at most 200, the
    /// first ones; nothing at all when there are none.
    func outsideRunsTable(_ windows: [OutsideRunsWindow]) async throws -> String {
        let limit = 200
        var rows: [[String]] = []
        var more = false
        for window in windows where !more {
            try await forEachOutsideChangePage(in: window, limit: limit + 1 - rows.count) { page in
                for change in page {
                    guard rows.count < limit else {
                        more = true
                        return
                    }
                    rows.append(Self.outsideRunsCells(change))
                }
            }
        }
        guard !rows.isEmpty else { return "" }
        var text = "\n\(Self.outsideRunsTitle)\n"
        text += Self.table(["time", "kind", "user", "original transaction", "product", "app"], rows)
        if more { text += "  (first \(limit) listed; --format csv has them all)\n" }
        return text
    }

    static func outsideRunsCells(_ change: RecordedChange) -> [String] {
        [
            Timestamp.string(change.occurredAt), change.event.kind.rawValue,
            ReportChange.shownUser(change.userID) ?? "unclaimed", change.event.originalTransactionID ?? "",
            change.event.productID ?? "", change.bundleID ?? "",
        ]
    }

    /// The HTML section listing changes outside runs, at most `htmlRowLimit`; nothing when there are none.
    func writeOutsideRunsList(_ selection: ReportSelection, to output: ReportOutput) async throws {
        var listed = 0
        try await forEachRunWithWindow(selection) { _, window in
            guard listed < htmlRowLimit else { return }
            try await forEachOutsideChangePage(in: window, limit: htmlRowLimit - listed) { changes in
                for change in changes {
                    if listed == 0 {
                        try await output.write(
                            "<h2>\(HTMLPage.escape(Self.outsideRunsTitle))</h2>\n<table><thead><tr>"
                                + ["time", "kind", "user", "original transaction", "product", "app"].map {
                                    "<th>\($0)</th>"
                                }.joined() + "</tr></thead><tbody>\n")
                    }
                    let cells = Self.outsideRunsCells(change)
                    try await output.write(
                        HTMLPage.row([.time(change.occurredAt)] + cells.dropFirst().map(HTMLPage.Cell.text)))
                    listed += 1
                }
            }
        }
        if listed > 0 { try await output.write("</tbody></table>\n") }
    }
}
