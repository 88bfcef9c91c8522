import Foundation
import RenewalCore
import RenewalStorage

/// The formats `renewal report` renders a stored run (or range of runs) in.
public enum ReportFormat: String, Sendable, CaseIterable {
    /// The same object `--report` writes (an array of them for a range).
    case json
    /// One change per line, with its run id and time.
    case jsonl
    /// The changes as RFC 4180 CSV with a header line.
    case csv
    /// A human summary for a terminal.
    case table
    /// One self-contained page with inline SVG charts and the tables behind them.
    case html
}

/// Which stored runs a report covers.
public enum ReportSelection: Sendable, Hashable {
    /// The run that started last.
    case last
    /// One run by id.
    case run(String)
    /// Every run that started in `[since, until)`.
    case range(since: Date?, until: Date?)
}

/// Raised when the selection names no stored run.
public struct ReportSelectionError: Error, CustomStringConvertible {
    public var description: String
}

/// Renders stored runs from the database. Runs, changes and failures are read a page at a time and
/// written as they come, so memory stays flat however large the runs are.
public struct StoredReport: Sendable {
    let store: any RunHistoryStore
    let pageSize: Int
    /// The HTML page lists at most this many changes and failures (the CSV and JSON formats have them all).
    let htmlRowLimit: Int
    /// Only this app's changes and failures (and their counts); nil: every app's.
    let app: String?

    public init(store: any RunHistoryStore, app: String? = nil, pageSize: Int = 500, htmlRowLimit: Int = 500) {
        self.app = app
        self.store = store
        self.pageSize = pageSize
        self.htmlRowLimit = htmlRowLimit
    }

    /// Writes the report of `selection` in `format` to `output`.
    public func render(_ selection: ReportSelection, format: ReportFormat, to output: ReportOutput) async throws {
        switch format {
        case .json: try await renderJSON(selection, to: output)
        case .jsonl: try await renderLines(selection, csv: false, to: output)
        case .csv: try await renderLines(selection, csv: true, to: output)
        case .table: try await renderTable(selection, to: output)
        case .html: try await renderHTML(selection, to: output)
        }
    }

    /// Calls `body` with each selected run, oldest first. Throws when nothing matches.
    func forEachRun(_ selection: ReportSelection, _ body: (RunRecord) async throws -> Void) async throws {
        switch selection {
        case .last:
            guard let run = try await store.lastRun() else {
                throw ReportSelectionError(description: "the database holds no run yet; run `renewal run` first")
            }
            try await body(run)
        case .run(let id):
            guard let run = try await store.run(id: id) else {
                throw ReportSelectionError(
                    description:
                        "no run with id \(id); `renewal report --format table --since 2000-01-01` lists the stored runs"
                )
            }
            try await body(run)
        case .range(let since, let until):
            var cursor: RunRecord?
            var any = false
            while true {
                let page = try await store.runs(startedFrom: since, before: until, after: cursor, limit: pageSize)
                for run in page {
                    any = true
                    try await body(run)
                }
                guard page.count == pageSize, let last = page.last else { break }
                cursor = last
            }
            if !any {
                throw ReportSelectionError(description: "no run started in the given range; widen --since/--until")
            }
        }
    }

    /// Calls `body` with each page of a run's changes.
    func forEachChangePage(of runID: String, limit: Int = .max, _ body: ([RecordedChange]) async throws -> Void)
        async throws
    {
        try await forEachPage(
            limit: limit, fetch: { try await store.changes(ofRun: runID, app: app, afterID: $0, limit: $1) }, id: \.id
        ) {
            try await body($0.map(\.change))
        }
    }

    /// Calls `body` with each page of a run's failures.
    func forEachFailurePage(of runID: String, limit: Int = .max, _ body: ([RecordedFailure]) async throws -> Void)
        async throws
    {
        try await forEachPage(
            limit: limit, fetch: { try await store.failures(ofRun: runID, app: app, afterID: $0, limit: $1) }, id: \.id
        ) {
            try await body($0.map(\.failure))
        }
    }

    /// Keyset paging: fetches rows after the last id seen, `pageSize` at a time, until `limit` rows or the end.
    func forEachPage<Row>(
        limit: Int, fetch: (Int64, Int) async throws -> [Row], id: KeyPath<Row, Int64>,
        _ body: ([Row]) async throws -> Void
    ) async throws {
        var after: Int64 = 0
        var seen = 0
        while seen < limit {
            let page = try await fetch(after, min(pageSize, limit - seen))
            guard let last = page.last else { return }
            try await body(page)
            seen += page.count
            after = last[keyPath: id]
        }
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func json(_ value: some Encodable) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// Where a report goes: standard output, or a file written beside its target and renamed into
/// place when complete (a reader never sees half a report).
///
/// Text gathers in memory up to 64 KiB and is written in one call on a thread of its own: the
/// program's tasks run on NIO's event loops, which a full pipe or a slow disk must never hold.
public final class ReportOutput {
    private let writes = BlockingCallQueue(label: "renewal.report-output")
    private let handle: FileHandle
    private let target: String?
    private let temporary: String?
    private var buffer = Data()

    /// Standard output.
    public init() {
        handle = FileHandle.standardOutput
        target = nil
        temporary = nil
    }

    /// A file, replaced atomically by `finish()`.
    public init(path: String) throws {
        let temporary = path + ".tmp-\(ProcessInfo.processInfo.processIdentifier)"
        guard OwnerOnlyFile.create(atPath: temporary, truncate: true),
            let handle = FileHandle(forWritingAtPath: temporary)
        else {
            throw ReportFileError(
                path: path, detail: "cannot create \(temporary); check that the directory exists and is writable")
        }
        self.handle = handle
        self.target = path
        self.temporary = temporary
    }

    public func write(_ text: String) async throws {
        // One copy of the contiguous UTF-8, not a byte-by-byte append of the view.
        var text = text
        text.withUTF8 { buffer.append($0) }
        if buffer.count >= 1 << 16 { try await flush() }
    }

    private func flush() async throws {
        guard !buffer.isEmpty else { return }
        let (handle, bytes, target) = (handle, buffer, target)
        try await writes.run {
            do { try handle.write(contentsOf: bytes) } catch {
                throw ReportFileError(path: target ?? "standard output", detail: "\(error)")
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Writes what is buffered; for a file, syncs it and renames it over the target.
    public func finish() async throws {
        try await flush()
        guard let target, let temporary else { return }
        let handle = handle
        try await writes.run {
            try handle.synchronize()
            try handle.close()
            guard rename(temporary, target) == 0 else {
                let detail = String(cString: strerror(errno))
                unlink(temporary)
                throw ReportFileError(path: target, detail: detail)
            }
        }
    }

    /// Removes the temporary file of an unfinished report.
    public func discard() async {
        guard let temporary else { return }
        let handle = handle
        _ = try? await writes.run {
            try? handle.close()
            unlink(temporary)
        }
    }
}
