import RenewalCore

/// How a run ended, or that it still runs: one vocabulary for the `runs` table, the report, the
/// metrics, the logs and the exit code.
///
/// Open-ended, like the stored data it is read from (a newer version of the job may have written a
/// status this one does not know); the known statuses are its static members.
public struct RunStatus: OpenVocabulary {
    public var rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Started, not ended (or its process died and no later run has proved it yet).
    public static let running: RunStatus = "running"
    /// All selected work done (exit 0).
    public static let completed: RunStatus = "completed"
    /// Finished, but some receipts could not be verified (exit 3).
    public static let completedWithFailures: RunStatus = "completed_with_failures"
    /// Finished, but due receipts no lease holds were left behind (exit 3): the next run's first work.
    public static let incomplete: RunStatus = "incomplete"
    /// Stopped on SIGTERM/SIGINT after finishing or releasing in-flight receipts (exit 3).
    public static let interrupted: RunStatus = "interrupted"
    /// Stopped claiming work because Apple kept failing: the circuit breaker (exit 4).
    public static let abortedAppleUnavailable: RunStatus = "aborted_apple_unavailable"
    /// Apple rejected the shared secret, 21004; nothing was written (exit 78).
    public static let sharedSecretRejected: RunStatus = "aborted_shared_secret_rejected"
    /// The App Store Server API refused the API key in both environments (HTTP 401); nothing was
    /// written (exit 78).
    public static let credentialsRejected: RunStatus = "aborted_credentials_rejected"
    /// Finished, but Apple rejected the credentials of one or more apps of the apps file (21004, or
    /// HTTP 401 from the App Store Server API): their rows were left untouched, the other apps' were
    /// checked (exit 5). With one app, or when every app is rejected, the run aborts instead.
    public static let appsStopped: RunStatus = "completed_apps_stopped"
    /// Failed after it started: the database failed mid-run, or an internal error (exit 1).
    public static let failed: RunStatus = "failed"
    /// Could not start because another run holds the lock (exit 75). Reported in the metrics only: such
    /// a run is never stored.
    public static let locked: RunStatus = "locked"
    /// Its process died; set by the next run that proves it.
    public static let abandoned: RunStatus = "abandoned"

    /// Every status a process can end a run with, so a one-hot metric keeps a stable set of series.
    public static let endings: [RunStatus] = [
        .completed, .completedWithFailures, .incomplete, .interrupted, .abortedAppleUnavailable, .sharedSecretRejected,
        .credentialsRejected, .appsStopped, .failed, .locked,
    ]

    /// The exit code a run that ends with this status gives (docs/operating.md, "Exit codes"); 1 for a status
    /// that is not an ending.
    public var exitCode: Int32 { exitStatus.rawValue }

    /// The entry of the exit code table a run that ends with this status gives.
    public var exitStatus: ExitStatus {
        switch self {
        case .completed: .success
        case .completedWithFailures, .interrupted, .incomplete: .someFailed
        case .abortedAppleUnavailable: .appleUnavailable
        case .appsStopped: .appsStopped
        case .locked: .locked
        case .sharedSecretRejected, .credentialsRejected: .configuration
        default: .internalError
        }
    }
}
