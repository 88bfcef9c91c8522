import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

/// `renewal extend` as an operator runs it: the run lock, the dry run's judgement and the help.
@Suite("renewal extend: the run lock, a dry run that tells what the real call does, its own help")
struct ExtendCommandTests {
    /// Three subscribers of the monthly product, imported and checked: two renewing, one sandbox tester.
    static func withCheckedDatabase(
        _ body: (
            _ state: SimulatorState, _ environment: [String: String], _ database: [String], _ now: [String],
            _ directory: String
        ) async throws -> Void
    ) async throws {
        try await CLI.withDirectoryAndSimulator(secret: ServerAPIMigrationTests.secret) {
            directory, state, configuration, endpoints in
            let environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            let database = ["--database", directory + "/renewal.sqlite"]
            let receipts = [
                (
                    "user-0",
                    SimulatedReceipt(account: "extend-cli-0", scenario: .renewal, start: state.now - 5 * 86_400)
                ),
                (
                    "user-1",
                    SimulatedReceipt(account: "extend-cli-1", scenario: .renewal, start: state.now - 6 * 86_400)
                ),
                (
                    "tester",
                    SimulatedReceipt(account: "extend-cli-t", scenario: .sandbox, start: state.now - 7 * 86_400)
                ),
            ]
            state.register(receipts.map(\.1))
            let file = directory + "/lines.jsonl"
            try ServerAPIMigrationTests.importLines(receipts).write(toFile: file, atomically: true, encoding: .utf8)
            #expect(try await CLI.run(["migrate"] + database, environment: environment).status == 0)
            #expect(try await CLI.run(["import", file] + database, environment: environment).status == 0)
            let now = ["--now", Timestamp.string(state.now)]
            let run = try await CLI.run(["run", "--source", "server-api"] + now + database, environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
            try await body(state, environment, database, now, directory)
        }
    }

    @Test(
        """
        With another run holding the SQLite run lock, renewal extend exits 75 before it sends anything (no \
        extension request reaches Apple, nothing is stored), for --user and --product; once the lock is free \
        the same command extends
        """)
    func runLockHeld() async throws {
        try await Self.withCheckedDatabase { state, environment, database, now, directory in
            let store = try SQLiteSubscriptionStore.open(path: directory + "/renewal.sqlite", create: false)
            let extend = ["extend", "--days", "7", "--reason", "3", "--source", "server-api"] + now + database
            let (user, product) = try await store.withRunLock(owner: "a-run-in-progress") {
                (
                    try await CLI.run(extend + ["--user", "user-0"], environment: environment),
                    try await CLI.run(extend + ["--product", "com.example.pro.monthly"], environment: environment)
                )
            }
            for result in [user, product] {
                #expect(result.status == 75, "\(result.stdout)\n\(result.stderr)")
                #expect(result.stderr.contains("lock"), "\(result.stderr)")
                #expect(!result.stdout.contains("extended"), "\(result.stdout)")
            }
            #expect(state.extensionRequests.isEmpty && state.massExtensions.isEmpty, "nothing sent")
            let sqlite = try SQLiteDatabase(path: directory + "/renewal.sqlite", create: false)
            let stored = try await sqlite.withConnection { connection in
                try connection.execute("SELECT request_identifier FROM renewal_extensions", []).count
                    + connection.execute("SELECT request_identifier FROM renewal_mass_extensions", []).count
            }
            #expect(stored == 0, "nothing stored")

            let free = try await CLI.run(extend + ["--user", "user-0"], environment: environment)
            #expect(free.status == 0, "\(free.stdout)\n\(free.stderr)")
            #expect(free.stdout.contains("extended"), "\(free.stdout)")
            #expect(state.extensionRequests.count == 1)
        }
    }

    @Test(
        """
        renewal extend --dry-run judges as the real call does: a subscriber this intent already extended is \
        already_extended, a mass extension Apple accepted is reported in progress instead of its subscribers, and \
        a production mass extension never lists sandbox testers
        """)
    func dryRunTellsWhatTheRealCallDoes() async throws {
        try await Self.withCheckedDatabase { state, environment, database, now, _ in
            let extend = ["extend", "--days", "7", "--reason", "3", "--intent", "outage-1"] + now + database
            let users = ["--user", "user-0", "--user", "user-1"]
            let first = try await CLI.run(extend + users, environment: environment)
            #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
            let dry = try await CLI.run(extend + users + ["--dry-run"], environment: environment)
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.stdout.contains("already_extended 2") && !dry.stdout.contains("would_extend"), "\(dry.stdout)")

            let product = ["--product", "com.example.pro.monthly", "--intent", "outage-mass"]
            let massDry = try await CLI.run(
                Array(extend.dropLast(database.count + now.count)) + product + ["--dry-run"] + now + database,
                environment: environment)
            #expect(massDry.status == 0, "\(massDry.stderr)")
            #expect(massDry.stdout.contains("would_extend 2"), "\(massDry.stdout)")
            #expect(!massDry.stdout.contains("tester"), "a production mass extension lists no sandbox tester")
            let mass = try await CLI.run(extend + product, environment: environment)
            #expect(mass.status == 0 && mass.stdout.contains("accepted"), "\(mass.stdout)\n\(mass.stderr)")
            let massAgain = try await CLI.run(extend + product + ["--dry-run"], environment: environment)
            #expect(massAgain.status == 0, "\(massAgain.stderr)")
            #expect(massAgain.stdout.contains("in progress"), "\(massAgain.stdout)")
            #expect(!massAgain.stdout.contains("would_extend"), "\(massAgain.stdout)")
            #expect(state.massExtensions.count == 1)
        }
    }

    @Test("renewal extend --help lists extend's own options in extend's words, not run's")
    func helpIsExtendsOwn() async throws {
        let help = try await CLI.run(["extend", "--help"])
        #expect(help.status == 0)
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for own in ["--days", "--reason", "--user", "--product", "--storefront", "--intent", "--dry-run", "--report"] {
            #expect(text.contains(own), "extend --help names \(own)")
        }
        for runs in [
            "--concurrency", "--limit", "--lease-seconds", "--breaker-threshold", "--history-requests",
            "--refund-preference", "--feed-overlap-minutes", "--schedule", "Verify and report changes",
        ] {
            #expect(!text.contains(runs), "extend --help shows run's \(runs)")
        }
        #expect(text.contains("send nothing") || text.contains("sends nothing"), "\(text)")
    }
}
