import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalSQLite
import Testing

/// `renewal discover` through the real binary and the simulator's Notification History, on SQLite and
/// PostgreSQL: a database that imported nothing adopts every purchase with a notification in the window
/// and none outside it, a second discover adopts nothing new, and a wider window adopts the rest.
@Suite("renewal discover")
struct DiscoverTests {
    static let day: TimeInterval = 86_400

    /// `discover --json` on `target`, decoded.
    static func discover(
        _ since: String, _ target: KillLoopTests.Target, state: SimulatorState, environment: [String: String],
        expecting status: Int32 = 0
    ) async throws -> [String: Any] {
        let result = try await CLI.run(
            ["discover", "--since", since, "--json", "--now", Timestamp.string(state.now)] + target.arguments,
            environment: environment)
        #expect(result.status == status, "\(result.stdout)\n\(result.stderr.suffix(2_000))")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    static func adoptedIDs(_ target: KillLoopTests.Target) async throws -> [String] {
        try await target.lines("SELECT original_transaction_id FROM adopted_purchases ORDER BY original_transaction_id")
    }

    @Test(
        """
        discover --since 30d on an empty database adopts exactly the purchases with a notification in the last \
        30 days, due now, with their revenue; again adopts nothing; --since 180d adopts the older ones
        """,
        arguments: FeedKillTests.backends)
    func findsWhatTheWindowHolds(backend: String) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            // Yearly subscriptions: each one's only notification is its purchase.
            let inside = state.makeLostPurchases(
                count: 4, prefix: "inside", start: state.now.addingTimeInterval(-20 * Self.day), spacing: Self.day,
                withToken: false, period: 365 * Self.day)
            let outside = state.makeLostPurchases(
                count: 3, prefix: "outside", start: state.now.addingTimeInterval(-100 * Self.day), spacing: Self.day,
                withToken: false, period: 365 * Self.day)
            try await FeedKillTests.withReferenceAndVictim(backend, directory: directory, receipts: []) { target, _ in
                let first = try await Self.discover("30d", target, state: state, environment: environment)
                #expect(first["adopted"] as? Int == inside.count, "\(first)")
                #expect(first["subscriptions_found"] as? Int == inside.count)
                #expect(first["already_held"] as? Int == 0)
                let revenue = first["revenue"] as? [[String: Any]] ?? []
                #expect(revenue.count == 1 && revenue.first?["currency"] as? String == "USD", "\(revenue)")
                #expect(revenue.first?["milliunits"] as? Int == inside.count * 99_990, "\(revenue)")
                let insideIDs = inside.map(\.originalTransactionID).sorted()
                #expect(try await Self.adoptedIDs(target) == insideIDs)
                let due =
                    "SELECT COUNT(*) FROM receipts WHERE next_check_at <= \(AppleDateFormat.milliseconds(state.now))"
                #expect(try await target.count(due) == inside.count, "adopted rows are due now")
                // The regular feed's cursor is not moved.
                #expect(try await target.count("SELECT COUNT(*) FROM feed_cursors") == 0)

                // The next run checks the adopted rows: each gets its state from Apple.
                let run = try await CLI.run(
                    ["run", "--now", Timestamp.string(state.now)] + target.arguments, environment: environment)
                #expect(run.status == 0, "\(run.stdout)\n\(run.stderr.suffix(2_000))")
                let checked = "SELECT COUNT(*) FROM subscriptions WHERE state = 'active'"
                #expect(try await target.count(checked) == inside.count, "the run checked what discover adopted")

                let again = try await Self.discover("30d", target, state: state, environment: environment)
                #expect(again["adopted"] as? Int == 0, "\(again)")
                #expect(again["already_held"] as? Int == inside.count)
                #expect(again["new_notifications"] as? Int == 0)

                let wider = try await Self.discover("180d", target, state: state, environment: environment)
                #expect(wider["adopted"] as? Int == outside.count, "\(wider)")
                #expect(wider["already_held"] as? Int == inside.count)
                let allIDs = (inside + outside).map(\.originalTransactionID).sorted()
                #expect(try await Self.adoptedIDs(target) == allIDs)
                let changes = "SELECT COUNT(*) FROM entitlement_changes WHERE kind = 'purchase_unclaimed'"
                #expect(try await target.count(changes) == allIDs.count, "one purchase_unclaimed change each")
            }
        }
    }

    @Test("The text output names the window and each count, and the revenue as an amount")
    func textOutput() async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            _ = state.makeLostPurchases(
                count: 2, prefix: "text", start: state.now.addingTimeInterval(-Self.day), withToken: false,
                period: 365 * Self.day)
            let database = directory + "/text.sqlite"
            let migrated = try await CLI.run(["migrate", "--database", database])
            #expect(migrated.status == 0, "\(migrated.stderr)")
            let result = try await CLI.run(
                ["discover", "--since", "2d", "--now", Timestamp.string(state.now), "--database", database],
                environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            for line in [
                "Production: ", "Subscriptions found: 2", "  adopted: 2", "  already held: 0",
                "Revenue of the adopted transactions: 199.98 USD", "the next `renewal run` checks them",
            ] {
                #expect(result.stdout.contains(line), "\(line) missing from:\n\(result.stdout)")
            }
        }
    }

    @Test(
        """
        An outage of Notification History is exit 3 naming the stream, adopting nothing; run again once Apple \
        answers, discover resumes that window and adopts everything. During copy-database it exits 75 (SQLite)
        """)
    func failureAndLock() async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let lost = state.makeLostPurchases(
                count: 3, prefix: "outage", start: state.now.addingTimeInterval(-Self.day), withToken: false,
                period: 365 * Self.day)
            let database = directory + "/outage.sqlite"
            let target = KillLoopTests.Target.sqlite(database)
            let migrated = try await CLI.run(["migrate", "--database", database])
            #expect(migrated.status == 0, "\(migrated.stderr)")
            let sqlite = try SQLiteDatabase(path: database, create: false)
            let arguments = ["discover", "--since", "2d", "--now", Timestamp.string(state.now), "--database", database]
            let locked = try await sqlite.withCopyLock(owner: "copy-in-test") {
                try await CLI.run(arguments, environment: environment)
            }
            #expect(locked.status == 75, "\(locked.stdout)\n\(locked.stderr)")
            #expect(try await target.count("SELECT COUNT(*) FROM discover_cursors") == 0, "nothing written")

            state.feedFault = .outage
            let outage = try await CLI.run(arguments + ["--json", "--max-attempts", "1"], environment: environment)
            #expect(outage.status == 3, "\(outage.stdout)\n\(outage.stderr.suffix(2_000))")
            let failed = try #require(
                try JSONSerialization.jsonObject(with: Data(outage.stdout.utf8)) as? [String: Any])
            let failures = failed["failed"] as? [[String: Any]] ?? []
            #expect(failures.map { $0["stream"] as? String } == ["Production", "Sandbox"], "\(failed)")
            #expect(failed["adopted"] as? Int == 0)
            state.feedFault = .none
            let rerun = try await Self.discover("2d", target, state: state, environment: environment)
            #expect(rerun["adopted"] as? Int == lost.count, "\(rerun)")
            let windows = rerun["windows"] as? [[String: Any]] ?? []
            #expect(windows.allSatisfy { $0["resumed"] as? Bool == true }, "\(windows)")
        }
    }

    @Test("--since beyond Apple's 180 days is a usage error naming the limit; no key is exit 78")
    func refusals() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/discover.sqlite"
        let migrated = try await CLI.run(["migrate", "--database", database])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let tooFar = try await CLI.run(["discover", "--since", "181d", "--database", database])
        #expect(tooFar.status == 64)
        #expect(tooFar.stderr.contains("180 days"), "\(tooFar.stderr)")
        let noKey = try await CLI.run(
            ["discover", "--since", "30d", "--database", database], environment: ["APPSTORE_BUNDLE_ID": "com.example"])
        #expect(noKey.status == 78, "\(noKey.stderr)")
        #expect(noKey.stderr.contains("APPSTORE_KEY_ID"), "\(noKey.stderr)")
    }
}
