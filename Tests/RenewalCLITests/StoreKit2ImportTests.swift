import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalServerAPI
import Testing

/// StoreKit 2 apps: customers imported by transaction id or by a signed transaction, without a
/// receipt, through the built binary against the in-process simulator (its Server API, its chain).
@Suite("StoreKit 2 rows: imported by transaction id or signed transaction, checked by the Server API only")
struct StoreKit2ImportTests {
    /// The scenarios Apple answers with a subscription (an iOS 6 receipt has no StoreKit 2 form).
    static let scenarios: [Scenario] = [
        .renewal, .voluntaryExpiry, .billingRetry, .gracePeriod, .billingRecovery, .refund, .upgrade, .sandbox,
        .familyShared, .trial, .multipleSubscriptions, .transient21005,
    ]

    /// The database a test runs on: a SQLite file, or a fresh schema on the test PostgreSQL server.
    struct Database {
        var url: String
        var drop: () -> Void
    }

    static func database(_ backend: String, directory: String, name: String) async throws -> Database {
        guard backend == "postgres" else { return Database(url: directory + "/\(name).sqlite", drop: {}) }
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath, "psql is needed to create the test schema")
        let schema = "renewal_sk2_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await PostgresKillTests.sqlOffPool("CREATE SCHEMA \(schema)", url: base, psql: psql)
        return Database(
            url: base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)",
            drop: { _ = try? PostgresKillTests.sql("DROP SCHEMA \(schema) CASCADE", url: base, psql: psql) })
    }

    static var backends: [String] { PostgresKillEnvironment.baseURL == nil ? ["sqlite"] : ["sqlite", "postgres"] }

    /// `status --json`, by user, without the columns that differ by design between the two kinds of
    /// row (source) or by time of check (next_check_at, last_verified_at); a missing ownership type
    /// is a purchase.
    static func status(_ database: String, environment: [String: String]) async throws -> [String: [String]] {
        let result = try await CLI.run(["status", "--json", "--database", database], environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        var byUser: [String: [String]] = [:]
        for row in rows {
            let keys = [
                "original_transaction_id", "product_id", "state", "entitled", "expires_at", "auto_renew", "environment",
                "grace_period_expires_at",
            ]
            var fields = keys.map { "\($0)=\(row[$0].map { "\($0)" } ?? "nil")" }
            fields.append("ownership=\(row["ownership_type"] as? String ?? "PURCHASED")")
            byUser[row["user_id"] as? String ?? "?", default: []].append(fields.joined(separator: " "))
        }
        return byUser.mapValues { $0.sorted() }
    }

    /// The report's changes as `user/otid/kind:from→to`, sorted.
    static func changes(_ report: String) throws -> [String] {
        let json = try ServerAPIMigrationTests.json(report)
        return (json["changes"] as? [[String: Any]] ?? []).map {
            let user = $0["user_id"] as? String ?? ""
            let id = $0["original_transaction_id"] as? String ?? ""
            let kind = $0["kind"] as? String ?? ""
            return "\(user)/\(id)/\(kind):\($0["from_state"] as? String ?? "")→\($0["to_state"] as? String ?? "")"
        }.sorted()
    }

    @Test(
        """
        Parity: rows imported by transaction id and by signed transaction reach the same states and changes as \
        receipt rows of the same customers over four steps of history, with no verifyReceipt request for them
        """,
        arguments: backends)
    func parityWithReceiptRows(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let chain = try #require(configuration.serverAPI).chain
            var customers: [(String, SimulatedReceipt, SimulatedReceipt.ImportForm)] = []
            for (index, scenario) in Self.scenarios.enumerated() {
                for (step, days) in [5.0, 18, 25, 44].enumerated() {
                    let receipt = SimulatedReceipt(
                        account: "sk2-\(index)-\(Int(days))", scenario: scenario,
                        start: state.now.addingTimeInterval(-days * 86_400))
                    let form: SimulatedReceipt.ImportForm = step % 2 == 0 ? .transactionID : .signedTransaction
                    customers.append(("u-\(scenario.rawValue)-\(Int(days))", receipt, form))
                }
            }
            state.register(customers.map(\.1))
            let withAPI = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let verifyReceiptOnly = withAPI.filter {
                !["APPSTORE_KEY_ID", "APPSTORE_ISSUER_ID", "APPSTORE_PRIVATE_KEY_FILE"].contains($0.key)
            }
            let receipts = directory + "/receipts.sqlite"
            let storeKit = try await Self.database(backend, directory: directory, name: "storekit2")
            defer { storeKit.drop() }

            for database in [receipts, storeKit.url] {
                #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            }
            let receiptLines = customers.map { #"{"user_id": "\#($0.0)", "latest_receipt": "\#($0.1.encoded)"}"# }
            let storeKitLines = try customers.map { try $0.1.importLine(userID: $0.0, form: $0.2, signer: chain) }
            var imported = try await CLI.run(
                ["import", "-", "--database", receipts], environment: verifyReceiptOnly,
                stdin: receiptLines.joined(separator: "\n") + "\n")
            #expect(imported.status == 0, "\(imported.stderr)")
            imported = try await CLI.run(
                ["import", "-", "--database", storeKit.url], environment: withAPI,
                stdin: storeKitLines.joined(separator: "\n") + "\n")
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(imported.stdout.contains("Imported: \(customers.count) new"), "\(imported.stdout)")

            // From import on, status lists every StoreKit 2 row by its id, unverified.
            let beforeCheck = try await Self.status(storeKit.url, environment: withAPI)
            for (user, receipt, _) in customers {
                #expect(
                    beforeCheck[user]?.first?.contains(
                        "original_transaction_id=\(receipt.originalTransactionID) product_id=\(receipt.productID) "
                            + "state=unverified") == true, "\(user): \(beforeCheck[user] ?? [])")
            }

            var now = state.now
            var statesSeen: Set<String> = []
            var changesSeen = 0
            for step in 0..<4 {
                let stamp = Timestamp.string(now)
                let viaReceipts = try await CLI.run(
                    [
                        "backfill", "--all", "--database", receipts, "--now", stamp, "--report",
                        directory + "/receipts-\(step).json",
                    ], environment: verifyReceiptOnly)
                let verifyReceiptRequests = state.stats.requests
                let viaStoreKit = try await CLI.run(
                    [
                        "backfill", "--all", "--database", storeKit.url, "--now", stamp, "--report",
                        directory + "/storekit-\(step).json",
                    ], environment: withAPI)
                #expect(
                    state.stats.requests == verifyReceiptRequests, "step \(step): a StoreKit 2 row went to verifyReceipt")
                #expect(viaReceipts.status == viaStoreKit.status, "step \(step): \(viaStoreKit.stdout)")

                let expected = try await Self.status(receipts, environment: verifyReceiptOnly)
                let found = try await Self.status(storeKit.url, environment: withAPI)
                for (user, rows) in expected.sorted(by: { $0.key < $1.key }) {
                    #expect(found[user] == rows, "step \(step), \(user): receipt \(rows) ≠ StoreKit 2 \(found[user] ?? [])")
                }
                let storeKitChanges = try Self.changes(directory + "/storekit-\(step).json")
                #expect(
                    storeKitChanges == (try Self.changes(directory + "/receipts-\(step).json")),
                    "step \(step): different changes")
                changesSeen += storeKitChanges.count
                for row in found.values.joined() {
                    if let state = row.split(separator: " ").first(where: { $0.hasPrefix("state=") }) {
                        statesSeen.insert(String(state.dropFirst(6)))
                    }
                }
                state.advance(by: 9 * 86_400)
                now = now.addingTimeInterval(9 * 86_400)
            }
            // The history covered what matters: renewals, refunds, lapses, billing trouble.
            #expect(
                statesSeen.isSuperset(of: ["active", "expired", "revoked", "billing_retry", "grace_period"]),
                "\(statesSeen.sorted())")
            #expect(changesSeen > customers.count, "\(changesSeen) changes")
            let stats = state.serverAPIStats
            print(
                """
                figures[storekit 2 parity, \(backend)]: \(customers.count) customers × 4 steps; server api requests \
                \(stats.requests), verifyReceipt requests \(state.stats.requests) (receipt rows only)
                """)
        }
    }
}
