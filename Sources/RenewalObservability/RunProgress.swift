import RenewalStorage

/// Told how a run advances, for a progress display. Called from the run's own task, one call at a time.
public protocol RunProgress: Sendable {
    /// The run began; `total` is the number of receipts it expects to check, when known.
    func started(total: Int?)
    /// One more receipt was checked (or failed); `counts` are the run's totals so far.
    func receiptDone(counts: RenewalCounts)
    /// The run ended (whatever the outcome).
    func finished()
}
