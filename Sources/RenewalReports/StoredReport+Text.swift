import Foundation
import RenewalCore
import RenewalStorage

extension StoredReport {
    /// The `--report` object of each run (an array of them for a range).
    func renderJSON(_ selection: ReportSelection, to output: ReportOutput) async throws {
        let isRange = if case .range = selection { true } else { false }
        if isRange { try await output.write("[") }
        var first = true
        try await forEachRunWithWindow(selection) { run, window in
            if isRange { try await output.write(first ? "\n" : ",\n") }
            first = false
            try await writeJSONObject(of: run, outside: window, to: output)
        }
        try await output.write(isRange ? "\n]\n" : "\n")
    }

    private func writeJSONObject(of run: RunRecord, outside window: OutsideRunsWindow, to output: ReportOutput)
        async throws
    {
        // A stored run is never a dry run: dry runs store nothing.
        try await output.write(
            try ReportJSON.head(runID: run.id, command: run.command, dryRun: false, startedAt: run.startedAt))
        var firstChange = true
        try await forEachChangePage(of: run.id) { page in
            for change in page {
                let element = ReportChange(change)
                try await output.write(ReportJSON.separator(first: firstChange) + Self.json(element))
                firstChange = false
            }
        }
        try await output.write(ReportJSON.afterChanges)
        var firstFailure = true
        try await forEachFailurePage(of: run.id) { page in
            for failure in page {
                let element = ReportFailure(
                    userID: failure.userID, receiptID: failure.receiptID, failure: failure.failure,
                    bundleID: failure.bundleID)
                try await output.write(ReportJSON.separator(first: firstFailure) + Self.json(element))
                firstFailure = false
            }
        }
        try await output.write(ReportJSON.afterFailures)
        var firstConflict = true
        for conflict in try await store.conflicts(ofRun: run.id) {
            try await output.write(
                ReportJSON.separator(first: firstConflict) + Self.json(ReportConflict(conflict: conflict)))
            firstConflict = false
        }
        try await writeOutsideChangesJSON(window, to: output)
        try await output.write(
            try ReportJSON.tail(
                finishedAt: run.finishedAt, status: run.status, exitCode: run.exitCode, counts: run.counts))
    }

    static let csvColumns = [
        "run_id", "occurred_at", "user_id", "original_transaction_id", "product_id", "kind", "from_state", "to_state",
        "old_expires_at", "new_expires_at", "environment", "ownership_type", "entitled", "source", "bundle_id",
        "from_product_id", "revocation_type", "revocation_percentage",
    ]

    /// One change per line: JSON Lines, or CSV with a header.
    func renderLines(_ selection: ReportSelection, csv: Bool, to output: ReportOutput) async throws {
        if csv { try await output.write(Self.csvColumns.joined(separator: ",") + "\r\n") }
        try await forEachRunWithWindow(selection) { run, window in
            try await forEachChangePage(of: run.id) { page in
                for change in page { try await writeLine(change, runID: run.id, csv: csv, to: output) }
            }
            try await forEachOutsideChangePage(in: window) { page in
                for change in page { try await writeLine(change, runID: nil, csv: csv, to: output) }
            }
        }
    }

    /// One change as a JSON line or a CSV record; a change outside runs has `run_id` null (CSV: empty).
    private func writeLine(_ change: RecordedChange, runID: String?, csv: Bool, to output: ReportOutput)
        async throws
    {
        let event = change.event
        let values: [String?] = [
            runID, Timestamp.string(change.occurredAt), ReportChange.shownUser(change.userID),
            event.originalTransactionID,
            event.productID,
            event.kind.rawValue, event.fromState.rawValue, event.toState.rawValue,
            event.oldExpiresAt.map(Timestamp.string), event.newExpiresAt.map(Timestamp.string),
            event.environment?.rawValue, change.ownershipType,
            event.toState.grantsAccess ? "true" : "false",
            change.source, change.bundleID, event.fromProductID, event.revocationType,
            event.revocationPercentage.map(String.init),
        ]
        if csv {
            try await output.write(values.map { Self.csvField($0 ?? "") }.joined(separator: ",") + "\r\n")
        } else {
            try await output.write(Self.json(LineChange(runID: runID, change: change)) + "\n")
        }
    }

    /// RFC 4180: quoted when it holds a comma, quote or line break; a leading `=`, `+`, `-` or `@`
    /// is prefixed with `'` so a spreadsheet never runs a user id as a formula.
    static func csvField(_ value: String) -> String {
        var text = value
        if let first = text.first, "=+-@".contains(first) { text = "'" + text }
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// A terminal summary: per run its outcome and counts, then changes by kind and failures by reason.
    func renderTable(_ selection: ReportSelection, to output: ReportOutput) async throws {
        var kinds: [String: Int] = [:]
        var reasons: [String: Int] = [:]
        var runs = 0
        var rows: [[String]] = []
        var whole: OutsideRunsWindow?
        try await forEachRunWithWindow(selection) { run, window in
            // The windows tile the selection: one from the first's start to the last's end covers them.
            let from: Date? = whole.map(\.from) ?? window.from
            whole = OutsideRunsWindow(from: from, to: window.to)
            runs += 1
            for (kind, count) in try await store.changeCounts(ofRun: run.id, app: app) {
                kinds[kind, default: 0] += count
            }
            for (reason, count) in try await store.failureCounts(ofRun: run.id, app: app) {
                reasons[reason, default: 0] += count
            }
            // A long range lists its last 200 runs; the totals below count them all.
            if rows.count == 200 { rows.removeFirst() }
            rows.append([
                Timestamp.string(run.startedAt), run.command, run.status.rawValue, run.exitCode.map(String.init) ?? "-",
                Self.duration(run), "\(run.checked)", "\(run.changed)", "\(run.failed)", "\(run.conflicts)", run.id,
            ])
        }
        var text = "Runs (\(runs))\n"
        text += Self.table(
            ["started", "command", "status", "exit", "took", "checked", "changed", "failed", "conflicts", "run id"],
            rows)
        text += "\nChanges by kind\n"
        text += Self.table(
            ["kind", "changes"],
            kinds.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { [$0.key, "\($0.value)"] })
        text += "\nFailures by reason\n"
        text += Self.table(
            ["reason", "failures"],
            reasons.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { [$0.key, "\($0.value)"] })
        text += try await outsideRunsTable(whole.map { [$0] } ?? [])
        try await output.write(text)
    }

    static func duration(_ run: RunRecord) -> String {
        guard let finished = run.finishedAt else { return "-" }
        return String(format: "%.1f s", finished.timeIntervalSince(run.startedAt))
    }

    /// Left-aligned text columns, numbers right-aligned; `(none)` for an empty table.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        guard !rows.isEmpty else { return "  (none)\n" }
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], cell.count)
            }
        }
        func line(_ cells: [String]) -> String {
            "  "
                + cells.enumerated().map { index, cell in
                    let pad = String(repeating: " ", count: widths[index] - cell.count)
                    return Int(cell) != nil ? pad + cell : cell + pad
                }.joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        }
        return line(header) + rows.map(line).joined()
    }
}

/// One JSON Lines element: the report's change object with its run id and time.
struct LineChange: Encodable {
    /// Nil for a change recorded outside any run (written as `null`).
    var runID: String?
    var change: RecordedChange

    func encode(to encoder: any Encoder) throws {
        try ReportChange(change).encode(to: encoder)
        var c = encoder.container(keyedBy: ReportKey.self)
        try c.encode(runID, forKey: ReportKey("run_id"))
        try c.encode(Timestamp.string(change.occurredAt), forKey: ReportKey("occurred_at"))
    }
}
