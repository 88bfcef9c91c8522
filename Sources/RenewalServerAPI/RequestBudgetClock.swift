/// The time a request budget reads and sleeps on, as a duration since the clock's own origin: the
/// continuous clock in a deployment, a clock a test moves by hand to stall the process at will (a
/// stall is what bunches requests, and it cannot be made to happen on time with the real clock).
public struct RequestBudgetClock: Sendable {
    /// The time now, since the clock's origin.
    public var now: @Sendable () -> Duration
    /// Sleeps until `deadline` (since the clock's origin) has passed; throws `CancellationError`.
    public var sleepUntil: @Sendable (_ deadline: Duration) async throws -> Void

    /// A clock of `now` and `sleepUntil`, both counted from the same origin.
    public init(
        now: @escaping @Sendable () -> Duration,
        sleepUntil: @escaping @Sendable (_ deadline: Duration) async throws -> Void
    ) {
        self.now = now
        self.sleepUntil = sleepUntil
    }

    /// `ContinuousClock`, which keeps counting while the machine sleeps, from the instant this is made.
    public static var continuous: RequestBudgetClock {
        let origin = ContinuousClock.now
        return RequestBudgetClock(
            now: { ContinuousClock.now - origin },
            sleepUntil: { deadline in try await Task.sleep(until: origin + deadline, clock: .continuous) }
        )
    }

    /// Sleeps until `slot` and says whether the request may still go: true when it woke at most
    /// `RequestRates.lateness` of `interval` after the slot. A request that wakes later (the process
    /// or the machine stalled) would leave together with every other one that slept through the
    /// stall, and Apple counts requests when they arrive, not when they were scheduled; it takes a
    /// new slot instead.
    func sleep(untilSlot slot: Duration, interval: Duration) async throws -> Bool {
        if slot > now() { try await sleepUntil(slot) }
        return now() - slot <= interval * RequestRates.lateness
    }
}
