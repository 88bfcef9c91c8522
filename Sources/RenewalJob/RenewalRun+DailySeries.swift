import Foundation
import Logging
import RenewalCore
import RenewalStorage

extension RenewalRun {
    /// After the run's changes are folded into the analytics summaries, the days they changed (and the
    /// days since the last refresh) are read again from the summaries into the daily series and the
    /// cohort table, so the dashboards are current after every run without a pass over the ledger. A
    /// failure leaves the days marked for the next run; the run's outcome does not change.
    func refreshDailySeries(logger: Logger) async {
        guard let series = store as? any DailySeriesStore else { return }
        let started = ContinuousClock.now
        do {
            let state = try await series.analyticsSummaryState()
            guard let state, state.staleReason == nil else {
                let reason = state?.staleReason ?? "no summaries were built; run renewal analytics --rebuild once"
                logger.info(
                    "Daily series not kept by runs until the analytics summaries are built (--refresh-daily reads the ledger meanwhile)",
                    metadata: ["reason": "\(reason)"])
                return
            }
            guard
                let refreshed = try await series.refreshDailySeries(
                    catalogue: configuration.analyticsCatalogue, rates: configuration.analyticsRates, now: now())
            else { return }
            logger.info(
                "Daily series refreshed from the summaries",
                metadata: [
                    "first_day": "\(refreshed.firstDay)", "last_day": "\(refreshed.lastDay)",
                    "rows": "\(refreshed.rows)",
                    LogKey.seconds: "\(String(format: "%.3f", (ContinuousClock.now - started).seconds))",
                ])
        } catch {
            logger.warning("Daily series not refreshed; the next run does it", metadata: ["error": "\(error)"])
        }
    }
}
