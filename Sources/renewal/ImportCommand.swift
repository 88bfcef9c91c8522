import ArgumentParser
import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import RenewalCore
import RenewalStorage

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load stored receipts from JSON Lines; each becomes due now.",
        discussion: """
            One JSON object per line: {"user_id": "...", "latest_receipt": "<base64>", "product_id": "..."} \
            (product_id optional). StoreKit 2 apps give "original_transaction_id" (Transaction.originalID) or \
            "signed_transaction" (Transaction.jwsRepresentation, verified here) instead of the receipt, and \
            optionally "app_account_token". Upserts by user_id: a new receipt or id replaces the stored one, \
            the same just becomes due now. A bad line is reported with its line number and skipped; the rest \
            is imported. Exit 0 when every line was imported, 3 when some were skipped.
            """ + EnvironmentHelp.text(.database))

    @Argument(help: ArgumentHelp("JSON Lines file, or - for standard input.", valueName: "file"))
    var file: String

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    @Option(name: .long, help: "Lines written per transaction.")
    var batchSize: Int = 500

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            The app's bundle id: a signed_transaction for another bundle is a bad line. Env: APPSTORE_BUNDLE_ID. \
            Default: any bundle.
            """,
            valueName: "id"))
    var bundleID: String?

    func validate() throws {
        guard batchSize >= 1 else { throw ValidationError("--batch-size must be at least 1.") }
        if file != "-", !FileManager.default.isReadableFile(atPath: file) {
            throw ValidationError("Cannot read \(file). Give a readable JSON Lines file, or - for standard input.")
        }
    }

    func run() async throws {
        try await ExitMapping.run {
            _ = logging.makeLogger()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            let handle = file == "-" ? FileHandle.standardInput : FileHandle(forReadingAtPath: file)
            guard let handle else { throw ValidationError("Cannot read \(file).") }
            var reader = LineReader(handle: handle)
            var batch: [(line: Int, item: ReceiptImport)] = []
            var tally: [ReceiptImportOutcome: Int] = [:]
            var rejected = 0
            var lineNumber = 0
            let now = Date()
            // Made on the first signed transaction, so a receipt-only file never needs the roots.
            var signed: SignedTransactionImport?
            // One batch is written while the next is read and parsed, so the database and this
            // process work at the same time; batches are still written one after another, in order.
            var writing: Task<(refused: Int, tally: [ReceiptImportOutcome: Int]), any Error>?
            func finishWriting() async throws {
                guard let written = try await writing?.value else { return }
                rejected += written.refused
                tally.merge(written.tally, uniquingKeysWith: +)
                writing = nil
            }
            func write(_ full: [(line: Int, item: ReceiptImport)]) async throws {
                try await finishWriting()
                writing = Task {
                    var counted: [ReceiptImportOutcome: Int] = [:]
                    let refused = try await Self.store(full, in: store, now: now, tally: &counted)
                    return (refused, counted)
                }
            }
            do {
                while let line = try await reader.next() {
                    lineNumber += 1
                    var parsed = ImportLine.parse(line)
                    if case .success(let item, let jws?) = parsed {
                        if signed == nil {
                            signed = try SignedTransactionImport(
                                bundleID: bundleID ?? Environment.value("APPSTORE_BUNDLE_ID"))
                        }
                        switch await signed?.complete(item, signedTransaction: jws) {
                        case .success(let completed)?: parsed = .success(completed, signedTransaction: nil)
                        case .failure(let problem)?: parsed = .failure(problem.description)
                        case nil: break
                        }
                    }
                    switch parsed {
                    case .skip: continue
                    case .failure(let problem):
                        rejected += 1
                        FileHandle.standardError.write(Data("renewal import: line \(lineNumber): \(problem)\n".utf8))
                    case .success(let item, _):
                        batch.append((lineNumber, item))
                        if batch.count >= batchSize {
                            try await write(batch)
                            batch.removeAll(keepingCapacity: true)
                        }
                    }
                }
                if !batch.isEmpty { try await write(batch) }
                try await finishWriting()
            } catch {
                // A batch already handed over is written as it would have been before the error.
                _ = try? await writing?.value
                throw error
            }
            print(
                """
                Imported: \(tally[.inserted, default: 0]) new, \(tally[.replaced, default: 0]) replaced, \
                \(tally[.unchanged, default: 0]) unchanged, \(rejected) rejected.
                """
            )
            if rejected > 0 { throw ExitCode(3) }
        }
    }

    /// Writes a batch in one transaction and counts each line's outcome; returns how many lines were
    /// refused (a user whose stored receipt is another app's), each named on standard error.
    private static func store(
        _ batch: [(line: Int, item: ReceiptImport)], in store: any SubscriptionStore, now: Date,
        tally: inout [ReceiptImportOutcome: Int]
    ) async throws -> Int {
        var refused = 0
        for (entry, outcome) in zip(batch, try await store.importReceipts(batch.map(\.item), now: now)) {
            guard outcome == .otherApp else {
                tally[outcome, default: 0] += 1
                continue
            }
            refused += 1
            FileHandle.standardError.write(
                Data(
                    """
                    renewal import: line \(entry.line): user \(entry.item.userID) already has a receipt of another app \
                    than \(entry.item.bundleID ?? ""); nothing was changed. A user id holds one receipt: import each \
                    app's customers under user ids of their own (for example mac:\(entry.item.userID)).\n
                    """.utf8))
        }
        return refused
    }
}
