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
        let rows = try await CLI.statusRows(database, environment: environment)
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
                    state.stats.requests == verifyReceiptRequests,
                    "step \(step): a StoreKit 2 row went to verifyReceipt")
                #expect(viaReceipts.status == viaStoreKit.status, "step \(step): \(viaStoreKit.stdout)")

                let expected = try await Self.status(receipts, environment: verifyReceiptOnly)
                let found = try await Self.status(storeKit.url, environment: withAPI)
                for (user, rows) in expected.sorted(by: { $0.key < $1.key }) {
                    #expect(
                        found[user] == rows, "step \(step), \(user): receipt \(rows) ≠ StoreKit 2 \(found[user] ?? [])")
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

    /// A signed transaction with `payload` changed, signed by `chain`.
    static func signed(_ payload: [String: Any], by chain: SigningChain) throws -> String {
        try chain.sign(try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]))
    }

    @Test(
        """
        Forged, expired-chain, other-bundle, Xcode-signed and unreadable signed transactions are bad lines: named \
        with their number and reason, exit 3, nothing of them stored, no JWS in the output
        """)
    func badSignedTransactionsAreRejected() async throws {
        try await ServerAPIMigrationTests.withSQLiteAndSimulator {
            directory, database, state, configuration, endpoints in
            let chain = try #require(configuration.serverAPI).chain
            var environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            // An expired chain whose root is trusted too: refused for its dates alone.
            let expired = try SigningChain.generate(
                name: "expired", notBefore: Date(timeIntervalSince1970: 946_684_800),
                notAfter: Date(timeIntervalSince1970: 978_307_200))
            try expired.rootPEM().write(toFile: directory + "/expired-root.pem", atomically: true, encoding: .utf8)
            environment["APPSTORE_ROOT_CERTIFICATES"] = directory + "/root.pem," + directory + "/expired-root.pem"

            let good = SimulatedReceipt(
                account: "good", scenario: .renewal, start: state.now.addingTimeInterval(-86_400))
            let base: [String: Any] = [
                "transactionId": "300000000000001", "originalTransactionId": "300000000000001",
                "bundleId": SimulatedReceipt.bundleID, "productId": "com.example.pro.monthly",
                "environment": "Production",
                "signedDate": 1_790_000_000_000, "type": "Auto-Renewable Subscription",
            ]
            var otherBundle = base
            otherBundle["bundleId"] = "com.other.app"
            var xcodeEnvironment = base
            xcodeEnvironment["environment"] = "Xcode"
            var noOriginal = base
            noOriginal["originalTransactionId"] = nil
            let valid = try good.signedTransaction(signer: chain)
            let parts = valid.split(separator: ".").map(String.init)
            let tampered = try Self.signed(base, by: chain).split(separator: ".").map(String.init)
            let forgedSignature = [parts[0], tampered[1], parts[2]].joined(separator: ".")
            let xcodeFixture = try String(
                contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                    .appendingPathComponent("RenewalServerAPITests/Fixtures/jws/xcode-signed-transaction.jws").path,
                encoding: .utf8
            ).trimmingCharacters(in: .whitespacesAndNewlines)
            let bad: [(String, String)] = [
                ("forged signature", forgedSignature),
                ("untrusted chain", try Self.signed(base, by: try SigningChain.generate(name: "forger"))),
                ("expired chain", try Self.signed(base, by: expired)),
                ("other bundle", try Self.signed(otherBundle, by: chain)),
                ("xcode environment", try Self.signed(xcodeEnvironment, by: chain)),
                ("xcode signed", xcodeFixture),
                ("no original id", try Self.signed(noOriginal, by: chain)),
                ("unreadable", parts[0] + ".e30." + parts[2]),
            ]
            var lines = bad.map { #"{"user_id": "\#($0.0)", "signed_transaction": "\#($0.1)"}"# }
            lines.append(#"{"user_id": "kept", "signed_transaction": "\#(valid)"}"#)
            #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            let imported = try await CLI.run(
                ["import", "-", "--database", database], environment: environment,
                stdin: lines.joined(separator: "\n") + "\n")
            #expect(imported.status == 3, "\(imported.stdout)\n\(imported.stderr)")
            #expect(imported.stdout.contains("Imported: 1 new, 0 replaced, 0 unchanged, \(bad.count) rejected."))
            let expectedReasons = [
                "jws_bad_signature", "jws_untrusted_chain", "jws_untrusted_chain", "jws_wrong_bundle",
                "jws_wrong_environment", "jws_malformed", "has no originalTransactionId", "jws_",
            ]
            let errorLines = imported.stderr.split(separator: "\n").map(String.init)
            for (index, reason) in expectedReasons.enumerated() {
                let line = errorLines.first { $0.hasPrefix("renewal import: line \(index + 1): ") }
                #expect(line?.contains(reason) == true, "\(bad[index].0): \(line ?? "no message")")
                #expect(line?.contains("user \(bad[index].0)") == true, "\(line ?? "")")
            }
            for (_, jws) in bad + [("valid", valid)] {
                let signature = String(jws.split(separator: ".").last ?? "")
                #expect(!imported.stderr.contains(signature) && !imported.stdout.contains(signature))
            }
            let status = try await Self.status(database, environment: environment)
            #expect(status.keys.sorted() == ["kept"], "\(status)")
        }
    }

    @Test(
        """
        Re-import: the same id is unchanged, a newer id replaces (due now, lease released); one id under two users \
        gives one owner and one shared_apple_id conflict
        """)
    func reimportAndSharedIDs() async throws {
        try await ServerAPIMigrationTests.withSQLiteAndSimulator {
            directory, database, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let first = SimulatedReceipt(
                account: "r-1", scenario: .renewal, start: state.now.addingTimeInterval(-5 * 86_400))
            let second = SimulatedReceipt(
                account: "r-2", scenario: .refund, start: state.now.addingTimeInterval(-50 * 86_400))
            state.register([first, second])
            #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            func importLines(_ lines: [String]) async throws -> CLI.Result {
                try await CLI.run(
                    ["import", "-", "--database", database], environment: environment,
                    stdin: lines.joined(separator: "\n") + "\n")
            }
            let owner = try first.importLine(userID: "owner", form: .transactionID)
            // Without the purchase's appAccountToken: one token under two users is a bad line (issue 44).
            let sharer = try Self.withoutToken(first.importLine(userID: "sharer", form: .transactionID))
            var result = try await importLines([owner, sharer])
            #expect(result.stdout.contains("Imported: 2 new, 0 replaced, 0 unchanged, 0 rejected."), "\(result.stdout)")
            let run = try await CLI.run(
                ["run", "--database", database, "--report", directory + "/run.json"], environment: environment)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let report = try ServerAPIMigrationTests.json(directory + "/run.json")
            let conflicts = try #require(report["conflicts"] as? [[String: Any]])
            #expect(conflicts.count == 1, "\(conflicts)")
            #expect(conflicts.first?["original_transaction_id"] as? String == first.originalTransactionID)
            let status = try await Self.status(database, environment: environment)
            let owners = status.filter { $0.value.contains { $0.contains("state=active") } }.keys.sorted()
            #expect(owners.count == 1, "one user owns the subscription: \(status)")

            result = try await importLines([owner])
            #expect(result.stdout.contains("0 new, 0 replaced, 1 unchanged"), "\(result.stdout)")
            // The owner's app now holds another subscription: a newer id replaces the stored one.
            result = try await importLines([try second.importLine(userID: "owner", form: .transactionID)])
            #expect(result.stdout.contains("0 new, 1 replaced, 0 unchanged"), "\(result.stdout)")
            let afterReplace = try await CLI.run(
                ["status", "--json", "--user", "owner", "--database", database], environment: environment)
            #expect(afterReplace.stdout.contains(second.originalTransactionID) == false, "not checked yet")
            let rerun = try await CLI.run(["run", "--database", database], environment: environment)
            #expect(rerun.status == 0 && rerun.stdout.contains("checked 1"), "due now: \(rerun.stdout)")
            let replaced = try await Self.status(database, environment: environment)
            #expect(
                replaced["owner"]?.contains { $0.contains("original_transaction_id=\(second.originalTransactionID)") }
                    == true, "\(replaced["owner"] ?? [])")
        }
    }

    @Test(
        """
        Without the Server API (no credentials, or --source verify-receipt) a StoreKit 2 row fails with \
        needs_server_api, keeps its state, exit 3; check counts the rows waiting for credentials
        """)
    func needsServerAPI() async throws {
        try await ServerAPIMigrationTests.withSQLiteAndSimulator {
            directory, database, state, configuration, endpoints in
            let withAPI = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let withoutAPI = withAPI.filter {
                !["APPSTORE_KEY_ID", "APPSTORE_ISSUER_ID", "APPSTORE_PRIVATE_KEY_FILE"].contains($0.key)
            }
            let customer = SimulatedReceipt(
                account: "n-1", scenario: .renewal, start: state.now.addingTimeInterval(-86_400))
            let receiptCustomer = SimulatedReceipt(
                account: "n-2", scenario: .renewal, start: state.now.addingTimeInterval(-86_400))
            state.register([customer, receiptCustomer])
            #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            let lines = [
                try customer.importLine(userID: "storekit", form: .transactionID),
                try receiptCustomer.importLine(userID: "receipt", form: .receipt),
            ]
            #expect(
                try await CLI.run(
                    ["import", "-", "--database", database], environment: withoutAPI,
                    stdin: lines.joined(separator: "\n") + "\n"
                ).status == 0)
            let check = try await CLI.run(["check", "--database", database], environment: withoutAPI)
            #expect(check.stdout.contains("storekit 2 rows: 1 imported by transaction id wait for"), "\(check.stdout)")

            for (name, arguments, environment) in [
                ("no credentials", ["run"], withoutAPI),
                ("verify-receipt", ["backfill", "--all", "--source", "verify-receipt"], withAPI),
            ] {
                let requests = state.stats.requests
                let report = directory + "/\(name).json"
                let result = try await CLI.run(
                    arguments + ["--database", database, "--report", report], environment: environment)
                #expect(result.status == 3, "\(name): \(result.stdout)\n\(result.stderr)")
                let failures = try #require(try ServerAPIMigrationTests.json(report)["failures"] as? [[String: Any]])
                #expect(
                    failures.count == 1 && failures.first?["reason"] as? String == "needs_server_api", "\(failures)")
                #expect(failures.first?["user_id"] as? String == "storekit")
                #expect(state.stats.requests <= requests + 1, "\(name): only the receipt row went to verifyReceipt")
                let status = try await Self.status(database, environment: withoutAPI)
                #expect(status["storekit"]?.first?.contains("state=unverified") == true, "\(status)")
            }
            let withCredentials = try await CLI.run(
                ["backfill", "--all", "--database", database], environment: withAPI)
            #expect(withCredentials.status == 0, "\(withCredentials.stdout)\n\(withCredentials.stderr)")
            let status = try await Self.status(database, environment: withAPI)
            #expect(status["storekit"]?.first?.contains("state=active") == true, "\(status)")
            // With credentials, check also reads a page of the change feed.
            let checked = try await CLI.run(["check", "--database", database], environment: withAPI)
            #expect(checked.stdout.contains("change feed: ok (") || checked.stdout.contains("change feed: readable"))
            #expect(!checked.stdout.contains("change feed: not readable"), "\(checked.stdout)")
        }
    }
}

extension StoreKit2ImportTests {
    /// The import line without its `app_account_token`.
    static func withoutToken(_ line: String) throws -> String {
        var object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        object["app_account_token"] = nil
        return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }
}
