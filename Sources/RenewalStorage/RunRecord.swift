import Foundation

/// One row of the `runs` table: who ran, when, how it ended, and the run's counts as the report has
/// them (stored in columns of the same names).
public struct RunRecord: Sendable, Hashable {
    public var id: String
    /// `run` or `backfill`.
    public var command: String
    public var startedAt: Date
    public var finishedAt: Date?
    /// `running` until the run ends; `abandoned` when its process died (set by the next run that
    /// proves it, see `SubscriptionStore.recoverAbandonedWork`).
    public var status: RunStatus
    public var exitCode: Int?
    public var host: String
    public var processID: Int
    /// The lease owner this run's worker writes into the rows it claims.
    public var workerID: String?
    /// The counts the run ended with (all zero while it runs).
    public var counts: RenewalCounts

    public init(
        id: String, command: String, startedAt: Date, finishedAt: Date? = nil, status: RunStatus = .running,
        exitCode: Int? = nil, checked: Int = 0, changed: Int = 0, unchanged: Int = 0, failed: Int = 0,
        conflicts: Int = 0, host: String, processID: Int, workerID: String? = nil, leaseLost: Int = 0
    ) {
        self.id = id
        self.command = command
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.status = status
        self.exitCode = exitCode
        self.host = host
        self.processID = processID
        self.workerID = workerID
        counts = RenewalCounts()
        counts.checked = checked
        counts.changed = changed
        counts.unchanged = unchanged
        counts.failed = failed
        counts.conflicts = conflicts
        counts.leaseLost = leaseLost
    }

    // The counts most readers want, read through (the record holds them once, in `counts`).
    public var checked: Int {
        get { counts.checked }
        set { counts.checked = newValue }
    }
    public var changed: Int {
        get { counts.changed }
        set { counts.changed = newValue }
    }
    public var unchanged: Int {
        get { counts.unchanged }
        set { counts.unchanged = newValue }
    }
    public var failed: Int {
        get { counts.failed }
        set { counts.failed = newValue }
    }
    public var conflicts: Int {
        get { counts.conflicts }
        set { counts.conflicts = newValue }
    }
    public var leaseLost: Int {
        get { counts.leaseLost }
        set { counts.leaseLost = newValue }
    }
}
