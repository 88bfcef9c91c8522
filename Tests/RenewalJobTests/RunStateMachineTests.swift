import RenewalStorage
import RenewalCore
import Testing

@testable import RenewalJob

/// The run loop's rules, driven event by event: no sockets, no database, no clock.
@Suite("RunStateMachine: window, batching, back-pressure, passes, drain, breaker, outcome")
struct RunStateMachineTests {
    typealias Machine = RunStateMachine

    static func machine(
        concurrency: Int = 4, maximumBatch: Int = 64, maximumPending: Int = 128, mayRescan: Bool = true,
        threshold: Int = 3
    ) -> Machine {
        Machine(
            limits: Machine.Limits(
                concurrency: concurrency, maximumBatch: maximumBatch, maximumPending: maximumPending, maximumRescans: 3,
                mayRescan: mayRescan),
            breaker: CircuitBreaker.Configuration(threshold: threshold))
    }

    /// Performs `.claim` (with a receipt each time) until the machine says something else.
    static func claimAll(_ machine: inout Machine) -> (claims: Int, then: Machine.Action) {
        var claims = 0
        while true {
            let action = machine.nextAction()
            guard action == .claim else { return (claims, action) }
            machine.claimed()
            claims += 1
        }
    }

    @Test("the first receipt goes alone; after its answer the window opens to the concurrency")
    func firstReceiptAlone() {
        var machine = Self.machine(concurrency: 4)
        #expect(Self.claimAll(&machine) == (1, .wait))
        #expect(machine.answered(evidence: true, outage: { false }) == .write)
        #expect(machine.resultsPending(1) == .write, "nothing in flight: the one result is written at once")
        #expect(Self.claimAll(&machine) == (4, .wait))
        #expect(machine.inFlight == 4)
    }

    @Test("results are written once about half the window has answered, one batch at a time")
    func batching() {
        var machine = Self.machine(concurrency: 8, maximumBatch: 3)
        _ = Self.claimAll(&machine)
        _ = machine.answered(evidence: true, outage: { false })
        _ = machine.resultsPending(1)
        #expect(machine.writing)
        _ = machine.batchWritten(pending: 0)
        #expect(Self.claimAll(&machine).claims == 8)
        // 8 in flight: a batch starts at min(3, in flight) results.
        for pending in 1...2 {
            _ = machine.answered(evidence: true, outage: { false })
            #expect(machine.resultsPending(pending) == nil)
        }
        _ = machine.answered(evidence: true, outage: { false })
        #expect(machine.resultsPending(3) == .write)
        #expect(machine.pending == 0 && machine.writing)
        // While it is written, more results wait; none starts a second writer.
        for pending in 1...4 {
            _ = machine.answered(evidence: true, outage: { false })
            #expect(machine.resultsPending(pending) == nil)
        }
        // When it is saved, the waiting ones are written at once.
        #expect(machine.batchWritten(pending: 4) == .write)
    }

    @Test("waiting results start the flush timer once; when it fires they are written")
    func flushTimer() {
        var machine = Self.machine(concurrency: 8, maximumBatch: 64)
        _ = Self.claimAll(&machine)
        _ = machine.answered(evidence: true, outage: { false })
        _ = machine.resultsPending(1)
        _ = machine.batchWritten(pending: 0)
        _ = Self.claimAll(&machine)
        _ = machine.answered(evidence: true, outage: { false })
        #expect(machine.resultsPending(1) == nil)
        #expect(Self.claimAll(&machine) == (1, .scheduleFlush))
        #expect(machine.nextAction() == .wait)
        _ = machine.answered(evidence: true, outage: { false })
        _ = machine.resultsPending(2)
        #expect(Self.claimAll(&machine) == (1, .wait), "the timer is already running")
        #expect(machine.flushDue() == .write)
    }

    @Test("back-pressure: while a slow write holds results back, no more is claimed than maximumPending allows")
    func backPressure() {
        var machine = Self.machine(concurrency: 4, maximumBatch: 2, maximumPending: 4)
        _ = Self.claimAll(&machine)
        _ = machine.answered(evidence: true, outage: { false })
        _ = machine.resultsPending(1)  // the first batch: being written, and slow
        #expect(Self.claimAll(&machine).claims == 4)
        for pending in 1...4 {
            _ = machine.answered(evidence: true, outage: { false })
            _ = machine.resultsPending(pending)
        }
        #expect(machine.pending == 4 && machine.inFlight == 0)
        #expect(Self.claimAll(&machine) == (0, .scheduleFlush), "four results wait: nothing more is claimed")
        #expect(machine.batchWritten(pending: 4) == .write)
        #expect(Self.claimAll(&machine).claims == 4)
    }

    /// Runs one pass over a source of `receipts`, answering every request with evidence as soon as the
    /// machine waits, until it asks for another pass or ends.
    static func pass(_ machine: inout Machine, receipts: Int) -> Machine.Action {
        var left = receipts
        while true {
            let action = machine.nextAction()
            switch action {
            case .claim:
                if left == 0 {
                    machine.sourceExhausted()
                } else {
                    left -= 1
                    machine.claimed()
                }
            case .wait:
                while machine.inFlight > 0 {
                    _ = machine.answered(evidence: true, outage: { false })
                    if machine.resultsPending(0) == .write { _ = machine.batchWritten(pending: 0) }
                }
            case .rescan, .finish:
                return action
            default:
                continue
            }
        }
    }

    @Test(
        """
        a pass that found work is followed by another, at most three more; a backfill makes one; an empty pass \
        ends the run
        """
    )
    func rescans() {
        var machine = Self.machine(concurrency: 2)
        #expect(Self.pass(&machine, receipts: 3) == .rescan)
        #expect(Self.pass(&machine, receipts: 3) == .rescan)
        #expect(Self.pass(&machine, receipts: 1) == .rescan)
        #expect(Self.pass(&machine, receipts: 5) == .finish, "three extra passes at most")

        var quiet = Self.machine(concurrency: 2)
        #expect(Self.pass(&quiet, receipts: 2) == .rescan)
        #expect(Self.pass(&quiet, receipts: 0) == .finish, "a pass that found nothing is not repeated")

        var backfill = Self.machine(concurrency: 2, mayRescan: false)
        #expect(Self.pass(&backfill, receipts: 3) == .finish)
    }

    @Test(
        """
        due rows another worker made due after the pass went by them get another pass, within the same limit; \
        never after a shutdown, never for a backfill
        """
    )
    func leftoversGetAnotherPass() {
        var machine = Self.machine(concurrency: 2)
        #expect(Self.pass(&machine, receipts: 0) == .finish)
        #expect(machine.dueRowsRemain() == .rescan)
        #expect(Self.pass(&machine, receipts: 1) == .rescan, "the pass found the row")
        #expect(Self.pass(&machine, receipts: 0) == .finish)
        #expect(machine.dueRowsRemain() == .rescan)
        #expect(Self.pass(&machine, receipts: 0) == .finish)
        #expect(machine.dueRowsRemain() == .finish, "three extra passes at most, whatever asked for them")

        var stopping = Self.machine(concurrency: 2)
        #expect(Self.pass(&stopping, receipts: 0) == .finish)
        _ = stopping.shutdownRequested()
        #expect(stopping.dueRowsRemain() == .finish)

        var backfill = Self.machine(concurrency: 2, mayRescan: false)
        #expect(Self.pass(&backfill, receipts: 0) == .finish)
        #expect(backfill.dueRowsRemain() == .finish)
    }

    @Test(
        """
        a shutdown stops the claims and releases answers that are not evidence; the drain deadline cancels what \
        is in flight
        """
    )
    func drain() {
        var machine = Self.machine(concurrency: 4)
        _ = Self.claimAll(&machine)
        _ = machine.answered(evidence: true, outage: { false })
        _ = machine.resultsPending(0)
        _ = Self.claimAll(&machine)
        #expect(machine.shutdownRequested() == .scheduleDrainDeadline)
        #expect(machine.nextAction() == .wait, "nothing more is claimed")
        #expect(
            machine.answered(
                evidence: false,
                outage: {
                    Issue.record("not examined"); return true
                }) == .release)
        #expect(machine.answered(evidence: true, outage: { false }) == .write, "evidence that arrives is written")
        #expect(machine.drainExpired() == .cancelInFlight)
        _ = machine.answered(evidence: false, outage: { false })
        _ = machine.answered(evidence: false, outage: { false })
        #expect(machine.drainExpired() == nil, "nothing in flight to cancel")
        #expect(machine.nextAction() == .finish)
        #expect(machine.outcome(dueLeft: 5, failed: 1) == .interrupted)
    }

    @Test(
        """
        several apps: each app's outages open its own breaker, which the other apps' answers do not close; the \
        run stops only when every app is stopped
        """
    )
    func breakerPerApp() {
        var machine = Machine(
            limits: Machine.Limits(
                concurrency: 16, maximumBatch: 64, maximumPending: 128, maximumRescans: 3, mayRescan: true),
            breaker: CircuitBreaker.Configuration(threshold: 3), apps: 2)
        _ = Self.claimAll(&machine)
        _ = machine.answered(evidence: true, app: "b", outage: { false })
        _ = Self.claimAll(&machine)
        #expect(machine.answered(evidence: false, app: "a", outage: { true }) == .hold)
        #expect(machine.answered(evidence: true, app: "b", outage: { false }) == .write, "b's answer resets b only")
        #expect(machine.answered(evidence: false, app: "a", outage: { true }) == .hold)
        #expect(machine.answered(evidence: false, app: "a", outage: { true }) == .holdAndStopApp)
        #expect(machine.stop == nil && machine.stoppedApps == ["a"])
        #expect(machine.answered(evidence: false, app: "a", outage: { true }) == .release, "a is stopped")
        #expect(machine.answered(evidence: false, app: "b", outage: { true }) == .hold)
        #expect(machine.answered(evidence: false, app: "b", outage: { true }) == .hold)
        #expect(machine.answered(evidence: false, app: "b", outage: { true }) == .holdAndOpenBreaker)
        #expect(machine.stop == .abortedAppleUnavailable)
    }

    @Test(
        """
        outages are held; the threshold's outage opens the breaker; later outages are released; evidence closes \
        the streak
        """
    )
    func breaker() {
        var machine = Self.machine(concurrency: 8, threshold: 3)
        _ = Self.claimAll(&machine)
        _ = machine.answered(evidence: true, outage: { false })
        _ = Self.claimAll(&machine)
        #expect(machine.answered(evidence: false, outage: { true }) == .hold)
        #expect(machine.answered(evidence: true, outage: { false }) == .write, "a usable answer writes the held ones")
        #expect(machine.consecutiveOutages == 0)
        #expect(machine.answered(evidence: false, outage: { true }) == .hold)
        #expect(
            machine.answered(evidence: false, outage: { false }) == .write,
            "a failure that is not an outage closes the streak too")
        #expect(machine.answered(evidence: false, outage: { true }) == .hold)
        #expect(machine.answered(evidence: false, outage: { true }) == .hold)
        #expect(machine.answered(evidence: false, outage: { true }) == .holdAndOpenBreaker)
        #expect(machine.stop == .abortedAppleUnavailable)
        #expect(machine.answered(evidence: false, outage: { true }) == .release)
        #expect(machine.inFlight == 0)
        #expect(machine.nextAction() == .finish, "nothing more is claimed, and no other pass")
        #expect(machine.outcome(dueLeft: 0, failed: 0) == .abortedAppleUnavailable)
    }

    @Test("a rejected shared secret or API key stops the run; every later answer is released untouched")
    func misconfigured() {
        for status in [RunStatus.sharedSecretRejected, .credentialsRejected] {
            var machine = Self.machine()
            _ = Self.claimAll(&machine)
            machine.claimed()  // as if the window had opened: two requests in flight
            machine.misconfigured(status)
            machine.misconfigured(.credentialsRejected == status ? .sharedSecretRejected : .credentialsRejected)
            #expect(machine.answered(evidence: false, outage: { false }) == .release)
            #expect(machine.answered(evidence: true, outage: { false }) == .release)
            #expect(machine.nextAction() == .finish)
            #expect(machine.outcome(dueLeft: 3, failed: 0) == status, "the first misconfiguration decides")
        }
    }

    @Test("the outcome: incomplete only when due rows were left by a run that could have taken them")
    func outcome() {
        #expect(Self.machine().outcome(dueLeft: 0, failed: 0) == .completed)
        #expect(Self.machine().outcome(dueLeft: 0, failed: 2) == .completedWithFailures)
        #expect(Self.machine().outcome(dueLeft: 1, failed: 2) == .incomplete)
        #expect(Self.machine(mayRescan: false).outcome(dueLeft: 1, failed: 0) == .completed)
    }
}
