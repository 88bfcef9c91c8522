import AppStoreSimulator
import Foundation
import RenewalCore
import Testing

/// Issue 44's last gaps through the built binary, the simulator over HTTP and SQLite and PostgreSQL: an
/// import's claims queue `purchase.claimed`, unclaimed changes show no user, a user's backfill takes the purchases claimed for them, and the run's unclaimed gauges are
/// written when the run ends with failures too.
@Suite("Lost purchases: import claims, unclaimed users, whole orders, backfill and gauges")
struct LostPurchaseGapsTests {
    /// The webhook environment of `setup`, delivering to `url` signed with `secret`.
    static func webhookEnvironment(_ setup: LookupClaimTests.Setup, url: String, secret: String) throws
        -> [String: String]
    {
        let path = setup.directory + "/webhook-secret"
        try secret.write(toFile: path, atomically: true, encoding: .utf8)
        var environment = setup.environment
        environment["RENEWAL_WEBHOOK_URL"] = url
        environment["RENEWAL_WEBHOOK_SECRET_FILE"] = path
        return environment
    }

    @Test(
        """
        import: a registered token and a transaction-id line claim the waiting purchases and queue \
        purchase.claimed for their users (delivered signed); a later unclaimed purchase's webhooks and \
        reports show user_id null, not its reserved key
        """,
        arguments: StoreKit2ImportTests.backends)
    func importClaimsQueueWebhooks(backend: String) async throws {
        try await LookupClaimTests.withSetup(backend) { setup in
            let secret = WebhookTests.secret()
            let receiver = WebhookReceiver(secret: secret)
            try await receiver.serve { url in
                let environment = try Self.webhookEnvironment(setup, url: url, secret: secret)
                let token = try #require(setup.lost[1].accountToken)
                let lines = [
                    #"{"user_id": "dave", "app_account_token": "\#(token)"}"#,
                    #"{"user_id": "erin", "original_transaction_id": "\#(setup.lost[0].originalTransactionID)"}"#,
                ]
                let imported = try await CLI.run(
                    ["import", "-"] + setup.flags, environment: environment, stdin: lines.joined(separator: "\n") + "\n"
                )
                #expect(imported.status == 0, "\(imported.stdout)\n\(imported.stderr)")
                #expect(imported.stdout.contains("Tokens registered: 1; adopted purchases claimed: 1."))
                let deliver = try await CLI.run(["deliver"] + setup.flags, environment: environment)
                #expect(deliver.status == 0, "\(deliver.stdout)\n\(deliver.stderr)")
                let claimed = receiver.received.filter { $0.body["type"] as? String == "purchase.claimed" }
                let users = claimed.compactMap { ($0.body["data"] as? [String: Any])?["user_id"] as? String }
                #expect(users.sorted() == ["dave", "erin"], "\(receiver.received.map(\.body))")
                #expect(claimed.allSatisfy { $0.signatureValid })

                // A purchase adopted with webhooks set: its changes name no user while it is unclaimed.
                let late = setup.state.makeLostPurchases(
                    count: 1, prefix: "gaps-late-\(backend)", start: setup.state.now + 60, withToken: false)[0]
                setup.state.advance(by: 600)
                let run = try await CLI.run(
                    ["run", "--now", Timestamp.string(setup.state.now), "--feed-overlap-minutes", "1440"]
                        + setup.flags, environment: environment)
                #expect(run.status == 0, "\(run.stdout)\n\(run.stderr.suffix(1_000))")
                _ = try await CLI.run(["deliver"] + setup.flags, environment: environment)
                let lateData = receiver.received.compactMap { $0.body["data"] as? [String: Any] }.filter {
                    $0["original_transaction_id"] as? String == late.originalTransactionID
                }
                #expect(lateData.contains { $0["kind"] as? String == "purchase_unclaimed" }, "\(lateData)")
                #expect(!lateData.isEmpty && lateData.allSatisfy { $0["user_id"] is NSNull }, "\(lateData)")
                try await Self.expectReportsShowNoUser(late.originalTransactionID, setup)
            }
        }
    }

    /// `renewal report` (JSON and CSV) of the last run shows the unclaimed purchase without a user.
    static func expectReportsShowNoUser(_ id: String, _ setup: LookupClaimTests.Setup) async throws {
        let report = try await CLI.run(["report", "--format", "json"] + setup.flags)
        #expect(report.status == 0, "\(report.stderr)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any], "\(report.stdout)")
        let changes = (json["changes"] as? [[String: Any]] ?? []).filter {
            $0["original_transaction_id"] as? String == id
        }
        #expect(!changes.isEmpty && changes.allSatisfy { $0["user_id"] is NSNull }, "\(changes)")
        let csv = try await CLI.run(["report", "--format", "csv"] + setup.flags)
        let rows = csv.stdout.split(separator: "\r\n").filter { $0.contains(id) }
        #expect(!rows.isEmpty && rows.allSatisfy { !$0.contains("adopted:") }, "\(csv.stdout)")
        #expect(!csv.stdout.contains(PurchaseAdoption.reservedUserPrefix), "\(csv.stdout)")
    }

    @Test(
        """
        backfill --user alice re-checks the purchase claimed for her under its adopted row (she held a row \
        already) as well as her own row
        """,
        arguments: StoreKit2ImportTests.backends)
    func backfillTakesClaimedRows(backend: String) async throws {
        try await LookupClaimTests.withSetup(backend) { setup in
            let id = setup.lost[0].originalTransactionID
            let claim = try await CLI.run(["claim", "--original-transaction-id", id, "--user", "alice"] + setup.flags)
            #expect(claim.status == 0, "\(claim.stderr)")
            let report = setup.directory + "/backfill.json"
            let backfill = try await CLI.run(
                ["backfill", "--user", "alice", "--now", Timestamp.string(setup.state.now), "--report", report]
                    + setup.flags, environment: setup.environment)
            #expect(backfill.status == 0, "\(backfill.stdout)\n\(backfill.stderr.suffix(1_000))")
            let json = try ServerAPIMigrationTests.json(report)
            let counts = json["counts"] as? [String: Any] ?? [:]
            #expect(counts["checked"] as? Int == 2, "alice's row and the one claimed for her: \(counts)")
        }
    }

    @Test(
        """
        a run that ends with failures (exit 3) still writes the unclaimed gauges, and so does one that stops on \
        an error while the database can be read (SQLite locked by another process, exit 75): two purchases wait
        """,
        arguments: StoreKit2ImportTests.backends)
    func gaugesAfterFailures(backend: String) async throws {
        try await LookupClaimTests.withSetup(backend) { setup in
            let gone = SimulatedReceipt(
                account: "gaps-gone-\(backend)", scenario: .malformed, start: setup.state.now - 86_400)
            setup.state.register([gone])
            let imported = try await CLI.run(
                ["import", "-"] + setup.flags, environment: setup.environment,
                stdin: ServerAPIMigrationTests.importLines([("gone", gone)]))
            #expect(imported.status == 0, "\(imported.stderr)")
            let textfile = setup.directory + "/failed.prom"
            let run = try await CLI.run(
                ["run", "--now", Timestamp.string(setup.state.now), "--metrics-textfile", textfile] + setup.flags,
                environment: setup.environment)
            #expect(run.status == 3, "\(run.stdout)\n\(run.stderr.suffix(1_000))")
            try Self.expectWaiting(2, in: textfile)

            // A run that stops on an error (another process holds SQLite's write lock: exit 75) while the
            // database can still be read counts them too.
            guard backend == "sqlite" else { return }
            let locker = try await SQLiteWriteLocker(database: setup.database, directory: setup.directory)
            let stopped = setup.directory + "/stopped.prom"
            let locked = try await CLI.run(
                ["run", "--now", Timestamp.string(setup.state.now), "--metrics-textfile", stopped] + setup.flags,
                environment: setup.environment)
            locker.release()
            #expect(locked.status == 75, "\(locked.stdout)\n\(locked.stderr.suffix(1_000))")
            try Self.expectWaiting(2, in: stopped)
        }
    }

    /// The metrics textfile's `renewal_unclaimed_purchases` samples add up to `count`.
    static func expectWaiting(_ count: Int, in textfile: String) throws {
        let text = try String(contentsOfFile: textfile, encoding: .utf8)
        let waiting = text.split(separator: "\n").filter { $0.hasPrefix("renewal_unclaimed_purchases{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double(String($0)) } }
        #expect(waiting.reduce(0, +) == Double(count), "\(text)")
    }

    @Test(
        """
        lookup asks Look Up Order ID in production only (Apple does not serve it in the sandbox): an unknown \
        order and a sandbox purchase's order are invalid after one production request, none to the sandbox
        """,
        arguments: StoreKit2ImportTests.backends)
    func lookupIsProductionOnly(backend: String) async throws {
        try await LookupClaimTests.withSetup(backend) { setup in
            let sandbox = setup.state.makeLostPurchases(
                count: 1, prefix: "gaps-sandbox-\(backend)", scenario: .sandbox)[0]
            for orderID in ["MZZZZZZZZZ", sandbox.orderID] {
                let before = setup.state.serverAPIStats
                let result = try await CLI.run(
                    ["lookup", "--order-id", orderID] + setup.flags, environment: setup.environment)
                let after = setup.state.serverAPIStats
                #expect(result.status == 3, "\(result.stdout)\n\(result.stderr)")
                #expect(result.stderr.contains("does not know order ID \(orderID)"), "\(result.stderr)")
                #expect(after.orderLookups - before.orderLookups == 1, "\(orderID): \(before) \(after)")
                #expect(after.sandbox == before.sandbox, "\(orderID): the sandbox was asked")
            }
        }
    }

    @Test(
        """
        the dashboard's lost-purchase panels name the run's unclaimed gauges and the view unclaimed_purchases, \
        whose SQL lists the adopted purchases on SQLite and PostgreSQL
        """,
        arguments: StoreKit2ImportTests.backends)
    func dashboardShowsUnclaimed(backend: String) async throws {
        let (dashboard, sql) = try DeployFilesTests.dashboardPanels()
        let panels = dashboard["panels"] as? [[String: Any]] ?? []
        let expressions = panels.flatMap { panel in
            (panel["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String }
        }
        for metric in ["renewal_unclaimed_purchases{", "renewal_unclaimed_purchases_oldest_age_seconds{"] {
            #expect(expressions.contains { $0.contains(metric) }, "no panel shows \(metric)")
        }
        let query = try #require(sql.first { $0.query.contains("FROM unclaimed_purchases") }?.query)
        try await LookupClaimTests.withSetup(backend) { setup in
            let output: String
            if backend == "postgres" {
                let psql = try #require(PostgresKillTests.psqlPath)
                output = try await PostgresKillTests.sqlOffPool(query, url: setup.database, psql: psql)
            } else {
                output = try SQLiteShell.query(setup.database, query)
            }
            let rows = output.split(separator: "\n")
            #expect(rows.count >= 1 && rows.allSatisfy { $0.contains("com.example.pro.monthly") }, "\(output)")
            let purchases = rows.compactMap { Int($0.split(separator: "|")[5]) }.reduce(0, +)
            #expect(purchases == setup.lost.count, "\(output)")
        }
    }
}
