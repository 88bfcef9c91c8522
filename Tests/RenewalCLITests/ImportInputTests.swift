import Foundation
import Testing

/// What `renewal import` is given, through the binary: an explicit null for a consumption field is a bad
/// line (never a silent "keep what is stored"), a directory is a usage error, and a UTF-8 byte order mark
/// before the first line is skipped.
@Suite("renewal import: null consumption fields, a directory, a byte order mark")
struct ImportInputTests {
    /// A migrated SQLite database in a fresh directory, and a way to import lines from a file into it.
    static func withDatabase(
        _ body: (_ directory: String, _ database: String, _ environment: [String: String]) async throws -> Void
    ) async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/renewal.sqlite"
        let environment = ["RENEWAL_DATABASE": database]
        let migrated = try await CLI.run(["migrate"], environment: environment)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        try await body(directory, database, environment)
    }

    static func importFile(_ text: String, directory: String, environment: [String: String]) async throws
        -> CLI.Result
    {
        let file = directory + "/lines-\(UUID().uuidString).jsonl"
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return try await CLI.run(["import", file], environment: environment)
    }

    @Test(
        """
        consumption_consent, consumption_delivery_status and consumption_percentage given as null are bad lines \
        naming the field and the fix (exit 3); the consent stored before is kept, the other lines import
        """)
    func nullConsumptionFieldsAreBadLines() async throws {
        try await Self.withDatabase { directory, database, environment in
            let first = try await Self.importFile(
                #"{"user_id": "ana", "original_transaction_id": "2000000000000001", "consumption_consent": true}"#
                    + "\n", directory: directory, environment: environment)
            #expect(first.status == 0, "\(first.stderr)")
            let second = try await Self.importFile(
                [
                    #"{"user_id": "ana", "original_transaction_id": "2000000000000001", "consumption_consent": null}"#,
                    #"{"user_id": "ben", "original_transaction_id": "2000000000000002", "consumption_delivery_status": null}"#,
                    #"{"user_id": "cal", "original_transaction_id": "2000000000000003", "consumption_percentage": null}"#,
                    #"{"user_id": "dan", "original_transaction_id": "2000000000000004"}"#,
                ].joined(separator: "\n") + "\n", directory: directory, environment: environment)
            #expect(second.status == 3, "\(second.stdout)\n\(second.stderr)")
            #expect(second.stdout.contains("1 new"), "\(second.stdout)")
            #expect(second.stdout.contains("3 rejected"), "\(second.stdout)")
            for (line, field) in [
                (1, "consumption_consent"), (2, "consumption_delivery_status"), (3, "consumption_percentage"),
            ] {
                let reported = second.stderr.split(separator: "\n").first { $0.contains("line \(line):") } ?? ""
                #expect(reported.contains("\(field) is null"), "line \(line): \(second.stderr)")
                #expect(reported.contains("leave \(field) out"), "line \(line): \(second.stderr)")
            }
            let consents = try SQLiteShell.query(
                database, "SELECT user_id || '=' || consented FROM consumption_consents ORDER BY user_id"
            ).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(consents == "ana=1", "the consent given before is kept: \(consents)")
            let users = try SQLiteShell.query(database, "SELECT user_id FROM receipts ORDER BY user_id")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(users == "ana\ndan", "\(users)")
        }
    }

    @Test("import of a directory is a usage error (64) saying it is a directory, not an internal error")
    func directoryIsAUsageError() async throws {
        try await Self.withDatabase { directory, _, environment in
            let result = try await CLI.run(["import", directory], environment: environment)
            #expect(result.status == 64, "\(result.stdout)\n\(result.stderr)")
            #expect(
                result.stderr.contains("\(directory) is a directory; give a JSON Lines file or -"), "\(result.stderr)")
            #expect(!result.stderr.contains("NSCocoaErrorDomain"), "\(result.stderr)")
        }
    }

    @Test("a UTF-8 byte order mark before line 1 is skipped, from a file and from standard input: line 1 imports")
    func byteOrderMarkIsSkipped() async throws {
        try await Self.withDatabase { directory, database, environment in
            let lines =
                [
                    #"{"user_id": "bom-file-1", "original_transaction_id": "2000000000000011"}"#,
                    #"{"user_id": "bom-file-2", "original_transaction_id": "2000000000000012"}"#,
                ].joined(separator: "\n") + "\n"
            let fromFile = try await Self.importFile("\u{FEFF}" + lines, directory: directory, environment: environment)
            #expect(fromFile.status == 0, "\(fromFile.stdout)\n\(fromFile.stderr)")
            #expect(fromFile.stdout.contains("2 new"), "\(fromFile.stdout)")

            let stdinLine = #"{"user_id": "bom-stdin", "original_transaction_id": "2000000000000013"}"# + "\n"
            let fromStdin = try await CLI.run(["import", "-"], environment: environment, stdin: "\u{FEFF}" + stdinLine)
            #expect(fromStdin.status == 0, "\(fromStdin.stdout)\n\(fromStdin.stderr)")
            #expect(fromStdin.stdout.contains("1 new"), "\(fromStdin.stdout)")

            // Only a mark at the very start is skipped: one before a later line is still a bad line.
            let later = try await Self.importFile(
                #"{"user_id": "bom-later-1", "original_transaction_id": "2000000000000014"}"# + "\n\u{FEFF}"
                    + #"{"user_id": "bom-later-2", "original_transaction_id": "2000000000000015"}"# + "\n",
                directory: directory, environment: environment)
            #expect(later.status == 3, "\(later.stdout)\n\(later.stderr)")
            #expect(later.stderr.contains("line 2"), "\(later.stderr)")
            let users = try SQLiteShell.query(database, "SELECT user_id FROM receipts ORDER BY user_id")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(users == "bom-file-1\nbom-file-2\nbom-later-1\nbom-stdin", "\(users)")
        }
    }
}
