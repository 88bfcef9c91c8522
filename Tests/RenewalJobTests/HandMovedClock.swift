import RenewalServerAPI
import Synchronization

/// A clock a test moves by hand, for request budgets: time stands still until `advance(to:)`, and a
/// jump of seconds is a stall of the whole process (every request whose slot passed meanwhile wakes
/// at the same instant), which the real clock cannot be made to produce on time.
final class HandMovedClock: Sendable {
    private struct State {
        var now: Duration = .zero
        var sleepers: [(deadline: Duration, wake: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    /// The budgets' view of this clock.
    var budgetClock: RequestBudgetClock {
        RequestBudgetClock(now: { self.now }, sleepUntil: { await self.sleep(until: $0) })
    }

    var now: Duration { state.withLock { $0.now } }

    /// How many tasks sleep on the clock now.
    var sleeping: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Duration) async {
        await withCheckedContinuation { wake in
            let due = state.withLock { state -> Bool in
                guard deadline > state.now else { return true }
                state.sleepers.append((deadline, wake))
                return false
            }
            if due { wake.resume() }
        }
    }

    /// Moves the time on to `instant` and wakes every task whose deadline it passed.
    func advance(to instant: Duration) {
        let due = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.now = max(state.now, instant)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.map(\.wake)
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for wake in due { wake.resume() }
    }
}
