/// Every exit code the job's binary uses, with what it means: the one table. `RunStatus` maps a run's
/// ending onto it, the CLI maps errors onto it, and `renewal --help` prints it (the documentation's
/// table is tested against `--help`).
public enum ExitStatus: Int32, Sendable, Hashable, CaseIterable {
    case success = 0
    case someFailed = 3
    case appleUnavailable = 4
    case appsStopped = 5
    case usage = 64
    case locked = 75
    case configuration = 78
    case internalError = 1
    /// A second SIGINT ended the process at once (128 + 2).
    case interrupted = 130
    /// A second SIGTERM ended the process at once (128 + 15).
    case terminated = 143

    /// What the code means, as `--help` and the docs say it.
    public var meaning: String {
        switch self {
        case .success: "all due work done"
        case .someFailed:
            "finished, but some work failed: receipts not verified (they keep their state), refund answers, "
                + "history reads or mass-extension follow-ups; retried later"
        case .appleUnavailable: "aborted because Apple was unavailable"
        case .appsStopped: "several apps: some but not all were stopped (their receipts left as they were)"
        case .usage: "usage error (a secret given as a flag among them)"
        case .locked: "another run holds the lock"
        case .configuration:
            "configuration error (bad database, shared secret rejected, one of a production/sandbox URL pair set "
                + "without the other)"
        case .internalError: "internal error"
        case .interrupted, .terminated: "a second SIGINT / SIGTERM ended the process at once"
        }
    }

    /// The code a process killed at once by `signal` exits with (128 + the signal's number).
    public static func afterSignal(_ signal: Int32) -> Int32 { 128 + signal }
}
