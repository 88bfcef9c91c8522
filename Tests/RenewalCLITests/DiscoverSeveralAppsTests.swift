import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

/// `renewal discover` with an apps file: each app's Notification History read with its own key, each
/// purchase adopted as its own app's.
@Suite("renewal discover with several apps")
struct DiscoverSeveralAppsTests {
    @Test(
        "discover reads each app's history with its key (four streams) and adopts each purchase under its app",
        arguments: SeveralAppsTests.backends)
    func eachApp(_ backend: String) async throws {
        try await SeveralAppsServerAPITests.withApps(backend, macKeyAccepted: true) {
            directory, database, state, environment in
            let start = state.now.addingTimeInterval(-5 * 86_400)
            let lost = [
                SimulatedReceipt(
                    account: "discover-phone-\(UUID().uuidString.prefix(8))", scenario: .renewal, start: start,
                    period: 365 * 86_400, productID: SeveralAppsTests.phoneProduct, bundle: SeveralAppsTests.phone),
                SimulatedReceipt(
                    account: "discover-mac-\(UUID().uuidString.prefix(8))", scenario: .renewal, start: start,
                    period: 365 * 86_400, productID: SeveralAppsTests.macProduct, bundle: SeveralAppsTests.mac),
            ]
            state.register(lost)
            let migrated = try await CLI.run(["migrate", "--database", database], environment: environment)
            #expect(migrated.status == 0, "\(migrated.stderr)")
            let result = try await CLI.run(
                ["discover", "--since", "30d", "--json", "--database", database, "--now", Timestamp.string(state.now)],
                environment: environment)
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr.suffix(2_000))")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect(json["adopted"] as? Int == 2, "\(json)")
            let streams = (json["windows"] as? [[String: Any]] ?? []).compactMap { $0["stream"] as? String }
            #expect(
                streams == [
                    "com.example.app/Production", "com.example.app/Sandbox", "com.example.mac/Production",
                    "com.example.mac/Sandbox",
                ])
            let adopted = try await SeveralAppsTests.strings(
                "SELECT original_transaction_id || ' ' || bundle_id AS value FROM adopted_purchases ORDER BY bundle_id",
                backend: backend, database: database)
            #expect(adopted == lost.map { "\($0.originalTransactionID) \($0.bundleIdentifier)" }, "\(adopted)")
        }
    }

    @Test(
        "a key Apple refuses is exit 78 naming its app's streams; the other app's purchases are adopted",
        arguments: SeveralAppsTests.backends)
    func refusedKey(_ backend: String) async throws {
        try await SeveralAppsServerAPITests.withApps(backend, macKeyAccepted: false) {
            directory, database, state, environment in
            let phone = SimulatedReceipt(
                account: "discover-phone-\(UUID().uuidString.prefix(8))", scenario: .renewal,
                start: state.now.addingTimeInterval(-86_400), period: 365 * 86_400,
                productID: SeveralAppsTests.phoneProduct, bundle: SeveralAppsTests.phone)
            state.register([phone])
            let migrated = try await CLI.run(["migrate", "--database", database], environment: environment)
            #expect(migrated.status == 0, "\(migrated.stderr)")
            let result = try await CLI.run(
                ["discover", "--since", "30d", "--database", database, "--now", Timestamp.string(state.now)],
                environment: environment)
            #expect(result.status == 78, "\(result.stdout)\n\(result.stderr.suffix(2_000))")
            #expect(result.stderr.contains("com.example.mac/Production"), "\(result.stderr)")
            let adopted = try await SeveralAppsTests.strings(
                "SELECT original_transaction_id AS value FROM adopted_purchases", backend: backend, database: database)
            #expect(adopted == [phone.originalTransactionID])
        }
    }
}
