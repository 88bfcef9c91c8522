import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

/// `renewal report` lists the changes recorded outside any run (issue 44): a `renewal claim` between
/// runs stores `purchase_claimed` with no run id, and the report files it under the run it followed.
@Suite("renewal report: changes outside runs (claims, imports) in every format")
struct ReportOutsideRunsTests {
    @Test(
        """
        after renewal claim, report json of the last run and of a range holds the purchase_claimed change for bob under \
        changes_outside_runs; table lists it under its heading; jsonl has it with run_id null, csv with an \
        empty run_id; html lists it; --app of another app leaves the key out
        """,
        arguments: StoreKit2ImportTests.backends)
    func claimAppearsInReport(backend: String) async throws {
        try await LookupClaimTests.withSetup(backend) { setup in
            let lost = setup.lost[0]
            let claimed = try await CLI.run(
                ["claim", "--original-transaction-id", lost.originalTransactionID, "--user", "bob"] + setup.flags,
                environment: setup.environment)
            #expect(claimed.status == 0, "\(claimed.stdout)\n\(claimed.stderr)")

            func report(_ arguments: [String]) async throws -> String {
                let result = try await CLI.run(["report"] + arguments + setup.flags)
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
                return result.stdout
            }
            func outside(_ object: Any?) -> [[String: Any]] {
                (object as? [String: Any])?["changes_outside_runs"] as? [[String: Any]] ?? []
            }
            func isBobsClaim(_ change: [String: Any]) -> Bool {
                change["kind"] as? String == "purchase_claimed" && change["user_id"] as? String == "bob"
                    && change["original_transaction_id"] as? String == lost.originalTransactionID
            }

            let since = ["--since", "2000-01-01"]
            let ranged = try JSONSerialization.jsonObject(
                with: Data(try await report(["--format", "json"] + since).utf8))
            let runs = try #require(ranged as? [Any])
            let claims = runs.flatMap(outside)
            #expect(claims.count == 1 && claims.allSatisfy(isBobsClaim), "\(claims)")

            // The last run's window has no end: a claim made after it is in its object.
            let last = try JSONSerialization.jsonObject(with: Data(try await report(["--format", "json"]).utf8))
            #expect(outside(last).count == 1 && outside(last).allSatisfy(isBobsClaim), "\(last)")

            let table = try await report(["--format", "table"] + since)
            #expect(table.contains("Changes outside runs (claims, imports)"), "\(table)")
            #expect(table.contains("purchase_claimed") && table.contains("bob"), "\(table)")

            let lines = try await report(["--format", "jsonl"] + since).split(separator: "\n").compactMap {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            let outsideLines = lines.filter { $0["run_id"] is NSNull }
            #expect(outsideLines.count == 1 && outsideLines.allSatisfy(isBobsClaim), "\(lines)")

            let csv = try await report(["--format", "csv"] + since)
            #expect(csv.contains("\r\n,"), "a record with an empty run_id: \(csv)")
            #expect(csv.contains("bob"))

            let html = try await report(["--format", "html"] + since)
            #expect(html.contains("Changes outside runs (claims, imports)") && html.contains("bob"))

            let otherApp = try await report(["--format", "json", "--app", "com.example.other"] + since)
            #expect(!otherApp.contains("changes_outside_runs"), "\(otherApp)")
        }
    }
}
