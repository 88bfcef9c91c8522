import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

/// `renewal status --unclaimed`, the run's unclaimed gauges and the analytics' `unclaimed` figures through
/// the built binary, over two purchases the first run's change feed adopted without a user (issue 44), on
/// SQLite and PostgreSQL.
@Suite("renewal status --unclaimed, the unclaimed metrics and analytics")
struct UnclaimedStatusTests {
    @Test(
        """
        status --unclaimed lists the two adopted purchases (JSON and table) with Apple's state and revenue, \
        refuses --user; the run's metrics count two; analytics --json counts them apart inside the totals; \
        after a claim, one is left everywhere
        """,
        arguments: StoreKit2ImportTests.backends)
    func unclaimedAreListed(backend: String) async throws {
        try await LookupClaimTests.withSetup(backend) { setup in
            let ids = setup.lost.map(\.originalTransactionID).sorted()
            var listed = try await Self.unclaimed(setup)
            #expect(listed.compactMap { $0["original_transaction_id"] as? String } == ids, "\(listed)")
            for row in listed {
                #expect(row["state"] as? String == "active", "\(row)")
                #expect(row["app_account_token"] is String && row["expires_at"] is String, "\(row)")
                let revenue = try #require(row["revenue"] as? [String: Any], "\(row)")
                #expect(!revenue.isEmpty, "\(row)")
            }
            let table = try await CLI.run(["status", "--unclaimed"] + setup.flags)
            #expect(table.status == 0 && table.stdout.hasPrefix("ORIGINAL_TRANSACTION_ID"), "\(table.stdout)")
            #expect(ids.allSatisfy(table.stdout.contains) && table.stdout.contains("2 unclaimed."), "\(table.stdout)")
            let refused = try await CLI.run(["status", "--unclaimed", "--user", "bob"] + setup.flags)
            #expect(refused.status == 64 && refused.stderr.contains("leave out --user"), "\(refused.stderr)")

            try await Self.expectMetrics(count: 2, setup)
            try await Self.expectAnalytics(purchases: 2, setup)

            let claimed = try await CLI.run(
                ["claim", "--original-transaction-id", ids[0], "--user", "bob"] + setup.flags)
            #expect(claimed.status == 0, "\(claimed.stderr)")
            listed = try await Self.unclaimed(setup)
            #expect(listed.compactMap { $0["original_transaction_id"] as? String } == [ids[1]])
            try await Self.expectMetrics(count: 1, setup)
            try await Self.expectAnalytics(purchases: 1, setup)
        }
    }

    static func unclaimed(_ setup: LookupClaimTests.Setup) async throws -> [[String: Any]] {
        let result = try await CLI.run(["status", "--unclaimed", "--json"] + setup.flags)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]], "\(result.stdout)")
    }

    /// A run's metrics textfile counts `count` unclaimed purchases, the oldest under a day old.
    static func expectMetrics(count: Int, _ setup: LookupClaimTests.Setup) async throws {
        let textfile = setup.directory + "/unclaimed.prom"
        let run = try await CLI.run(
            ["run", "--now", Timestamp.string(setup.state.now), "--metrics-textfile", textfile] + setup.flags,
            environment: setup.environment)
        #expect(run.status == 0, "\(run.stderr.suffix(1_000))")
        let text = try String(contentsOfFile: textfile, encoding: .utf8)
        let samples = { (prefix: String) in
            text.split(separator: "\n").filter { $0.hasPrefix(prefix) }.compactMap {
                $0.split(separator: " ").last.flatMap { Double(String($0)) }
            }
        }
        #expect(samples("renewal_unclaimed_purchases{").reduce(0, +) == Double(count), "\(text)")
        let ages = samples("renewal_unclaimed_purchases_oldest_age_seconds{")
        #expect(!ages.isEmpty && ages.allSatisfy { $0 >= 0 && $0 < 86_400 }, "\(ages)")
    }

    /// `analytics --json` over the days around the purchases says how many are unclaimed, their revenue
    /// no more than the total's.
    static func expectAnalytics(purchases: Int, _ setup: LookupClaimTests.Setup) async throws {
        let since = String(Timestamp.string(setup.state.now - 3 * 86_400).prefix(10))
        let until = String(Timestamp.string(setup.state.now + 86_400).prefix(10))
        let result = try await CLI.run(
            ["analytics", "--json", "--since", since, "--until", until] + setup.flags)
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        let unclaimed = try #require(json["unclaimed"] as? [String: Any], "\(result.stdout)")
        #expect(unclaimed["purchases"] as? Int == purchases, "\(unclaimed)")
        let revenue = try #require((unclaimed["revenue"] as? NSNumber)?.doubleValue)
        let total = try #require((json["revenue"] as? NSNumber)?.doubleValue)
        #expect(revenue > 0 && revenue <= total, "\(unclaimed) \(total)")
        let page = setup.directory + "/analytics.html"
        let html = try await CLI.run(
            ["analytics", "--since", since, "--until", until, "--html", page] + setup.flags)
        #expect(html.status == 0, "\(html.stderr)")
        #expect(try String(contentsOfFile: page, encoding: .utf8).contains("no user yet; counted above): \(purchases)"))
        let table = try await CLI.run(["analytics", "--since", since, "--until", until] + setup.flags)
        #expect(
            table.stdout.contains("Unclaimed (adopted from Apple's feed, no user yet; counted above): \(purchases)"))
    }
}
