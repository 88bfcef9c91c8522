import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

/// `renewal discover` reports the adopted purchases' revenue gross, refunded and net per currency, through
/// the real binary and the simulator's Notification History, on SQLite and PostgreSQL (issue 44).
@Suite("renewal discover: revenue net of refunds")
struct DiscoverRefundsTests {
    static let day: TimeInterval = 86_400

    @Test(
        """
        two lost purchases of weekly periods, one refunded in its second period: discover's JSON gives gross \
        (four paid periods), the refund (one period) and net per currency, and the text says the same
        """,
        arguments: FeedKillTests.backends)
    func revenueIsNetOfRefunds(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            // Each renews weekly from 12 days ago: two periods paid; the refund scenario refunds the second at
            // 1.5 periods (a day and a half ago) and renews no more.
            let start = state.now.addingTimeInterval(-12 * Self.day)
            let kept = state.makeLostPurchases(
                count: 1, prefix: "net-kept", start: start, withToken: false, period: 7 * Self.day)
            let refunded = state.makeLostPurchases(
                count: 1, prefix: "net-refunded", scenario: .refund, start: start, withToken: false,
                period: 7 * Self.day)
            try await FeedKillTests.withReferenceAndVictim(backend, directory: directory, receipts: []) {
                target, other in
                let json = try await DiscoverTests.discover("30d", target, state: state, environment: environment)
                #expect(json["adopted"] as? Int == kept.count + refunded.count, "\(json)")
                let revenue = json["revenue"] as? [[String: Any]] ?? []
                let usd = try #require(revenue.first { $0["currency"] as? String == "USD" }, "\(revenue)")
                let gross = try #require(usd["milliunits"] as? Int, "\(usd)")
                let refunds = try #require(usd["refunds_milliunits"] as? Int, "\(usd)")
                let net = try #require(usd["net_milliunits"] as? Int, "\(usd)")
                // Four periods paid at one price, one of them refunded.
                #expect(gross > 0 && refunds * 4 == gross && net == gross - refunds, "\(usd)")
                #expect(usd["net_amount"] as? String == Self.amount(net), "\(usd)")

                // The text, from a second database that holds none of them yet.
                let text = try await CLI.run(
                    ["discover", "--since", "30d", "--now", Timestamp.string(state.now)] + other.arguments,
                    environment: environment)
                #expect(text.status == 0, "\(text.stderr)")
                #expect(
                    text.stdout.contains(
                        "\(Self.amount(gross)) USD gross, \(Self.amount(refunds)) refunded, \(Self.amount(net)) net"),
                    "\(text.stdout)")
            }
        }
    }

    /// Milliunits as the two-decimal amount discover prints (a whole number of cents here).
    static func amount(_ milliunits: Int) -> String {
        String(format: "%d.%02d", milliunits / 1_000, (milliunits % 1_000) / 10)
    }
}
