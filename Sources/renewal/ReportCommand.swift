import ArgumentParser
import Foundation
import RenewalCore
import RenewalJob
import RenewalReports
import RenewalStorage

struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Render a stored run (default: the last) or the runs of a time range from the database.",
        discussion: """
            Formats: json (the object --report writes; an array of them for --since/--until), jsonl (one \
            change per line with run_id and occurred_at), csv (the changes, with a header), table (a summary \
            for a terminal), html (one self-contained page with inline SVG charts: changes by kind, entitled \
            subscribers by product over the last 30 runs, failures by reason, and the tables behind them). \
            --since/--until take 2026-11-01, 2026-11-01T06:00:00Z, or an age such as 36h or 7d. Changes \
            recorded between runs (claims by renewal claim or by an import line) are listed after the run \
            they followed (json: changes_outside_runs; jsonl and csv: run_id empty). Rows are read a page at \
            a time, so any run size renders in flat memory.
            """ + EnvironmentHelp.text(.database))

    @Option(
        name: .long,
        help: ArgumentHelp("The run to render (a run_id from the report or the runs table).", valueName: "id"))
    var run: String?

    @Option(name: .long, help: ArgumentHelp("Every run that started at or after this time.", valueName: "time"))
    var since: String?

    @Option(name: .long, help: ArgumentHelp("Every run that started before this time.", valueName: "time"))
    var until: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "json, jsonl, csv, table or html. Default: table on a terminal, json otherwise.", valueName: "format"))
    var format: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write here (atomically: a temporary file renamed into place) instead of standard output.",
            valueName: "file"))
    var output: String?

    @Option(
        name: .customLong("app"),
        help: ArgumentHelp(
            "Only this app's changes and failures, by bundle id (several apps in one database).",
            valueName: "bundle-id"))
    var app: String?

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if let format, ReportFormat(rawValue: format) == nil {
            throw ValidationError(
                "--format must be one of: \(ReportFormat.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        if run != nil, since != nil || until != nil {
            throw ValidationError("Give either --run or --since/--until, not both.")
        }
        for (flag, value) in [("--since", since), ("--until", until)] {
            if let value, ReportTime.parse(value, now: Date()) == nil {
                throw ValidationError(
                    """
                    \(flag) \(value) is not a time; give 2026-11-01, 2026-11-01T06:00:00Z, or an age such as 36h \
                    or 7d.
                    """
                )
            }
        }
    }

    func run() async throws {
        try await ExitMapping.run {
            _ = logging.makeLogger()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            let history = store
            let now = Date()
            let selection: ReportSelection
            if let run {
                selection = .run(run)
            } else if since != nil || until != nil {
                selection = .range(
                    since: since.flatMap { ReportTime.parse($0, now: now) },
                    until: until.flatMap { ReportTime.parse($0, now: now) })
            } else {
                selection = .last
            }
            let chosen =
                format.flatMap(ReportFormat.init(rawValue:))
                ?? (output == nil && isatty(STDOUT_FILENO) == 1 ? .table : .json)
            let sink = try output.map { try ReportOutput(path: $0) } ?? ReportOutput()
            do {
                try await StoredReport(store: history, app: app).render(selection, format: chosen, to: sink)
                try await sink.finish()
            } catch let error as ReportSelectionError {
                await sink.discard()
                throw ValidationError("Nothing to report: \(error.description).")
            } catch {
                await sink.discard()
                throw error
            }
            if let output { FileHandle.standardError.write(Data("renewal: report written to \(output)\n".utf8)) }
        }
    }
}

/// `--since`/`--until` values: a UTC day, an RFC 3339 time, or an age before now.
enum ReportTime {
    static func parse(_ text: String, now: Date) -> Date? {
        if let date = Timestamp.date(text) { return date }
        if let date = try? Date(text + "T00:00:00Z", strategy: .iso8601) { return date }
        guard let unit = text.last, let amount = Double(text.dropLast()), amount >= 0 else { return nil }
        let seconds: Double
        switch unit {
        case "m": seconds = 60
        case "h": seconds = 3_600
        case "d": seconds = 86_400
        default: return nil
        }
        return now.addingTimeInterval(-amount * seconds)
    }
}
