import ArgumentParser
import Foundation
import RenewalStorage

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load stored receipts from JSON Lines; each becomes due now.",
        discussion: """
            One JSON object per line: {"user_id": "...", "latest_receipt": "<base64>", "product_id": "..."} \
            (product_id optional). Upserts by user_id: a new receipt replaces the stored one, the same receipt \
            just becomes due now. A bad line is reported with its line number and skipped; the rest is \
            imported. Exit 0 when every line was imported, 3 when some were skipped.
            """)

    @Argument(help: ArgumentHelp("JSON Lines file, or - for standard input.", valueName: "file"))
    var file: String

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    @Option(name: .long, help: "Lines written per transaction.")
    var batchSize: Int = 500

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
            var batch: [ReceiptImport] = []
            var tally: [ReceiptImportOutcome: Int] = [:]
            var rejected = 0
            var lineNumber = 0
            let now = Date()
            while let line = try reader.next() {
                lineNumber += 1
                switch ImportLine.parse(line) {
                case .skip: continue
                case .failure(let problem):
                    rejected += 1
                    FileHandle.standardError.write(Data("renewal import: line \(lineNumber): \(problem)\n".utf8))
                case .success(let item):
                    batch.append(item)
                    if batch.count >= batchSize {
                        for outcome in try await store.importReceipts(batch, now: now) { tally[outcome, default: 0] += 1 }
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            }
            if !batch.isEmpty {
                for outcome in try await store.importReceipts(batch, now: now) { tally[outcome, default: 0] += 1 }
            }
            print("Imported: \(tally[.inserted, default: 0]) new, \(tally[.replaced, default: 0]) replaced, \(tally[.unchanged, default: 0]) unchanged, \(rejected) rejected.")
            if rejected > 0 { throw ExitCode(3) }
        }
    }
}

/// Parses and checks one import line. Messages name the problem and the fix, never the receipt.
enum ImportLine {
    enum Parsed {
        case skip
        case success(ReceiptImport)
        case failure(String)
    }

    static func parse(_ line: Substring) -> Parsed {
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { return .skip }
        guard let object = try? JSONSerialization.jsonObject(with: Data(trimmed.utf8)) as? [String: Any] else {
            return .failure("not a JSON object; each line must be {\"user_id\": \"...\", \"latest_receipt\": \"...\"}")
        }
        let userID: String
        switch object["user_id"] {
        case let text as String where !text.trimmingCharacters(in: .whitespaces).isEmpty: userID = text
        case is Bool: return .failure("user_id must be a string or an integer, not a boolean")
        case let number as Int: userID = String(number)
        default: return .failure("user_id is missing or empty; give the app's user id as a string")
        }
        guard let rawReceipt = object["latest_receipt"] as? String else {
            return .failure("latest_receipt is missing or not a string; give the base64 receipt the app stored (user \(userID))")
        }
        let receipt = rawReceipt.filter { !$0.isWhitespace }
        guard !receipt.isEmpty else { return .failure("latest_receipt is empty (user \(userID))") }
        guard Data(base64Encoded: receipt) != nil else {
            return .failure("latest_receipt is not valid base64 (user \(userID)); export the receipt exactly as Apple gave it")
        }
        var productID: String?
        if let value = object["product_id"], !(value is NSNull) {
            guard let text = value as? String else { return .failure("product_id must be a string (user \(userID))") }
            productID = text.isEmpty ? nil : text
        }
        return .success(ReceiptImport(userID: userID, latestReceipt: receipt, productID: productID))
    }
}

/// Reads newline-separated lines from a file handle in chunks (flat memory), capping line length.
struct LineReader {
    let handle: FileHandle
    static let maximumLineBytes = 16 << 20
    private var buffer = Data()
    private var start = 0
    private var finished = false

    init(handle: FileHandle) {
        self.handle = handle
    }

    mutating func next() throws -> Substring? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[start..<newline], as: UTF8.self)
                start = newline + 1
                return Substring(line)
            }
            if finished {
                guard start < buffer.endIndex else { return nil }
                defer { start = buffer.endIndex }
                return Substring(String(decoding: buffer[start...], as: UTF8.self))
            }
            guard buffer.endIndex - start <= Self.maximumLineBytes else {
                throw ValidationError("A line is longer than \(Self.maximumLineBytes) bytes; is this a JSON Lines file?")
            }
            let chunk = try handle.read(upToCount: 1 << 16) ?? Data()
            if chunk.isEmpty {
                finished = true
            } else {
                buffer = Data(buffer[start...]) + chunk
                start = buffer.startIndex
            }
        }
    }
}
