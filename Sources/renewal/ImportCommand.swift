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

/// Parses and checks one import line. Messages name the problem and the fix, never the receipt.
enum ImportLine {
    enum Parsed {
        case skip
        /// A good line; a `signedTransaction` still has to pass verification (`StoreKitImport`).
        case success(ReceiptImport, signedTransaction: String?)
        case failure(String)
    }

    /// The members a line is read for.
    private static let keys = JSONKeys([
        "user_id", "latest_receipt", "product_id", "original_transaction_id", "signed_transaction",
        "app_account_token", "bundle_id",
    ])

    static func parse(_ line: ImportLineBytes) -> Parsed {
        let bytes: Data
        switch line {
        case .tooLong(let length):
            return .failure(
                """
                the line is \(length) bytes, over the \(LineReader.maximumLineBytes) allowed; is this a JSON \
                Lines file?
                """
            )
        case .line(let data): bytes = data
        }
        if bytes.allSatisfy(isWhitespace) { return .skip }
        let shape = """
            each line must be {"user_id": "...", "latest_receipt": "..."}, or name the subscription by \
            "original_transaction_id" or "signed_transaction" instead of (or as well as) the receipt
            """
        guard let document = try? JSONDocument(bytes: Array(bytes)) else {
            if String(validating: bytes, as: UTF8.self) == nil {
                return .failure("the line is not UTF-8; export the file as UTF-8 JSON Lines")
            }
            return .failure("not valid JSON (cut short, or nested too deep?); \(shape)")
        }
        // A name given twice: the last value counts, as most JSON readers do.
        guard document.root.kind == .object, let fields = try? document.root.members(keys, lastWins: true) else {
            return .failure("not a JSON object; \(shape)")
        }
        let userID: String
        switch fields[0]?.kind {
        case .string?:
            guard let text = fields[0]?.string else {
                return .failure("user_id is not UTF-8; export the file as UTF-8 JSON Lines")
            }
            guard text.utf8.contains(where: { !isWhitespace($0) }) else {
                return .failure("user_id is missing or empty; give the app's user id as a string")
            }
            if let problem = TextField.userID.problem(with: text) {
                return .failure("user_id \(problem); give the app's user id as it stores it")
            }
            userID = text
        case .true?, .false?: return .failure("user_id must be a string or an integer, not a boolean")
        case .number?:
            guard let number = fields[0]?.integer else {
                return .failure("user_id must be a string or an integer, not \(fields[0]?.numberText ?? "a fraction")")
            }
            userID = String(number)
        default: return .failure("user_id is missing or empty; give the app's user id as a string")
        }
        var receipt: String?
        if let value = fields[1], value.kind != .null {
            guard value.kind == .string, let rawReceipt = value.string else {
                return .failure(
                    "latest_receipt is not a string; give the base64 receipt the app stored (user \(userID))")
            }
            // Receipts pasted from a terminal or a wrapped export carry line breaks: those go.
            let cleaned =
                isBase64(rawReceipt)
                ? rawReceipt : String(decoding: rawReceipt.utf8.filter { !isWhitespace($0) }, as: UTF8.self)
            guard !cleaned.isEmpty else { return .failure("latest_receipt is empty (user \(userID))") }
            guard isBase64(cleaned) else {
                return .failure(
                    "latest_receipt is not valid base64 (user \(userID)); export the receipt exactly as Apple gave it")
            }
            receipt = cleaned
        }
        var productID: String?
        if let value = fields[2], value.kind != .null {
            guard value.kind == .string, let text = value.string else {
                return .failure("product_id must be a string (user \(userID))")
            }
            if let problem = TextField.productID.problem(with: text) {
                return .failure(
                    "product_id \(problem) (user \(userID)); give the product id from App Store Connect, or leave it out"
                )
            }
            productID = text.isEmpty ? nil : text
        }
        var transactionID: String?
        if let value = fields[3], value.kind != .null {
            switch value.kind {
            case .string: transactionID = value.string
            case .number: transactionID = value.integer.map(String.init)
            default: break
            }
            guard let id = transactionID, isTransactionID(id) else {
                return .failure(
                    """
                    original_transaction_id must be Apple's transaction id, digits only, e.g. "2000000123456789" \
                    (user \(userID)); StoreKit 2 gives it as Transaction.originalID
                    """)
            }
        }
        var signedTransaction: String?
        if let value = fields[4], value.kind != .null {
            guard value.kind == .string, let text = value.string, isCompactJWS(text) else {
                return .failure(
                    """
                    signed_transaction is not a signed transaction (three base64url parts joined by dots) \
                    (user \(userID)); give StoreKit 2's Transaction.jwsRepresentation as the app received it
                    """)
            }
            signedTransaction = text
        }
        var appAccountToken: String?
        if let value = fields[5], value.kind != .null {
            guard value.kind == .string, let text = value.string, let uuid = UUID(uuidString: text) else {
                return .failure(
                    """
                    app_account_token must be a UUID such as "6d1b1e9c-3f5e-4b0a-9a57-0c1c1c1c1c1c" \
                    (user \(userID)); give the appAccountToken the app set at purchase
                    """)
            }
            appAccountToken = uuid.uuidString.lowercased()
        }
        var bundleID: String?
        if let value = fields[6], value.kind != .null {
            guard value.kind == .string, let text = value.string, isBundleID(text) else {
                return .failure(
                    """
                    bundle_id must be the app's bundle id, such as "com.example.app" (letters, digits, dots and \
                    hyphens) (user \(userID)); leave it out to learn it from Apple's first answer
                    """)
            }
            bundleID = text
        }
        guard receipt != nil || transactionID != nil || signedTransaction != nil else {
            return .failure(
                """
                the line names no subscription (user \(userID)): give latest_receipt (the base64 app receipt), \
                original_transaction_id or signed_transaction
                """)
        }
        return .success(
            ReceiptImport(
                userID: userID, latestReceipt: receipt, productID: productID, originalTransactionID: transactionID,
                appAccountToken: appAccountToken, bundleID: bundleID),
            signedTransaction: signedTransaction)
    }

    /// A bundle id as App Store Connect allows it: letters, digits, dots and hyphens, at most 155.
    static func isBundleID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 155
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2E || byte == 0x2D
            }
    }

    /// Apple's transaction ids are decimal digits (16 today); 1 to 32 are accepted.
    static func isTransactionID(_ text: String) -> Bool {
        (1...32).contains(text.utf8.count) && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// Three non-empty base64url parts joined by dots, under 64 KiB (a signed transaction is about 3 KiB).
    static func isCompactJWS(_ text: String) -> Bool {
        guard text.utf8.count < 64 << 10 else { return false }
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count == 3
            && parts.allSatisfy { part in
                !part.isEmpty
                    && part.allSatisfy { byte in
                        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                    }
            }
    }

    /// Space, tab, line feed, vertical tab, form feed, carriage return.
    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    /// Standard base64 with padding, as `Data(base64Encoded:)` takes it: whole groups of four, the
    /// alphabet, and at most two `=` at the very end. Checked without decoding.
    static func isBase64(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard bytes.count % 4 == 0 else { return false }
            var end = bytes.count
            for _ in 0..<2 where end > 0 && bytes[end - 1] == UInt8(ascii: "=") { end -= 1 }
            // Every byte is tested, without branching on the answer, so the compiler can test many
            // at once: a receipt is kilobytes, and a byte at a time took a fifth of an import's CPU.
            var allDigits = true
            for byte in UnsafeBufferPointer(rebasing: bytes[0..<end]) {
                let letter = (byte | 0x20) &- UInt8(ascii: "a") < 26
                let digit = byte &- UInt8(ascii: "0") < 10
                allDigits = allDigits && (letter || digit || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/"))
            }
            return allDigits
        } ?? (Data(base64Encoded: text) != nil)
    }
}

/// One line as read: its bytes (not yet known to be UTF-8), or only its length when it is too long to keep.
enum ImportLineBytes {
    case line(Data)
    case tooLong(Int)
}

/// Reads newline-separated lines from a file handle in chunks (flat memory). A line longer than
/// `maximumLineBytes` is skipped to its end and reported by length, so one bad line never stops the import.
/// The reads run on a thread of their own: a slow disk or a pipe that waits for its writer never
/// holds one of the event loops the program's tasks run on.
struct LineReader {
    let handle: FileHandle
    private let reads = BlockingCallQueue(label: "renewal.import-read")
    static let maximumLineBytes = 16 << 20
    /// Bytes read and not yet returned, from `start`; the buffer is compacted before each read, so
    /// a long line is appended to, never copied again.
    private var buffer = Data()
    private var start = 0
    /// Where to look for the next newline: bytes before it have none.
    private var scanned = 0
    private var finished = false
    /// Bytes of the current over-long line already thrown away.
    private var skipped = 0

    init(handle: FileHandle) {
        self.handle = handle
    }

    mutating func next() async throws -> ImportLineBytes? {
        while true {
            let found = buffer.withUnsafeBytes { bytes -> Int? in
                guard scanned < bytes.count, let base = bytes.baseAddress,
                    let hit = memchr(base + scanned, 0x0A, bytes.count - scanned)
                else { return nil }
                return base.distance(to: UnsafeRawPointer(hit))
            }
            if let newline = found {
                defer {
                    start = newline + 1
                    scanned = start
                    skipped = 0
                }
                return skipped > 0 ? .tooLong(skipped + newline - start) : .line(buffer.subdata(in: start..<newline))
            }
            scanned = buffer.count
            if finished {
                defer {
                    start = buffer.count
                    scanned = start
                    skipped = 0
                }
                if skipped > 0 { return .tooLong(skipped + buffer.count - start) }
                return start < buffer.count ? .line(buffer.subdata(in: start..<buffer.count)) : nil
            }
            if skipped > 0 || buffer.count - start > Self.maximumLineBytes {
                // Over the limit: drop what is held of this line and read on to its end.
                skipped += buffer.count - start
                buffer.removeAll(keepingCapacity: true)
            } else if start > 0 {
                buffer.removeSubrange(0..<start)
            }
            start = 0
            scanned = buffer.count
            let handle = handle
            let chunk = try await reads.run { try handle.read(upToCount: 1 << 20) ?? Data() }
            if chunk.isEmpty {
                finished = true
            } else {
                buffer.append(chunk)
            }
        }
    }
}
