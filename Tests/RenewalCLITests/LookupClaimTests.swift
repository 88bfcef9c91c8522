import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalServerAPI
import RenewalSQLite
import Testing

/// `renewal lookup` and `renewal claim` as support runs them (issue 44), through the built binary against
/// the in-process simulator's Look Up Order ID and Set App Account Token, on SQLite and PostgreSQL.
@Suite("renewal lookup and renewal claim: an order found at Apple, shown as the database holds it, and claimed")
struct LookupClaimTests {
    /// What a test gets: the simulator, the Server API environment, the database URL, the flags naming it,
    /// the customer alice (imported and checked) and two purchases the app never stored (adopted unclaimed
    /// by the first run's change feed).
    struct Setup {
        var state: SimulatorState
        var environment: [String: String]
        var database: String
        var alice: SimulatedReceipt
        var lost: [SimulatedReceipt]
        var directory: String

        var flags: [String] { ["--database", database] }
    }

    static func withSetup(_ backend: String, _ body: (Setup) async throws -> Void) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let database = try await StoreKit2ImportTests.database(backend, directory: directory, name: "support")
            defer { database.drop() }
            let alice = SimulatedReceipt(
                account: "support-alice-\(backend)", scenario: .renewal, start: state.now - 3 * 86_400)
            state.register([alice])
            let lost = state.makeLostPurchases(
                count: 2, prefix: "support-lost-\(backend)", start: state.now - 2 * 3_600, spacing: 600)
            let flags = ["--database", database.url]
            #expect(try await CLI.run(["migrate"] + flags).status == 0)
            let imported = try await CLI.run(
                ["import", "-"] + flags, environment: environment,
                stdin: ServerAPIMigrationTests.importLines([("alice", alice)]))
            #expect(imported.status == 0, "\(imported.stderr)")
            let run = try await CLI.run(
                ["run", "--now", Timestamp.string(state.now), "--feed-overlap-minutes", "1440"] + flags,
                environment: environment)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            try await body(
                Setup(
                    state: state, environment: environment, database: database.url, alice: alice, lost: lost,
                    directory: directory))
        }
    }

    /// `lookup --order-id ORDER --json`, parsed, with its exit status.
    static func lookup(_ orderID: String, _ setup: Setup) async throws -> (status: Int32, json: [String: Any]) {
        let result = try await CLI.run(
            ["lookup", "--order-id", orderID, "--json"] + setup.flags, environment: setup.environment)
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            "\(result.stdout)\n\(result.stderr)")
        return (result.status, json)
    }

    static func subscriptions(_ json: [String: Any]) -> [[String: Any]] {
        json["subscriptions"] as? [[String: Any]] ?? []
    }

    @Test(
        """
        lookup: an order of an adopted purchase shows its verified transactions and the subscription unclaimed \
        with Apple's state; alice's order shows her; a purchase the feed has not brought is not in the \
        database; an unknown order exits 3 saying so; no key exits 78 naming the variables; nothing is written
        """,
        arguments: StoreKit2ImportTests.backends)
    func lookup(backend: String) async throws {
        try await Self.withSetup(backend) { setup in
            let before = try await CLI.run(["status", "--json"] + setup.flags, environment: setup.environment).stdout

            let lost = try await Self.lookup(setup.lost[0].orderID, setup)
            #expect(lost.status == 0, "\(lost.json)")
            #expect(lost.json["status"] as? String == "valid")
            #expect(lost.json["environment"] as? String == "Production")
            let transactions = lost.json["transactions"] as? [[String: Any]] ?? []
            #expect(
                transactions.contains {
                    $0["original_transaction_id"] as? String == setup.lost[0].originalTransactionID
                },
                "\(transactions)")
            #expect(
                transactions.allSatisfy { $0["app_account_token"] as? String == setup.lost[0].accountToken },
                "\(transactions)")
            let held = try #require(Self.subscriptions(lost.json).first, "\(lost.json)")
            #expect(held["original_transaction_id"] as? String == setup.lost[0].originalTransactionID)
            #expect(held["owner"] as? String == "unclaimed", "\(held)")
            #expect(held["user_id"] is NSNull, "\(held)")
            #expect(held["state"] as? String == "active", "\(held)")
            #expect(held["entitled"] as? Bool == true, "\(held)")

            let text = try await CLI.run(
                ["lookup", "--order-id", setup.lost[0].orderID] + setup.flags, environment: setup.environment)
            #expect(text.status == 0)
            #expect(text.stdout.contains("unclaimed"), "\(text.stdout)")
            #expect(
                text.stdout.contains("renewal claim --original-transaction-id \(setup.lost[0].originalTransactionID)"),
                "\(text.stdout)")
            #expect(!text.stdout.contains("eyJ"), "no signed transaction is printed")

            let alice = try await Self.lookup(setup.alice.orderID, setup)
            #expect(alice.status == 0)
            #expect(Self.subscriptions(alice.json).first?["owner"] as? String == "user", "\(alice.json)")
            #expect(Self.subscriptions(alice.json).first?["user_id"] as? String == "alice", "\(alice.json)")

            let late = setup.state.makeLostPurchases(count: 1, prefix: "support-late-\(backend)")[0]
            let notHeld = try await Self.lookup(late.orderID, setup)
            #expect(notHeld.status == 0)
            #expect(Self.subscriptions(notHeld.json).first?["owner"] as? String == "not_in_database", "\(notHeld.json)")
            #expect(Self.subscriptions(notHeld.json).first?["state"] is NSNull, "\(notHeld.json)")

            let invalid = try await CLI.run(
                ["lookup", "--order-id", "MZZZZZZZZZ"] + setup.flags, environment: setup.environment)
            #expect(invalid.status == 3, "\(invalid.stdout)\n\(invalid.stderr)")
            #expect(invalid.stderr.contains("does not know order ID MZZZZZZZZZ"), "\(invalid.stderr)")
            #expect(invalid.stdout.contains("invalid"), "\(invalid.stdout)")

            let keyless = setup.environment.filter {
                !["APPSTORE_KEY_ID", "APPSTORE_ISSUER_ID", "APPSTORE_PRIVATE_KEY_FILE"].contains($0.key)
            }
            let noKey = try await CLI.run(
                ["lookup", "--order-id", setup.lost[0].orderID] + setup.flags, environment: keyless)
            #expect(noKey.status == 78, "\(noKey.stderr)")
            #expect(noKey.stderr.contains("APPSTORE_KEY_ID") && noKey.stderr.contains("APPSTORE_PRIVATE_KEY_FILE"))

            let after = try await CLI.run(["status", "--json"] + setup.flags, environment: setup.environment).stdout
            #expect(before == after, "lookup wrote nothing")
        }
    }

    @Test(
        """
        claim: by order ID an unclaimed purchase becomes bob's; another user's claim exits 78 naming bob and \
        changes nothing; --reassign moves it; --set-app-account-token binds the token at Apple for a user who \
        already has a receipt; an id the database does not hold and an invalid order exit 3
        """,
        arguments: StoreKit2ImportTests.backends)
    func claim(backend: String) async throws {
        try await Self.withSetup(backend) { setup in
            let (first, second) = (setup.lost[0], setup.lost[1])
            let claimed = try await CLI.run(
                ["claim", "--order-id", first.orderID, "--user", "bob"] + setup.flags, environment: setup.environment)
            #expect(claimed.status == 0, "\(claimed.stdout)\n\(claimed.stderr)")
            #expect(claimed.stdout.contains("Claimed \(first.originalTransactionID) for bob: was unclaimed"))
            #expect(
                Self.subscriptions(try await Self.lookup(first.orderID, setup).json).first?["user_id"] as? String
                    == "bob")

            let again = try await CLI.run(
                ["claim", "--original-transaction-id", first.originalTransactionID, "--user", "bob"] + setup.flags)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("already theirs"), "\(again.stdout)")

            let refused = try await CLI.run(
                ["claim", "--original-transaction-id", first.originalTransactionID, "--user", "carol"] + setup.flags)
            #expect(refused.status == 78, "\(refused.stdout)\n\(refused.stderr)")
            #expect(refused.stderr.contains("belongs to user bob") && refused.stderr.contains("--reassign"))
            #expect(
                Self.subscriptions(try await Self.lookup(first.orderID, setup).json).first?["user_id"] as? String
                    == "bob")

            let moved = try await CLI.run(
                ["claim", "--original-transaction-id", first.originalTransactionID, "--user", "carol", "--reassign"]
                    + setup.flags)
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(moved.stdout.contains("moved from user bob"), "\(moved.stdout)")
            #expect(
                Self.subscriptions(try await Self.lookup(first.orderID, setup).json).first?["user_id"] as? String
                    == "carol")

            let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
            let withToken = try await CLI.run(
                [
                    "claim", "--original-transaction-id", second.originalTransactionID, "--user", "alice",
                    "--set-app-account-token", token,
                ] + setup.flags, environment: setup.environment)
            #expect(withToken.status == 0, "\(withToken.stdout)\n\(withToken.stderr)")
            #expect(setup.state.appAccountTokenChanges(of: second.originalTransactionID).last?.token == token)
            let secondHeld = Self.subscriptions(try await Self.lookup(second.orderID, setup).json).first
            #expect(secondHeld?["user_id"] as? String == "alice", "\(secondHeld ?? [:])")
            #expect(secondHeld?["app_account_token"] as? String == token, "\(secondHeld ?? [:])")
            let aliceRows = try await CLI.run(["status", "--json", "--user", "alice"] + setup.flags).stdout
            #expect(aliceRows.contains(setup.alice.originalTransactionID), "alice keeps her own subscription")
            // Claimed for a user who already had a receipt, the purchase keeps its reserved key; `status --user`
            // still lists it under her, as a support agent asking about alice expects.
            #expect(aliceRows.contains(second.originalTransactionID), "\(aliceRows)")

            let unknown = try await CLI.run(
                ["claim", "--original-transaction-id", "999999999", "--user", "bob"] + setup.flags)
            #expect(unknown.status == 3, "\(unknown.stderr)")
            #expect(unknown.stderr.contains("holds no subscription with original transaction id 999999999"))
            let invalid = try await CLI.run(
                ["claim", "--order-id", "MZZZZZZZZZ", "--user", "bob"] + setup.flags, environment: setup.environment)
            #expect(invalid.status == 3, "\(invalid.stderr)")
            #expect(invalid.stderr.contains("does not know order ID MZZZZZZZZZ"), "\(invalid.stderr)")
        }
    }

    @Test("claim takes the writers' lock: during copy-database it exits 75 and claims nothing (SQLite)")
    func claimWaitsForTheCopy() async throws {
        try await Self.withSetup("sqlite") { setup in
            let sqlite = try SQLiteDatabase(path: setup.database, create: false)
            let claim =
                ["claim", "--original-transaction-id", setup.lost[0].originalTransactionID, "--user", "bob"]
                + setup.flags
            let held = try await sqlite.withCopyLock(owner: "copy-in-test") { try await CLI.run(claim) }
            #expect(held.status == 75, "\(held.stdout)\n\(held.stderr)")
            let lookup = try await Self.lookup(setup.lost[0].orderID, setup)
            #expect(Self.subscriptions(lookup.json).first?["owner"] as? String == "unclaimed", "\(lookup.json)")
        }
    }

    @Test(
        """
        lookup trusts only what verifies: with another root configured every transaction of the order is \
        refused and counted, none is shown, exit 3; claim --set-app-account-token on a family-shared \
        purchase keeps the claim and exits 3 with Apple's errorCode
        """,
        arguments: StoreKit2ImportTests.backends)
    func refusals(backend: String) async throws {
        try await Self.withSetup(backend) { setup in
            let otherRoot = setup.directory + "/other-root.pem"
            try SigningChain.generate(name: "not apple").rootPEM().write(
                toFile: otherRoot, atomically: true, encoding: .utf8)
            var forged = setup.environment
            forged["APPSTORE_ROOT_CERTIFICATES"] = otherRoot
            let result = try await CLI.run(
                ["lookup", "--order-id", setup.lost[0].orderID, "--json"] + setup.flags, environment: forged)
            #expect(result.status == 3, "\(result.stdout)\n\(result.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect((json["transactions"] as? [Any])?.isEmpty == true, "\(json)")
            #expect((json["refused"] as? [String])?.isEmpty == false, "\(json)")
            let forgedClaim = try await CLI.run(
                ["claim", "--order-id", setup.lost[0].orderID, "--user", "bob"] + setup.flags, environment: forged)
            #expect(forgedClaim.status == 3, "\(forgedClaim.stdout)\n\(forgedClaim.stderr)")
            #expect(forgedClaim.stderr.contains("failed verification"), "\(forgedClaim.stderr)")

            let family = setup.state.makeLostPurchases(
                count: 1, prefix: "support-family-\(backend)", scenario: .familyShared)[0]
            let imported = try await CLI.run(
                ["import", "-"] + setup.flags, environment: setup.environment,
                stdin: ServerAPIMigrationTests.importLines([("dora", family)]))
            #expect(imported.status == 0, "\(imported.stderr)")
            let run = try await CLI.run(
                ["run", "--now", Timestamp.string(setup.state.now)] + setup.flags, environment: setup.environment)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let claim = try await CLI.run(
                [
                    "claim", "--original-transaction-id", family.originalTransactionID, "--user", "dora",
                    "--set-app-account-token", "7e3fb20b-4cdb-47cc-936d-99d65f608138",
                ] + setup.flags, environment: setup.environment)
            #expect(claim.status == 3, "\(claim.stdout)\n\(claim.stderr)")
            #expect(claim.stdout.contains("already theirs"), "\(claim.stdout)\n\(claim.stderr)")
            #expect(claim.stderr.contains("4000185") && claim.stderr.contains("run the same command again"))
            #expect(setup.state.appAccountTokenChanges(of: family.originalTransactionID).isEmpty)
        }
    }

    @Test(
        """
        claim with a webhook URL set queues purchase.claimed for the user, and deliver sends it signed: the app \
        hears that the customer it can restore access for is bob
        """,
        arguments: StoreKit2ImportTests.backends)
    func claimQueuesItsWebhook(backend: String) async throws {
        try await Self.withSetup(backend) { setup in
            let secret = WebhookTests.secret()
            let receiver = WebhookReceiver(secret: secret)
            try await receiver.serve { url in
                let path = setup.directory + "/webhook-secret"
                try secret.write(toFile: path, atomically: true, encoding: .utf8)
                var environment = setup.environment
                environment["RENEWAL_WEBHOOK_URL"] = url
                environment["RENEWAL_WEBHOOK_SECRET_FILE"] = path
                let id = setup.lost[0].originalTransactionID
                let claim = try await CLI.run(
                    ["claim", "--original-transaction-id", id, "--user", "bob"] + setup.flags, environment: environment)
                #expect(claim.status == 0, "\(claim.stderr)")
                let deliver = try await CLI.run(["deliver"] + setup.flags, environment: environment)
                #expect(deliver.status == 0, "\(deliver.stdout)\n\(deliver.stderr)")
                let claimed = receiver.received.filter { $0.body["type"] as? String == "purchase.claimed" }
                #expect(claimed.count == 1, "\(receiver.received.map(\.body))")
                let data = claimed.first?.body["data"] as? [String: Any] ?? [:]
                #expect(data["user_id"] as? String == "bob" && data["original_transaction_id"] as? String == id)
                #expect(data["kind"] as? String == "purchase_claimed", "\(data)")
                #expect(claimed.allSatisfy { $0.signatureValid })
            }
        }
    }

    @Test(
        """
        Several apps: lookup asks each app's key until one knows the order (another app's key answers status 1, \
        as Apple does), verifies it against that app's bundle, and names the app
        """)
    func severalApps() async throws {
        try await SeveralAppsServerAPITests.withApps("sqlite", macKeyAccepted: true) {
            _, database, state, environment in
            let mac = SimulatedReceipt(
                account: "support-mac-\(UUID().uuidString.prefix(8))", scenario: .renewal, start: state.now - 86_400,
                productID: SeveralAppsTests.macProduct, bundle: SeveralAppsTests.mac)
            state.register([mac])
            #expect(try await CLI.run(["migrate", "--database", database]).status == 0)
            let result = try await CLI.run(
                ["lookup", "--order-id", mac.orderID, "--json", "--database", database], environment: environment)
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect(json["bundle_id"] as? String == SeveralAppsTests.mac, "\(json)")
            #expect(Self.subscriptions(json).first?["original_transaction_id"] as? String == mac.originalTransactionID)
            #expect(Self.subscriptions(json).first?["owner"] as? String == "not_in_database", "\(json)")
        }
    }

}
