import Foundation
import Testing

/// Issue 44's import lines through the binary: a line with only a user and an `app_account_token`
/// registers the token; the same token for a second user is a bad line named with the fix; a user id
/// with the reserved `adopted:` prefix is refused.
@Suite("Import: app_account_token lines register tokens; one token under two users is a bad line")
struct TokenImportTests {
    @Test("token-only lines are counted, a second user's token and a reserved user id are bad lines (exit 3)")
    func tokenLines() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/renewal.sqlite"
        #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
        let token = "6D1B1E9C-3F5E-4B0A-9A57-0C1C1C1C1C1C"
        let lines = [
            #"{"user_id": "alice", "app_account_token": "\#(token)"}"#,
            #"{"user_id": "bob", "app_account_token": "\#(token.lowercased())"}"#,
            #"{"user_id": "adopted:2000000000000001", "app_account_token": "11111111-1111-4111-8111-111111111111"}"#,
            #"{"user_id": "carol", "app_account_token": "22222222-2222-4222-8222-222222222222"}"#,
        ]
        let result = try await CLI.run(
            ["import", "-", "--database", database], stdin: lines.joined(separator: "\n") + "\n")
        #expect(result.status == 3, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("0 new, 0 replaced, 0 unchanged, 2 rejected."), "\(result.stdout)")
        #expect(result.stdout.contains("Tokens registered: 2; adopted purchases claimed: 0."), "\(result.stdout)")
        #expect(
            result.stderr.contains("line 2: app_account_token \(token.lowercased()) is registered for another user"),
            "\(result.stderr)")
        #expect(result.stderr.contains("line 3: user_id adopted:2000000000000001 starts with adopted:"))
        // Nothing became a receipt: tokens are not customers.
        let status = try await CLI.run(["status", "--database", database])
        #expect(!status.stdout.contains("alice") && !status.stdout.contains("carol"), "\(status.stdout)")
    }
}
