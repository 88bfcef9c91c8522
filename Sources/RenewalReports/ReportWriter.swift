import Foundation
import RenewalCore
import RenewalStorage

/// Streams the `--report` JSON object to disk as the run goes, so memory stays flat however many
/// changes a run has. `changes` go straight into the file; `failures` and `conflicts` are spooled to
/// side files and appended at the end; the finished file replaces the target atomically (rename).
///
/// The run's tasks execute on NIO's event loops, which must never block, so every file call (open,
/// write, copy, `fsync`, rename) runs on the writer's own thread (`BlockingCallQueue`). Encoded
/// elements gather in memory up to `flushBytes` per file and go to disk in one call: memory stays
/// bounded and a slow disk delays the run only by whole flushes.
package final class ReportWriter {
    /// How much encoded report a file gathers before it is written out.
    static let flushBytes = 64 * 1024

    private let path: String
    private let temporaryPath: String
    private let files = BlockingCallQueue(label: "renewal.report")
    private let main: Spool
    private let failures: Spool
    private let conflicts: Spool
    private var firstChange = true
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Opens the report for writing. Throws `ReportFileError` naming the path when it cannot.
    package init(path: String, runID: String, command: String, dryRun: Bool, startedAt: Date) async throws {
        self.path = path
        let temporaryPath = path + ".tmp-\(ProcessInfo.processInfo.processIdentifier)"
        self.temporaryPath = temporaryPath
        (main, failures, conflicts) = try await files.run {
            (
                try Spool(creating: temporaryPath, reportPath: path),
                try Spool(creating: temporaryPath + "-failures", reportPath: path),
                try Spool(creating: temporaryPath + "-conflicts", reportPath: path)
            )
        }
        main.add(try ReportJSON.head(runID: runID, command: command, dryRun: dryRun, startedAt: startedAt))
    }

    package func append(
        changes: [SubscriptionEvent], userID: String, bundleID: String?, ownership: [String: String],
        source: CheckSource?
    ) async throws {
        for event in changes {
            let change = ReportChange(
                userID: userID, event: event,
                ownershipType: event.originalTransactionID.flatMap { ownership[$0] }, source: source?.rawValue,
                bundleID: bundleID)
            main.add(ReportJSON.separator(first: firstChange))
            main.add(try encoder.encode(change))
            firstChange = false
        }
        try await flush(main)
    }

    package func append(failure: CheckFailure, userID: String, receiptID: Int64, bundleID: String?) async throws {
        failures.addElement(
            try encoder.encode(
                ReportFailure(userID: userID, receiptID: receiptID, failure: failure, bundleID: bundleID)))
        try await flush(failures)
    }

    package func append(conflict: OwnershipConflict) async throws {
        conflicts.addElement(try encoder.encode(ReportConflict(conflict: conflict)))
        try await flush(conflicts)
    }

    /// Writes the spooled arrays, the counts and the end of the object, then renames into place.
    package func finish(finishedAt: Date, status: RunStatus, exitCode: Int, counts: RenewalCounts) async throws {
        let tail = try ReportJSON.tail(finishedAt: finishedAt, status: status, exitCode: exitCode, counts: counts)
        let (main, failures, conflicts, path, temporaryPath) = (main, failures, conflicts, path, temporaryPath)
        try await files.run {
            do {
                main.add(ReportJSON.afterChanges)
                try failures.copy(into: main)
                main.add(ReportJSON.afterFailures)
                try conflicts.copy(into: main)
                main.add(tail + "\n")
                try main.write()
                try main.handle.synchronize()
                try main.handle.close()
            } catch let error as ReportFileError {
                throw error
            } catch {
                throw ReportFileError(path: path, detail: "\(error)")
            }
            guard rename(temporaryPath, path) == 0 else {
                throw ReportFileError(path: path, detail: String(cString: strerror(errno)))
            }
        }
    }

    /// Removes temporary files if the run ends without `finish`.
    package func discard() async {
        let (main, failures, conflicts) = (main, failures, conflicts)
        _ = try? await files.run {
            main.remove()
            failures.remove()
            conflicts.remove()
        }
    }

    /// Writes what `spool` gathered once it reaches `flushBytes`, on the writer's thread.
    private func flush(_ spool: Spool) async throws {
        guard spool.pending.count >= Self.flushBytes else { return }
        let path = path
        try await files.run {
            do { try spool.write() } catch { throw ReportFileError(path: path, detail: "\(error)") }
        }
    }

    /// One file of the report and the bytes gathered for it. `addElement` keeps an array's elements
    /// comma-separated (the side files hold the `failures` and `conflicts` arrays).
    ///
    /// Unchecked `Sendable`: it is used by the run's task or, while that task waits, by the writer's
    /// thread, never by both at once.
    private final class Spool: @unchecked Sendable {
        let handle: FileHandle
        let path: String
        private(set) var pending = Data()
        private var count = 0

        /// Creates (or empties) `file`; called on the writer's thread.
        init(creating file: String, reportPath: String) throws {
            guard OwnerOnlyFile.create(atPath: file, truncate: true),
                let handle = FileHandle(forUpdatingAtPath: file)
            else {
                throw ReportFileError(
                    path: reportPath,
                    detail: "cannot create \(file); check that the directory exists and is writable")
            }
            self.handle = handle
            self.path = file
        }

        func add(_ text: String) {
            var text = text
            text.withUTF8 { pending.append($0) }
        }
        func add(_ data: Data) { pending.append(data) }

        func addElement(_ element: Data) {
            add(ReportJSON.separator(first: count == 0))
            add(element)
            count += 1
        }

        /// Writes the gathered bytes.
        func write() throws {
            guard !pending.isEmpty else { return }
            try handle.write(contentsOf: pending)
            pending.removeAll(keepingCapacity: true)
        }

        /// Appends this file's content (written and gathered) to `target`'s, then removes this file.
        func copy(into target: Spool) throws {
            try write()
            try target.write()
            try handle.seek(toOffset: 0)
            while let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty {
                try target.handle.write(contentsOf: chunk)
            }
            remove()
        }

        func remove() {
            try? handle.close()
            unlink(path)
        }
    }
}
