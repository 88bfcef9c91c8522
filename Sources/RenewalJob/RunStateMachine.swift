import RenewalCore
import RenewalStorage

/// The rules of one run's loop, as a value: how many receipts are in flight, when results are
/// written, when the run makes another pass over the due rows, how a shutdown drains, when the
/// circuit breaker stops the run, and how the run ends. Events go in (a receipt claimed, an answer
/// handled, a batch written, a shutdown, …); actions come out. No I/O, no clock, no task:
/// `RunExecution` performs the actions, and tests drive the rules without sockets.
///
/// One pass of the loop: claim while the window allows (`.claim`), then write (`.write`), start
/// another pass (`.rescan`) or end (`.finish`) when nothing is in flight, then start the flush timer
/// if results wait (`.scheduleFlush`), then wait for the next event (`.wait`). Every event begins a
/// new pass.
struct RunStateMachine {
    struct Limits: Sendable, Hashable {
        /// Receipts in flight at once, after the first (which goes alone, so a wrong shared secret
        /// ends the run before anything is written).
        var concurrency: Int
        /// Results written in one transaction at most.
        var maximumBatch: Int
        /// Results that may wait for a write in progress before no more receipts are claimed.
        var maximumPending: Int
        /// Extra passes over the due rows at most (each must still be finding work).
        var maximumRescans: Int
        /// Whether the run goes over the due rows again while a pass still finds work (a due run
        /// that leases its rows and has no limit); backfills and dry runs make one pass.
        var mayRescan: Bool
    }

    enum Action: Sendable, Hashable {
        /// Claim the next receipt and send it to Apple; then call `claimed()` or `sourceExhausted()`.
        case claim
        /// Hand every pending result to a writer child; `batchWritten(pending:)` follows.
        case write
        /// Write what is pending now, look for dead workers' leases and go over the due rows again.
        case rescan
        /// Results wait: wake the loop with `flushDue()` after the flush interval.
        case scheduleFlush
        /// Wait for the next event.
        case wait
        /// The loop is over.
        case finish
        /// A shutdown began: wake the loop with `drainExpired()` after the drain time.
        case scheduleDrainDeadline
        /// The drain time ran out with requests in flight: cancel them (their receipts are released).
        case cancelInFlight
    }

    /// What to do with the answer for one receipt.
    enum Disposition: Sendable, Hashable {
        /// Leave the receipt as it was, but for its lease.
        case release
        /// Keep the outage's result back: written with the next usable answer, or dropped (the row
        /// untouched) and recorded as a failure if the streak opens the breaker.
        case hold
        /// This outage opened the breaker: hold it with the others, record them all as failures,
        /// claim nothing more.
        case holdAndOpenBreaker
        /// Several apps: this outage opened the breaker of its app, and other apps go on. Hold it,
        /// record that app's held outages as failures, and leave its rows untouched from now on.
        case holdAndStopApp
        /// Write the held results, then this one.
        case write
    }

    private enum Phase {
        case claiming, deciding, flushing, waiting
    }

    let limits: Limits
    private var breaker: CircuitBreaker
    /// Several apps: how many (each has a breaker of its own: Apple's limits and a key's troubles are
    /// per app); 1 with one app, whose breaker is `breaker`.
    private let apps: Int
    private var appBreakers: [String: CircuitBreaker] = [:]
    /// Apps stopped for the rest of the run, and why: their rows are left untouched from then on.
    private(set) var stopReasons: [String: AppStopReason] = [:]
    /// Apps stopped for the rest of the run (their breaker opened, or Apple rejected their credentials).
    var stoppedApps: Set<String> { Set(stopReasons.keys) }
    private var phase = Phase.claiming
    private var window = 1
    private(set) var inFlight = 0
    /// Results decided but not yet handed to a writer.
    private(set) var pending = 0
    /// A writer child is saving a batch (one at a time).
    private(set) var writing = false
    private var flushScheduled = false
    private var exhausted = false
    private var claimedThisPass = 0
    private var rescans = 0
    /// Why the run stopped claiming early (breaker, rejected credentials), if it did.
    private(set) var stop: RunStatus?
    /// A graceful shutdown began: nothing more is claimed, and answers that are not evidence leave
    /// their receipts untouched (the stop, not Apple, cut their retries short).
    private(set) var draining = false

    init(limits: Limits, breaker: CircuitBreaker.Configuration, apps: Int = 1) {
        self.limits = limits
        self.breaker = CircuitBreaker(configuration: breaker)
        self.apps = max(1, apps)
    }

    /// The longest streak of outages (of any app, with several).
    var consecutiveOutages: Int {
        max(breaker.consecutiveOutages, appBreakers.values.map(\.consecutiveOutages).max() ?? 0)
    }

    /// What to do now; call again after performing it, until it says `.wait` or `.finish`.
    mutating func nextAction() -> Action {
        if phase == .claiming {
            if stop == nil, !draining, !exhausted, inFlight < window, pending < limits.maximumPending { return .claim }
            phase = .deciding
        }
        if phase == .deciding {
            phase = .flushing
            if inFlight == 0, !writing {
                if pending >= limits.maximumPending { return startWrite() ?? .wait }
                guard stop == nil, !draining, limits.mayRescan, exhausted, claimedThisPass > 0,
                    rescans < limits.maximumRescans
                else { return .finish }
                return startPass()
            }
        }
        if phase == .flushing {
            phase = .waiting
            if pending > 0, !flushScheduled {
                flushScheduled = true
                return .scheduleFlush
            }
        }
        return .wait
    }

    /// The run was about to finish, and due rows no lease holds are still in the database: made due,
    /// or released, by another worker after this run's pass went by them (the change feed's reader
    /// marks receipts due while the others are already scanning). Another pass takes them, within the
    /// same limit on passes; `.finish` when no pass is left or the run may not rescan.
    mutating func dueRowsRemain() -> Action {
        guard mayTakeAnotherPass else { return .finish }
        return startPass()
    }

    /// Whether due rows left at the end would get another pass (`dueRowsRemain()`): the run may
    /// rescan, nothing stopped it, no app is stopped (its rows stay due: another pass would only claim
    /// and release them), nothing is in flight or being written, and a pass is left.
    private var mayTakeAnotherPass: Bool {
        endedOnItsOwn && inFlight == 0 && !writing && rescans < limits.maximumRescans
    }

    /// The run may rescan and ended by running out of work: no stop, no shutdown, no stopped app.
    /// Only then do due rows left at the end say something about this run (`dueLeft`, `incomplete`).
    var endedOnItsOwn: Bool { limits.mayRescan && stop == nil && !draining && stopReasons.isEmpty }

    /// Whether the outages still held at the end are written (recorded as failures, their rows
    /// rescheduled): yes unless the run stopped early, when their rows are left untouched.
    var writesHeldOutagesAtEnd: Bool { stop == nil }

    /// Another pass over the due rows begins (`.rescan`: the executor writes what is pending first).
    private mutating func startPass() -> Action {
        rescans += 1
        claimedThisPass = 0
        exhausted = false
        pending = 0
        phase = .claiming
        return .rescan
    }

    // MARK: Claims

    mutating func claimed() {
        inFlight += 1
        claimedThisPass += 1
    }

    /// The selection (or the limit) has no more receipts for this pass.
    mutating func sourceExhausted() {
        exhausted = true
        phase = .deciding
    }

    // MARK: Answers

    /// Apple said the configuration is wrong (21004, or 401 from both environments): stop before
    /// writing anything else. The first such answer decides the status.
    mutating func misconfigured(_ status: RunStatus) {
        if stop == nil { stop = status }
    }

    /// Several apps: `app` is stopped for the rest of the run (Apple rejected its credentials, or its
    /// breaker opened). Returns whether another app still runs; when none does, the run stops.
    mutating func stopApp(_ app: String, reason: AppStopReason) -> Bool {
        if stopReasons[app] == nil { stopReasons[app] = reason }
        return stopReasons.count < apps
    }

    /// Several apps: Apple rejected `app`'s credentials (21004, or 401 from both environments).
    mutating func credentialsRejected(app: String, reason: AppStopReason) -> AppRejection {
        guard stopReasons[app] == nil else { return .alreadyStopped }
        return stopApp(app, reason: reason) ? .othersGoOn : .noAppLeft
    }

    /// What Apple rejecting one app's credentials means for the run.
    enum AppRejection: Sendable, Hashable {
        /// The app was stopped already: the answer is dropped.
        case alreadyStopped
        /// The app stops now; the answer is dropped and the other apps go on.
        case othersGoOn
        /// It was the last app running: the whole run stops, as with one app (`misconfigured`).
        case noAppLeft
    }

    /// Whether `app`'s rows are left untouched for the rest of the run.
    func isStopped(_ app: String) -> Bool { stopReasons[app] != nil }

    /// An answer released unexamined because Apple rejected its app's credentials (several apps, the
    /// others go on): it tells the breaker nothing and writes nothing.
    mutating func answerDropped() {
        inFlight -= 1
        window = max(1, limits.concurrency)
        phase = .claiming
    }

    /// An answer arrived: `evidence` when it is a valid answer; `outage` tells, when asked, whether a
    /// failure says Apple is unavailable (it is asked only when the answer is not released
    /// unexamined). The window opens to the full concurrency after the first answer. With several
    /// apps, `app` is the one whose credentials asked: its own breaker counts the outage, and only
    /// when every app is stopped does the run stop.
    mutating func answered(evidence: Bool, app: String? = nil, outage: () -> Bool) -> Disposition {
        inFlight -= 1
        window = max(1, limits.concurrency)
        phase = .claiming
        if stop == .sharedSecretRejected || stop == .credentialsRejected { return .release }
        if draining, !evidence { return .release }
        if evidence || !outage() {
            breaker.record(outage: false)
            if let app { appBreakers[app]?.record(outage: false) }
            return .write
        }
        if stop != nil { return .release }
        if apps > 1, let app {
            if isStopped(app) { return .release }
            var appBreaker = appBreakers[app] ?? CircuitBreaker(configuration: breaker.configuration)
            let open = appBreaker.record(outage: true)
            appBreakers[app] = appBreaker
            guard open else { return .hold }
            if stopApp(app, reason: .appleUnavailable) { return .holdAndStopApp }
            stop = .abortedAppleUnavailable
            return .holdAndOpenBreaker
        }
        if breaker.record(outage: true) {
            stop = .abortedAppleUnavailable
            return .holdAndOpenBreaker
        }
        return .hold
    }

    /// The answer's result (and any held ones) joined the pending results: write now if about half
    /// the window answered since the last write, or nothing is left in flight.
    mutating func resultsPending(_ count: Int) -> Action? {
        pending = count
        return pending >= min(limits.maximumBatch, max(1, inFlight)) ? startWrite() : nil
    }

    // MARK: Writes

    /// The flush interval passed since results began to wait.
    mutating func flushDue() -> Action? {
        flushScheduled = false
        phase = .claiming
        return startWrite()
    }

    /// The writer saved its batch; `pending` results have been decided since it started.
    mutating func batchWritten(pending count: Int) -> Action? {
        writing = false
        phase = .claiming
        return resultsPending(count)
    }

    private mutating func startWrite() -> Action? {
        guard pending > 0, !writing else { return nil }
        pending = 0
        writing = true
        return .write
    }

    // MARK: Shutdown

    /// SIGTERM or SIGINT: claim nothing more; in-flight requests get the drain time to finish.
    mutating func shutdownRequested() -> Action {
        draining = true
        phase = .claiming
        return .scheduleDrainDeadline
    }

    /// The drain time is over.
    mutating func drainExpired() -> Action? {
        phase = .claiming
        return inFlight > 0 ? .cancelInFlight : nil
    }

    /// A child with nothing to report ended.
    mutating func idle() {
        phase = .claiming
    }

    // MARK: The end

    /// How the run ended, once the loop is over and every result is written. `dueLeft`: due rows no
    /// lease held at the end (counted only when the run may rescan); `failed`: receipts not verified.
    /// With an app stopped (several apps), a run that otherwise ended normally is `apps_stopped`.
    func outcome(dueLeft: Int, failed: Int) -> RunStatus {
        if let stop { return stop }
        if draining { return .interrupted }
        if !stopReasons.isEmpty { return .appsStopped }
        if limits.mayRescan, dueLeft > 0 { return .incomplete }
        return failed > 0 ? .completedWithFailures : .completed
    }
}

/// Why one app (of several) stopped for the rest of a run: recorded in `runs.apps_stopped` and the
/// report.
enum AppStopReason: String, Sendable, Hashable {
    /// Apple answered 21004: the app's shared secret is wrong.
    case sharedSecretRejected = "shared_secret_rejected"
    /// Apple refused the app's App Store Server API key.
    case credentialsRejected = "credentials_rejected"
    /// The app's circuit breaker opened: Apple kept failing for it.
    case appleUnavailable = "apple_unavailable"

    /// The reason for a misconfigured answer.
    init(_ failure: CheckFailure) {
        self = failure.reason == .appleStatus(.sharedSecretRejected) ? .sharedSecretRejected : .credentialsRejected
    }
}
