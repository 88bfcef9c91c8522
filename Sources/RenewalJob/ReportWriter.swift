import Foundation
import RenewalCore
import RenewalStorage

/// Streams the `--report` JSON object to disk as the run goes, so memory stays flat however many
/// changes a run has. `changes` go straight into the file; `failures` and `conflicts` are spooled to
/// side files and appended at the end; the finished file replaces the target atomically (rename).
final class ReportWriter {
    private let path: String
    private let temporaryPath: String
    private let main: FileHandle
    private let failures: Spool
    private let conflicts: Spool
    private var firstChange = true
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Opens the report for writing. Throws `RenewalRunError.report` naming the path when it cannot.
    init(path: String, runID: String, command: String, dryRun: Bool, startedAt: Date) throws {
        self.path = path
        let suffix = ".tmp-\(ProcessInfo.processInfo.processIdentifier)"
        temporaryPath = path + suffix
        main = try Self.create(temporaryPath, reportPath: path)
        failures = Spool(
            handle: try Self.create(path + suffix + "-failures", reportPath: path), path: path + suffix + "-failures")
        conflicts = Spool(
            handle: try Self.create(path + suffix + "-conflicts", reportPath: path), path: path + suffix + "-conflicts")
        try write(try ReportJSON.head(runID: runID, command: command, dryRun: dryRun, startedAt: startedAt))
    }

    func append(changes: [SubscriptionEvent], userID: String, ownership: [String: String], source: CheckSource?) throws
    {
        for event in changes {
            let change = ReportChange(
                userID: userID, event: event,
                ownershipType: event.originalTransactionID.flatMap { ownership[$0] }, source: source?.rawValue)
            try write(
                ReportJSON.separator(first: firstChange) + String(decoding: encoder.encode(change), as: UTF8.self))
            firstChange = false
        }
    }

    func append(failure: CheckFailure, userID: String, receiptID: Int64) throws {
        try failures.append(encoder.encode(ReportFailure(userID: userID, receiptID: receiptID, failure: failure)))
    }

    func append(conflict: OwnershipConflict) throws {
        try conflicts.append(encoder.encode(ReportConflict(conflict: conflict)))
    }

    /// Writes the spooled arrays, the counts and the end of the object, then renames into place.
    func finish(finishedAt: Date, status: RunStatus, exitCode: Int, counts: RenewalCounts) throws {
        try write(ReportJSON.afterChanges)
        try failures.copy(into: main)
        try write(ReportJSON.afterFailures)
        try conflicts.copy(into: main)
        try write(
            try ReportJSON.tail(finishedAt: finishedAt, status: status, exitCode: exitCode, counts: counts) + "\n")
        try main.synchronize()
        try main.close()
        guard rename(temporaryPath, path) == 0 else {
            throw RenewalRunError.report(path: path, detail: String(cString: strerror(errno)))
        }
    }

    /// Removes temporary files if the run ends without `finish`.
    func discard() {
        try? main.close()
        unlink(temporaryPath)
        failures.remove()
        conflicts.remove()
    }

    private func write(_ text: String) throws {
        do { try main.write(contentsOf: Data(text.utf8)) } catch {
            throw RenewalRunError.report(path: path, detail: "\(error)")
        }
    }

    private static func create(_ file: String, reportPath: String) throws -> FileHandle {
        guard FileManager.default.createFile(atPath: file, contents: nil),
            let handle = FileHandle(forUpdatingAtPath: file)
        else {
            throw RenewalRunError.report(
                path: reportPath, detail: "cannot create \(file); check that the directory exists and is writable")
        }
        return handle
    }

    /// A side file holding one array's elements, comma-separated.
    private final class Spool {
        let handle: FileHandle
        let path: String
        var count = 0

        init(handle: FileHandle, path: String) {
            self.handle = handle
            self.path = path
        }

        func append(_ element: Data) throws {
            try handle.write(contentsOf: Data(ReportJSON.separator(first: count == 0).utf8) + element)
            count += 1
        }

        func copy(into target: FileHandle) throws {
            try handle.seek(toOffset: 0)
            while let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty {
                try target.write(contentsOf: chunk)
            }
            remove()
        }

        func remove() {
            try? handle.close()
            unlink(path)
        }
    }
}
