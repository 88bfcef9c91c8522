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
        for (flag, value) in [("--since", since), ("--until", until)] {
            if let value, ReportTime.parse(value, now: Date()) == nil {
                throw ValidationError(
                    "\(flag) \(value) is not a time; give 2026-11-01, 2026-11-01T06:00:00Z, or an age such as 28d.")
            }
        }
    }

    func run() async throws {
        try await ExitMapping.run {
            _ = logging.makeLogger()
            let now = Date()
            let end = until.flatMap { ReportTime.parse($0, now: now) } ?? now
            let start = since.flatMap { ReportTime.parse($0, now: now) } ?? end.addingTimeInterval(-28 * 86_400)
            guard start < end else {
                throw ConfigurationError(
                    "--since \(Timestamp.string(start)) is not before --until \(Timestamp.string(end)); give a window that is."
                )
            }
            let products =
                try (catalogue ?? Environment.value("RENEWAL_CATALOGUE_FILE")).map(AnalyticsFiles.catalogue)
                ?? ProductCatalogue()
            let exchange =
                try (rates ?? Environment.value("RENEWAL_RATES_FILE")).map(AnalyticsFiles.rates)
                ?? ExchangeRates()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            if refreshDaily {
                try await refresh(store, from: start, through: end, catalogue: products, rates: exchange)
                return
            }
            var analytics = SubscriptionAnalytics(
                since: start, until: end, catalogue: products, reportingCurrency: exchange.reportingCurrency)
            var cohorts = CohortRetention(asOf: end, catalogue: products)
            try await store.forEachSubscriptionLedger(bundleID: app) { ledger in
                analytics.add(ledger)
                cohorts.add(ledger)
            }
            let report = AnalyticsReport(analytics, cohorts: cohorts, rates: exchange, bundleID: app)
            if let html { try await writePage(report, to: html, store: store) }
            let sink = ReportOutput()
            try await sink.write(json ? try report.json() + "\n" : report.table())
            try await sink.finish()
        }
    }

    /// `--html`: the page, from the report and the daily series' rows of the window's days.
    private func writePage(_ report: AnalyticsReport, to path: String, store: any RenewalStore) async throws {
        let names = DailyAnalytics.dayNames(from: report.since, until: report.until)
        guard let first = names.first, let last = names.last else { return }
        let rows = try await store.analyticsDays(first: first, last: last, bundleID: app)
        let kept = try await store.analyticsDaysKept(bundleID: app)
        let missing = names.filter { day in kept.map { !($0.first...$0.last).contains(day) } ?? true }
        var refresh: String?
        if let firstMissing = missing.first, let lastMissing = missing.last,
            let end = DailyAnalytics.dayStart(named: lastMissing)?.addingTimeInterval(86_400)
        {
            refresh =
                "renewal analytics --refresh-daily --since \(firstMissing) --until \(DailyAnalytics.name(of: end))"
                + (app.map { " --app \($0)" } ?? "")
        }
        let page = report.html(days: AnalyticsReport.Day.series(rows, names: names), missing: missing, refresh: refresh)
        do {
            try Data(page.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw ConfigurationError(
                "--html \(path) cannot be written (\((error as NSError).localizedDescription)); give a writable path.")
        }
    }

    /// `--refresh-daily`: one pass over the ledger computes every day of the range, then the days' rows are
    /// replaced in one transaction.
    private func refresh(
        _ store: any RenewalStore, from start: Date, through end: Date, catalogue: ProductCatalogue,
        rates: ExchangeRates
    ) async throws {
        var daily = DailyAnalytics(
            from: start, through: end, catalogue: catalogue, reportingCurrency: rates.reportingCurrency)
        var cohorts: [String: CohortRetention] = [:]
        var subscriptions = 0
        try await store.forEachSubscriptionLedger(bundleID: app) { ledger in
            subscriptions += 1
            daily.add(ledger)
            cohorts[ledger.bundleID ?? "", default: CohortRetention(asOf: end, catalogue: catalogue)].add(ledger)
        }
        guard let range = daily.range else { return }
        let rows = daily.rows(rates: rates)
        try await store.replaceAnalyticsDays(
            first: range.first, last: range.last, bundleID: app, rows: rows, computedAt: Date())
        try await store.replaceAnalyticsCohorts(
            bundleID: app, cohorts: cohorts.mapValues(\.table), computedAt: Date())
        let sink = ReportOutput()
        try await sink.write(
            json
                ? #"{"first_day":"\#(range.first)","last_day":"\#(range.last)","rows":\#(rows.count),"subscriptions":\#(subscriptions)}"#
                    + "\n"
                : "analytics_daily: \(rows.count) rows for \(range.first) to \(range.last)"
                    + (app.map { " (\($0))" } ?? "") + " from \(subscriptions) subscriptions in the ledger\n")
        try await sink.finish()
    }
}
