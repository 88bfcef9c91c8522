import Foundation

/// What `SubscriptionStore.recoverAbandonedWork` took back from processes that died holding leases.
public struct RecoveredWork: Sendable, Hashable {
    /// A `runs` row left `running` by a process that is provably dead, now `abandoned`.
    public struct AbandonedRun: Sendable, Hashable {
        public var runID: String
        public var workerID: String?
        public var host: String
        public var processID: Int
        public var startedAt: Date

        public init(runID: String, workerID: String?, host: String, processID: Int, startedAt: Date) {
            self.runID = runID
            self.workerID = workerID
            self.host = host
            self.processID = processID
            self.startedAt = startedAt
        }
    }

    public var abandonedRuns: [AbandonedRun]
    /// Receipts whose lease was taken back (each is free to claim at once).
    public var releasedLeases: Int

    public init(abandonedRuns: [AbandonedRun] = [], releasedLeases: Int = 0) {
        self.abandonedRuns = abandonedRuns
        self.releasedLeases = releasedLeases
    }

    public var isEmpty: Bool { abandonedRuns.isEmpty && releasedLeases == 0 }
}
