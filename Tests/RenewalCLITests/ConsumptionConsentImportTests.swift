import Foundation
import Testing

/// `consumption_consent` in import lines, through the binary: kept per user until a later line changes it,
/// and a value that is not a boolean is a bad line named with the fix.
@Suite("renewal import: consumption_consent kept per user, a bad value named; --refund-preference checked")
struct ConsumptionConsentImportTests {
    @Test(
        """
        A line's consumption_consent is kept for its user; a later line's false withdraws it, a line without it \
        leaves it; "yes" is a bad line naming the field and the fix, and the other lines import
        """)
    func consentKeptUntilALaterLineChangesIt() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/renewal.sqlite"
        let environment = ["RENEWAL_DATABASE": database]
        #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
        func importLines(_ lines: [String]) async throws -> CLI.Result {
            let file = directory + "/lines-\(UUID().uuidString).jsonl"
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            return try await CLI.run(["import", file], environment: environment)
        }
        func consents() throws -> String {
            try SQLiteShell.query(
                database, "SELECT user_id || '=' || consented FROM consumption_consents ORDER BY user_id"
            ).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let first = try await importLines([
            #"{"user_id": "ana", "original_transaction_id": "2000000000000001", "consumption_consent": true}"#,
            #"{"user_id": "ben", "original_transaction_id": "2000000000000002", "consumption_consent": "yes"}"#,
            #"{"user_id": "cal", "original_transaction_id": "2000000000000003"}"#,
        ])
        #expect(first.status == 3, "\(first.stderr)")
        #expect(first.stderr.contains("line 2"), "\(first.stderr)")
        #expect(first.stderr.contains("consumption_consent must be true or false (user ben)"), "\(first.stderr)")
        #expect(try consents() == "ana=1")

        let second = try await importLines([
            #"{"user_id": "ana", "original_transaction_id": "2000000000000001", "consumption_consent": false}"#,
            #"{"user_id": "cal", "original_transaction_id": "2000000000000003", "consumption_consent": true}"#,
        ])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try consents() == "ana=0\ncal=1")
        let third = try await importLines([
            #"{"user_id": "cal", "original_transaction_id": "2000000000000003"}"#
        ])
        #expect(third.status == 0)
        #expect(try consents() == "ana=0\ncal=1", "a line without the key leaves the consent as it was")

        // The app's own delivery status and consumption share, kept beside the consent; bad values named.
        let fourth = try await importLines([
            #"{"user_id": "cal", "original_transaction_id": "2000000000000003", "consumption_delivery_status": "UNDELIVERED_SERVER_OUTAGE"}"#,
            #"{"user_id": "ana", "original_transaction_id": "2000000000000001", "consumption_percentage": 250000}"#,
            #"{"user_id": "ben", "original_transaction_id": "2000000000000002", "consumption_delivery_status": "LOST"}"#,
            #"{"user_id": "ana", "original_transaction_id": "2000000000000001", "consumption_percentage": 25000}"#,
        ])
        #expect(fourth.status == 3, "\(fourth.stderr)")
        #expect(fourth.stderr.contains("line 2") && fourth.stderr.contains("consumption_percentage must be"))
        #expect(fourth.stderr.contains("line 3") && fourth.stderr.contains("consumption_delivery_status must be"))
        let supplied = try SQLiteShell.query(
            database,
            """
            SELECT user_id || '=' || consented || ',' || COALESCE(delivery_status, '-') || ',' ||
                COALESCE(consumption_percentage, '-') FROM consumption_consents ORDER BY user_id
            """
        ).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(supplied == "ana=0,-,25000\ncal=1,UNDELIVERED_SERVER_OUTAGE,-", "\(supplied)")
    }

    @Test("--refund-preference takes DECLINE, GRANT_FULL or GRANT_PRORATED; anything else is a usage error (64)")
    func refundPreferenceIsChecked() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = ["RENEWAL_DATABASE": directory + "/renewal.sqlite"]
        let refused = try await CLI.run(["run", "--refund-preference", "MAYBE"], environment: environment)
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("--refund-preference must be DECLINE, GRANT_FULL or GRANT_PRORATED"))
    }
}
