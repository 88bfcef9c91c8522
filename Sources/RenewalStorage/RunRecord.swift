import Foundation

/// One row of the `runs` table.
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
    public var checked: Int
    public var changed: Int
    public var unchanged: Int
    public var failed: Int
    public var conflicts: Int
    public var host: String
    public var processID: Int
    /// The lease owner this run's worker writes into the rows it claims.
    public var workerID: String?
    /// Results not written because the row's lease had passed to another worker.
    public var leaseLost: Int
    /// Receipts whose check changed at least one entitlement.
    public var receiptsChanged = 0
    /// Receipts Apple rejects (21003, 21010, persistent 21002).
    public var invalid = 0
    /// Receipts claimed but left exactly as they were (breaker, shutdown, 21004).
    public var skipped = 0
    /// Leases taken back from processes that died holding them.
    public var recoveredLeases = 0
    /// Due receipts when the run began (nil for backfills and runs before schema v4).
    public var dueAtStart: Int?
    /// Due receipts no lease held when the run ended.
    public var dueLeft = 0
    /// Receipts this run moved to the App Store Server API.
    public var migrated = 0

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
        self.checked = checked
        self.changed = changed
        self.unchanged = unchanged
        self.failed = failed
        self.conflicts = conflicts
        self.host = host
        self.processID = processID
        self.workerID = workerID
        self.leaseLost = leaseLost
    }
}
