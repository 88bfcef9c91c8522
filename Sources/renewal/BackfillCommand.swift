import ArgumentParser
import Foundation
import RenewalCore
import RenewalJob
import RenewalStorage

struct BackfillCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backfill",
        abstract: "Re-check selected receipts now, whatever their schedule.",
        discussion: """
            Selectors combine (all must match): --all alone takes every receipt. Examples: \
            `renewal backfill --product com.example.pro.monthly` (every subscriber of a product), \
            `renewal backfill --user u1 --user u2`, `renewal backfill --expired-within-days 30` (everything \
            that expired in the last 30 days), `renewal backfill --app com.example.mac --all` (one app), `renewal backfill --state billing_retry --dry-run`. \
            Same options, report and exit codes as `run`.
            """ + EnvironmentHelp.text(.database, .apple, .webhook, .logging))

    @Flag(name: .long, help: "Select every receipt.")
    var all = false

    @Option(name: .customLong("user"), help: ArgumentHelp("A user id (repeatable).", valueName: "id"))
    var users: [String] = []

    @Option(name: .customLong("product"), help: ArgumentHelp("A product id (repeatable).", valueName: "id"))
    var products: [String] = []

    @Option(
        name: .customLong("state"),
        help: ArgumentHelp(
            "A state (repeatable): \(SubscriptionState.allCases.map(\.rawValue).joined(separator: ", ")).",
            valueName: "state"))
    var states: [String] = []

    @Option(name: .long, help: "Subscriptions that expired (and are not entitled) within this many days.")
    var expiredWithinDays: Int?

    @Option(name: .long, help: "Receipts last answered by this environment: Production or Sandbox.")
    var environment: String?

    @Option(
        name: .customLong("app"),
        help: ArgumentHelp(
            "Receipts of this app, by bundle id (repeatable); rows whose app is not known yet are not selected.",
            valueName: "bundle-id"))
    var bundleIDs: [String] = []

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var serverAPI: ServerAPIOptions
    @OptionGroup var options: RunOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        for state in states where SubscriptionState(rawValue: state) == nil {
            throw ValidationError(
                """
                --state \(state) is not a state; use one of \
                \(SubscriptionState.allCases.map(\.rawValue).joined(separator: ", ")).
                """
            )
        }
        if let days = expiredWithinDays, days < 1 { throw ValidationError("--expired-within-days must be at least 1.") }
        if let environment, !["Production", "Sandbox"].contains(environment) {
            throw ValidationError("--environment must be Production or Sandbox.")
        }
        if selector(now: Date()).isEmpty {
            throw ValidationError(
                """
                Say which receipts to re-check: --all, --user, --product, --state, --expired-within-days, \
                --environment or --app.
                """
            )
        }
    }

    func selector(now: Date) -> BackfillSelector {
        BackfillSelector(
            all: all, userIDs: users, productIDs: products,
            states: states.compactMap(SubscriptionState.init(rawValue:)),
            expiredSince: expiredWithinDays.map { now.addingTimeInterval(-Double($0) * 86_400) },
            environment: environment.map(AppStoreEnvironment.init(rawValue:)), bundleIDs: bundleIDs)
    }

    func run() async throws {
        try await JobRunner(
            database: database, appStore: appStore, serverAPI: serverAPI, options: options, logging: logging
        )
        .execute(.backfill(selector(now: options.clock())))
    }
}
