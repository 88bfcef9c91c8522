import ArgumentParser
import Foundation
import RenewalCore
import RenewalReports
import RenewalStorage

struct AnalyticsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "analytics",
        abstract:
            "Subscription analytics from the transaction ledger: MRR, active subscriptions and trials, new, converted, churned, revenue, refunds.",
        discussion: """
            Figures cover [--since, --until) (RFC 3339 UTC, a day such as 2026-11-01, or an age such as 28d; \
            default the last 28 days to now); active subscriptions, trials and MRR are at --until. Only \
            Production transactions the customer bought count (family sharing and sandbox are apart). \
            Amounts are in the reporting currency, rounded to cents; amounts in a currency without a rate are \
            reported apart under "unconverted", never converted at 1. docs/analytics.md states each definition. \
            --json prints one object: since, until, currency, bundle_id, active_subscriptions, active_trials, \
            mrr, new_subscriptions, new_trials, trial_conversions, trial_funnel (started, converted, in_trial, \
            lapsed), churned, churn_rate, reactivations, revenue, \
            refunds, net_revenue, unconverted, unpriced_transactions, by_product (the same figures per \
            product_id) and cohorts (by month of the first paid period, for the 12 months up to --until: \
            subscriptions, and per period 1 to 12 observed, retained and retention, null while not observed). \
            The ledger is read a page of subscriptions at a time, so memory stays flat.
            """ + EnvironmentHelp.text(.database))

    @Option(name: .long, help: ArgumentHelp("Start of the window (default 28 days before --until).", valueName: "time"))
    var since: String?

    @Option(name: .long, help: ArgumentHelp("End of the window, excluded (default now).", valueName: "time"))
    var until: String?

    @Option(name: .long, help: ArgumentHelp("Only this app's subscriptions.", valueName: "bundle-id"))
    var app: String?

    @Flag(name: .long, help: "Print JSON (the stable contract) instead of a table.")
    var json = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Also write one self-contained HTML page: the figures, MRR and active subscriptions over time and churn \
            from the daily series (kept by --refresh-daily), and the trial funnel.
            """, valueName: "file"))
    var html: String?

    @Flag(
        name: .long,
        help: """
            Recompute the daily series dashboards read (analytics_daily, the view analytics_daily_series) for \
            each UTC day from --since's through --until's, replacing those days' rows, and the cohort table \
            (analytics_cohorts, the view analytics_cohort_retention) as of --until, instead of printing figures.
            """)
    var refreshDaily = false

    @Flag(
        name: .long,
        help: """
            Rebuild the analytics summaries (analytics_summary_rows: every subscription's contribution rows \
            summed per day, product, price and environment) from the whole ledger, a page at a time, and mark \
            them current; prints the rows and the time taken. Run after an upgrade or a ledger loaded behind \
            the job's back.
            """)
    var rebuild = false

    @Flag(
        name: .long,
        help: """
            Answer the window from the summaries and by recomputing the ledger, timed, and compare them figure \
            by figure (total and each product); exit 3 when they differ. Says why when the summaries cannot \
            answer (not built, or stale after an upgrade); --json adds the subscriptions a window off UTC \
            midnights corrected from their ledgers.
            """)
    var checkSummaries = false

    @Flag(
        name: .long,
        help: """
            Recompute from the ledger (the reference) even when the analytics summaries answer the window. \
            Without it, any window is answered from the summaries once they are built (--rebuild), with \
            the same output; one off UTC midnights reads the ledgers of the subscriptions dated in its \
            part-days too.
            """)
    var recompute = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Catalogue file: each product's period and list prices. Env: RENEWAL_CATALOGUE_FILE.", valueName: "file"))
    var catalogue: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Rates file: the reporting currency and exchange rates. Env: RENEWAL_RATES_FILE. Default: USD, no rates.",
            valueName: "file"))
    var rates: String?

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if html != nil && refreshDaily {
            throw ValidationError(
                "--html draws what --refresh-daily keeps: run the refresh first, then --html, as two commands.")
        }
        let modes = [refreshDaily, rebuild, checkSummaries].filter { $0 }.count + (html == nil ? 0 : 1)
        if modes > 1 || (recompute && (rebuild || checkSummaries)) {
            throw ValidationError(
                "--refresh-daily, --rebuild, --check-summaries and --html each do one thing: give one of them.")
        }
        _ = try window(now: Date())
    }

    /// `[--since, --until)`: --until (default now) and --since (default 28 days before it). A bad time or a
    /// window that ends before it starts is a usage error naming both flags.
    func window(now: Date) throws -> (start: Date, end: Date) {
        for (flag, value) in [("--since", since), ("--until", until)] {
            if let value, ReportTime.parse(value, now: now) == nil {
                throw ValidationError(
                    "\(flag) \(value) is not a time; give 2026-11-01, 2026-11-01T06:00:00Z, or an age such as 28d.")
            }
        }
        let end = until.flatMap { ReportTime.parse($0, now: now) } ?? now
        let start = since.flatMap { ReportTime.parse($0, now: now) } ?? end.addingTimeInterval(-28 * 86_400)
        guard start < end else {
            throw ValidationError(
                """
                --since \(Timestamp.string(start)) is not before --until \(Timestamp.string(end))\
                \(until == nil ? " (now)" : ""); give a --since earlier than --until.
                """)
        }
        return (start, end)
    }

    func run() async throws {
        try await ExitMapping.run {
            _ = logging.makeLogger()
            let (start, end) = try window(now: Date())
            let products =
                try (catalogue ?? Environment.value("RENEWAL_CATALOGUE_FILE")).map(AnalyticsFiles.catalogue)
                ?? ProductCatalogue()
            let exchange =
                try (rates ?? Environment.value("RENEWAL_RATES_FILE")).map(AnalyticsFiles.rates)
                ?? ExchangeRates()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            let work = AnalyticsWork(
                store: store, app: app, catalogue: products, rates: exchange, recompute: recompute)
            let sink = ReportOutput()
            if rebuild || checkSummaries {
                try await summaries(store, start: start, end: end, products: products, exchange: exchange, sink: sink)
                return
            }
            if refreshDaily {
                // It replaces the daily series: refused (exit 75) while copy-database copies the database.
                if let refreshed = try await store.withWriterLock({ try await work.refresh(from: start, through: end) })
                {
                    try await sink.write(json ? refreshed.json + "\n" : refreshed.text + "\n")
                }
                try await sink.finish()
                return
            }
            let report = try await work.report(since: start, until: end)
            if let html { try await work.writePage(report, to: html, flag: "--html") }
            try await sink.write(json ? try report.json() + "\n" : report.table())
            try await sink.finish()
        }
    }

    /// `--rebuild` (under the writers' lock: exit 75 while copy-database copies) and `--check-summaries`.
    private func summaries(
        _ store: any RenewalStore, start: Date, end: Date, products: ProductCatalogue, exchange: ExchangeRates,
        sink: ReportOutput
    ) async throws {
        guard let summaries = store as? any AnalyticsSummaryStore else {
            throw ConfigurationError("This database keeps no analytics summaries; run renewal migrate first.")
        }
        let work = AnalyticsSummaryWork(store: summaries, app: app, catalogue: products, rates: exchange)
        if rebuild {
            let rebuilt = try await store.withWriterLock { try await work.rebuild() }
            try await sink.write((json ? rebuilt.json : rebuilt.text) + "\n")
            try await sink.finish()
            return
        }
        let check = try await work.check(since: start, until: end)
        try await sink.write((json ? check.json : check.text) + "\n")
        try await sink.finish()
        if check.equal == false || check.dailyDiffering?.isEmpty == false {
            throw ExitCode(ExitStatus.someFailed.rawValue)
        }
    }
}
