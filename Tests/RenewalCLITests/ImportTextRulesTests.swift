import Foundation
import PropertyBased
import Testing

/// Every text field of an import line follows the same rules on both databases: no control character
/// (C0, DEL, C1) in `user_id` or `product_id`, `user_id` at most 1,024 UTF-8 bytes and `product_id` at
/// most 255. A line that breaks them is a bad line named by its number and the rest imports; a line
/// that keeps them is stored exactly as given, on SQLite as on PostgreSQL.
@Suite("Import text fields: the same lines accepted and the same values stored on SQLite and PostgreSQL")
struct ImportTextRulesTests {
    /// Pieces text is made of: ordinary, beyond ASCII, JSON's escapes and runs long enough to pass each
    /// bound; then control characters of every kind. (No U+FEFF: Foundation's JSON reader in this test
    /// drops it, though the job stores it.)
    static let atoms: [String] = [
        "a", "Z", "7", "-", "_", ".", "@", " ", "é", "日本", "🙂", "\"", "\\", "/", "\u{A0}", "\u{2028}", "\u{200B}",
        String(repeating: "x", count: 100), String(repeating: "ü", count: 200), String(repeating: "y", count: 1_000),
    ]
    static let controls = ["\u{0}", "\u{1}", "\t", "\n", "\r", "\u{1F}", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}"]

    /// Text of one to six pieces; one field in three also holds a control character somewhere.
    static let text = zip(
        Gen.int(in: 0...(atoms.count - 1)).map { atoms[$0] }.array(of: 1...6), Gen.int(in: 0...(3 * controls.count - 1))
    ).map { pieces, choice in
        var pieces = pieces
        if choice < controls.count { pieces.insert(controls[choice], at: choice % (pieces.count + 1)) }
        return pieces.joined()
    }

    /// The rule, written out again here: what `renewal import` must decide for a field.
    static func breaksRules(_ text: String, maximumBytes: Int) -> Bool {
        text.utf8.count > maximumBytes
            || text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    struct Line {
        var userID: String
        var productID: String
        var accepted: Bool {
            !ImportTextRulesTests.breaksRules(userID, maximumBytes: 1_024)
                && !ImportTextRulesTests.breaksRules(productID, maximumBytes: 255)
        }

        var json: String {
            let object: [String: Any] = [
                "user_id": userID, "product_id": productID, "latest_receipt": "TUlJQmV4YW1wbGUtcmVjZWlwdA==",
            ]
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
    }

    @Test(
        "generated user and product ids: the same lines rejected (each named) and the same values stored on both",
        .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
    func sameOnBothDatabases() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let text = Self.text
        let counter = ImportGarbagePropertyTests.Counter()
        await propertyCheck(count: 12, input: zip(text, text).array(of: 1...25)) { pairs in
            let n = counter.next()
            // A prefix keeps each line's user apart, so a cut at a NUL would show as a stored difference.
            let lines = pairs.enumerated().map { index, pair in
                Line(userID: "L\(index)-" + pair.0, productID: pair.1)
            }
            let file = directory + "/lines-\(n).jsonl"
            try (lines.map(\.json).joined(separator: "\n") + "\n").write(
                toFile: file, atomically: true, encoding: .utf8)
            var outcomes: [(rejected: Set<Int>, stored: [String: String])] = []
            for backend in ["sqlite", "postgres"] {
                let database = try await StoreKit2ImportTests.database(backend, directory: directory, name: "text-\(n)")
                defer { database.drop() }
                let environment = ["RENEWAL_DATABASE": database.url]
                #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
                let result = try await CLI.run(["import", file], environment: environment)
                let rejected = Set(
                    result.stderr.split(separator: "\n").compactMap { line -> Int? in
                        guard line.hasPrefix("renewal import: line ") else { return nil }
                        return Int(line.dropFirst("renewal import: line ".count).prefix { $0.isNumber })
                    })
                #expect(result.status == (rejected.isEmpty ? 0 : 3), "\(backend): \(result.stderr.prefix(1_000))")
                var stored: [String: String] = [:]
                for row in try await CLI.statusRows(database.url, environment: environment) {
                    stored[row["user_id"] as? String ?? "?"] = row["product_id"] as? String ?? ""
                }
                outcomes.append((rejected, stored))
            }
            let mustReject = Set(lines.indices.filter { !lines[$0].accepted }.map { $0 + 1 })
            let mustStore = Dictionary(
                lines.filter(\.accepted).map { ($0.userID, $0.productID) }, uniquingKeysWith: { $1 })
            #expect(outcomes[0].rejected == outcomes[1].rejected, "SQLite and PostgreSQL rejected different lines")
            #expect(outcomes[0].stored == outcomes[1].stored, "SQLite and PostgreSQL stored different values")
            for (backend, outcome) in zip(["sqlite", "postgres"], outcomes) {
                #expect(
                    outcome.rejected == mustReject,
                    "\(backend) rejected \(outcome.rejected.sorted()), not \(mustReject.sorted())")
                #expect(outcome.stored == mustStore, "\(backend) did not store the good lines exactly")
            }
            counter.record(lines.count, rejected: mustReject.count)
        }
        print("figures[import text rules]: \(counter.summary)")
    }
}
