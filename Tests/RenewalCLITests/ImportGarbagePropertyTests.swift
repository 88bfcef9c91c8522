import Foundation
import PropertyBased
import RenewalCore
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

/// One generated import line and what `renewal import` must do with it.
struct ImportCase: Sendable, CustomStringConvertible {
    enum Expectation: Sendable, Equatable {
        /// Stored under this user with exactly this receipt.
        case stored(user: String, receipt: String)
        /// Reported on stderr with its line number; nothing stored.
        case rejected
        /// A blank line: neither stored nor reported.
        case skipped
        /// Either is right (a duplicate key: JSON leaves the winner open), as long as it is one of them.
        case either(users: [String], receipt: String)
    }

    enum Kind: Int, CaseIterable, Sendable {
        case valid, numericUser, truncated, notUTF8, retyped, missing, deeplyNested, duplicateKey, notObject, notBase64,
            blank, tooLong
    }

    var bytes: Data
    var expectation: Expectation
    var detail: String
    var description: String { detail }

    static let nonUTF8: [[UInt8]] = [[0xFF], [0xC3, 0x28], [0x80], [0xED, 0xA0, 0x80], [0xC0, 0xAF]]
    static let wrongValues = ["true", "false", "null", "[]", "{}", "[\"a\"]", "{\"a\":1}", "1.5", "-0.0", "1e400"]

    /// A line of `kind`; `id` makes its user unique, `choice` steers the variant.
    static func make(kind: Kind, id: String, choice: Int) -> ImportCase {
        let user = "user-\(id)"
        // A real-looking receipt: base64 of bytes that differ per line.
        let receipt = Data((0..<(48 + choice % 80)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ id.hashValue) })
            .base64EncodedString()
        let valid = #"{"user_id":"\#(user)","latest_receipt":"\#(receipt)","product_id":"com.example.pro.monthly"}"#
        switch kind {
        case .valid:
            return ImportCase(
                bytes: Data(valid.utf8), expectation: .stored(user: user, receipt: receipt), detail: "valid")
        case .numericUser:
            let number = 9_000_000 + abs(id.hashValue % 1_000_000_000)
            return ImportCase(
                bytes: Data(#"{"user_id":\#(number),"latest_receipt":"\#(receipt)"}"#.utf8),
                expectation: .stored(user: String(number), receipt: receipt), detail: "numeric user id")
        case .truncated:
            let cut = 1 + choice % (valid.utf8.count - 1)
            return ImportCase(bytes: Data(valid.utf8.prefix(cut)), expectation: .rejected, detail: "cut at byte \(cut)")
        case .notUTF8:
            let bad = nonUTF8[choice % nonUTF8.count]
            // Inside the user id (a lenient reader would store a mangled id) or the receipt.
            let field = choice % 2 == 0 ? "user-" : "\"latest_receipt\":\""
            var bytes = Data(valid.utf8)
            if let range = bytes.firstRange(of: Data(field.utf8)) {
                bytes.insert(contentsOf: bad, at: range.upperBound)
            }
            return ImportCase(bytes: bytes, expectation: .rejected, detail: "bytes \(bad) after \(field)")
        case .retyped:
            let value = wrongValues[choice % wrongValues.count]
            let line =
                choice % 3 == 0
                ? #"{"user_id":\#(value),"latest_receipt":"\#(receipt)"}"#
                : choice % 3 == 1
                    ? #"{"user_id":"\#(user)","latest_receipt":\#(value)}"#
                    : #"{"user_id":"\#(user)","latest_receipt":"\#(receipt)","product_id":\#(value == "null" ? "1" : value)}"#
            return ImportCase(
                bytes: Data(line.utf8), expectation: .rejected, detail: "a field = \(value) (variant \(choice % 3))")
        case .missing:
            let line = choice % 2 == 0 ? #"{"latest_receipt":"\#(receipt)"}"# : #"{"user_id":"\#(user)"}"#
            return ImportCase(bytes: Data(line.utf8), expectation: .rejected, detail: "a required field missing")
        case .deeplyNested:
            let depth = [600, 20_000, 200_000][choice % 3]
            let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let line = #"{"user_id":"\#(user)","latest_receipt":"\#(receipt)","extra":\#(nested)}"#
            return ImportCase(
                bytes: Data(line.utf8), expectation: .rejected, detail: "an extra field nested \(depth) deep")
        case .duplicateKey:
            let line = #"{"user_id":"\#(user)-a","latest_receipt":"\#(receipt)","user_id":"\#(user)-b"}"#
            return ImportCase(
                bytes: Data(line.utf8), expectation: .either(users: [user + "-a", user + "-b"], receipt: receipt),
                detail: "user_id twice")
        case .notObject:
            let line = ["[]", "1", "\"text\"", "null", "[{\"user_id\":\"x\"}]", "{", "}"][choice % 7]
            return ImportCase(bytes: Data(line.utf8), expectation: .rejected, detail: "not an object: \(line)")
        case .notBase64:
            // One byte outside the alphabet in an otherwise good receipt: the neighbours of each of its
            // ranges, URL-safe base64's digits, padding in the middle, a byte beyond ASCII.
            // It takes the place of as many bytes as it has, so the length stays a multiple of four.
            let strangers = ["@", "[", "`", "{", ":", ",", "-", ".", "_", "=", "~", "*", "é", "\\u00e9"]
            let stranger = strangers[choice % strangers.count]
            var characters = Array(receipt)
            let position = choice % (characters.count - 8)
            characters.replaceSubrange(position..<(position + stranger.utf8.count), with: stranger)
            let line = #"{"user_id":"\#(user)","latest_receipt":"\#(String(characters))"}"#
            return ImportCase(
                bytes: Data(line.utf8), expectation: .rejected,
                detail: "receipt not base64: \(stranger) at \(position)")
        case .blank:
            return ImportCase(
                bytes: Data(["", "   ", "\t", "\r"][choice % 4].utf8), expectation: .skipped, detail: "blank")
        case .tooLong:
            let line =
                #"{"user_id":"\#(user)","latest_receipt":"\#(String(repeating: "QUJD", count: (17 << 20) / 4))"}"#
            return ImportCase(bytes: Data(line.utf8), expectation: .rejected, detail: "a 17 MiB line")
        }
    }
}

@Suite("Garbage in import files: property checks against the real binary")
struct ImportGarbagePropertyTests {
    @Test(
        """
        Any mix of good and bad lines: good ones stored exactly, bad ones each named by line number, the import \
        goes on, exit 3, no receipt in the output
        """
    )
    func mixedLines() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/renewal.sqlite"
        let migrated = try await CLI.run(["migrate", "--database", database])
        try #require(migrated.status == 0, "\(migrated.stderr)")
        let counter = Counter()
        let lineKind = Gen.int(in: 0...(ImportCase.Kind.allCases.count - 2)).map { ImportCase.Kind.allCases[$0] }
        // The 17 MiB line is costly: at most one file in four has one.
        await propertyCheck(count: 16, input: zip(lineKind, Gen.int(in: 0...999)).array(of: 1...40), Gen.int(in: 0...3))
        { specs, longLine in
            let n = counter.next()
            var cases = specs.enumerated().map { index, spec in
                ImportCase.make(kind: spec.0, id: "\(n)-\(index)", choice: spec.1)
            }
            if longLine == 0 {
                cases.insert(ImportCase.make(kind: .tooLong, id: "\(n)-long", choice: 0), at: cases.count / 2)
            }
            let file = directory + "/import-\(n).jsonl"
            var data = Data()
            for item in cases { data += item.bytes + Data("\n".utf8) }
            try data.write(to: URL(fileURLWithPath: file))

            let result = try await CLI.run(["import", file, "--database", database])
            let reported = Set(
                result.stderr.split(separator: "\n").compactMap { line -> Int? in
                    guard line.hasPrefix("renewal import: line ") else { return nil }
                    return Int(line.dropFirst("renewal import: line ".count).prefix { $0.isNumber })
                })
            let stored = try await Self.stored(database: database)
            let mustReject = Set(cases.indices.filter { cases[$0].expectation == .rejected }.map { $0 + 1 })

            #expect(
                result.status == (reported.isEmpty ? 0 : 3),
                "exit \(result.status), \(reported.count) lines reported: \(result.stderr.prefix(2_000))")
            #expect(
                mustReject.isSubset(of: reported),
                "bad lines not reported: \(mustReject.subtracting(reported).sorted().map { "\($0): \(cases[$0 - 1])" })"
            )
            for (index, item) in cases.enumerated() {
                switch item.expectation {
                case .stored(let user, let receipt):
                    #expect(stored[user] == receipt, "line \(index + 1) (\(item)) not stored as given")
                    #expect(!reported.contains(index + 1), "line \(index + 1) (\(item)) was reported as bad")
                case .rejected:
                    continue
                case .skipped:
                    #expect(!reported.contains(index + 1), "blank line \(index + 1) was reported")
                case .either(let users, let receipt):
                    let kept = users.filter { stored[$0] == receipt }
                    #expect(
                        kept.count == (reported.contains(index + 1) ? 0 : 1),
                        "line \(index + 1) (\(item)): stored as \(kept)")
                }
            }
            let summary = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
            #expect(summary.hasSuffix("\(reported.count) rejected."), "summary: \(summary)")
            for item in cases {
                guard case .stored(_, let receipt) = item.expectation else { continue }
                #expect(
                    !result.stderr.contains(receipt) && !result.stdout.contains(receipt), "a receipt reached the output"
                )
            }
            counter.record(cases.count, rejected: reported.count)
        }
        print("figures[garbage import lines]: \(counter.summary)")
    }

    /// Every stored receipt by user id.
    static func stored(database: String) async throws -> [String: String] {
        let store = try SQLiteSubscriptionStore.open(path: database, create: false)
        var all: [String: String] = [:]
        var cursor: ReceiptCursor?
        while true {
            let page = try await store.nextBatch(
                .backfill(BackfillSelector(all: true)), after: cursor, limit: 500, lease: nil)
            for receipt in page { all[receipt.userID] = receipt.latestReceipt }
            guard let last = page.last else { return all }
            cursor = last.cursor
        }
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var files = 0
        private var lines = 0
        private var rejected = 0

        func next() -> Int {
            lock.withLock {
                files += 1; return files
            }
        }
        func record(_ count: Int, rejected bad: Int) {
            lock.withLock {
                lines += count; rejected += bad
            }
        }
        var summary: String { lock.withLock { "\(files) files, \(lines) lines, \(rejected) rejected" } }
    }
}
