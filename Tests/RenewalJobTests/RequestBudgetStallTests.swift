import Logging
import RenewalCore
import RenewalServerAPI
import Synchronization
import Testing

/// Apple counts requests when they arrive, and a loaded machine stalls: requests that slept through a
/// stall must not all leave when it ends. `OrderEndpointsTests` once saw 11 of 30 lookups refused with
/// 429 on a loaded CI machine although the budget spaced them at 8 a second; these tests stall the
/// process by hand (`HandMovedClock`) and read when each request leaves.
@Suite("Request budgets keep every second under Apple's limit when requests leave, through a stall")
struct RequestBudgetStallTests {
    static let bucket = RequestBucket(endpoint: OrderEndpoints.lookUp.endpoint, environment: .production)
    /// Apple's limit on Look Up Order ID, per second.
    static let appleLimit = 10

    /// The most requests any one-second window holds, both ends included, of `departures`.
    static func busiestSecond(_ departures: [Duration]) -> Int {
        let sorted = departures.sorted()
        return sorted.indices.map { start in
            sorted[start...].prefix { $0 - sorted[start] <= .seconds(1) }.count
        }.max() ?? 0
    }

    /// Sends `count` requests through `budgets` (round robin) at once, moves the clock in 5 ms steps,
    /// and jumps it from `stallFrom` to `stallTo` without a step in between; returns when each left.
    static func departures(
        count: Int, budgets: [any RequestBudget], clock: HandMovedClock, stallFrom: Duration, stallTo: Duration
    ) async throws -> [Duration] {
        let left = Departures()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    try await budgets[index % budgets.count].admit(bucket)
                    left.record(clock.now)
                }
            }
            var time = Duration.zero
            while left.count < count {
                try await settle(count: count, left: left, clock: clock)
                time = time == stallFrom ? stallTo : time + .milliseconds(5)
                #expect(time < .seconds(30), "the budget let \(left.count) of \(count) go in 30 s")
                if time >= .seconds(30) { break }
                clock.advance(to: time)
            }
            try await group.waitForAll()
        }
        return left.all
    }

    /// Waits (real time, polling) until every request has either left or gone to sleep on the clock.
    static func settle(count: Int, left: Departures, clock: HandMovedClock) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while left.count + clock.sleeping < count {
            try #require(ContinuousClock.now < deadline, "requests neither left nor slept within 20 s")
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test(
        """
        30 lookups on this process's budget, the process stalled from 0.5 s to 2.5 s: no second holds more \
        than Apple's 10 when they leave (before: the 16 that slept through the stall left at 2.5 s together)
        """)
    func localBudgetThroughAStall() async throws {
        let clock = HandMovedClock()
        let budget = LocalRequestBudget(rates: OrderEndpoints.lookUp.rates, clock: clock.budgetClock)
        let left = try await Self.departures(
            count: 30, budgets: [budget], clock: clock, stallFrom: .milliseconds(500), stallTo: .milliseconds(2_500))
        #expect(left.count == 30)
        #expect(Self.busiestSecond(left) <= Self.appleLimit, "\(left.sorted())")
        #expect(Self.busiestSecond(left) <= 9, "the bound RequestRates.lateness documents")
    }

    @Test(
        """
        30 lookups from two agents' fleet budgets sharing one reservation row, the process stalled from 0.5 s \
        to 2.5 s: no second holds more than Apple's 10 when they leave
        """)
    func fleetBudgetsThroughAStall() async throws {
        let clock = HandMovedClock()
        // The reservation `SQLSubscriptionStore.reserveRequestSlot` makes on PostgreSQL, on the same clock.
        let nextSlot = Mutex<Duration?>(nil)
        let reserve: FleetRequestBudget.Reserve = { _, interval in
            nextSlot.withLock { next in
                let now = clock.now
                let slot = max(next ?? now, now)
                next = slot + interval
                return slot - now
            }
        }
        let budgets = (0..<2).map { _ in
            FleetRequestBudget(
                rates: OrderEndpoints.lookUp.rates, logger: Logger(label: "test"), clock: clock.budgetClock,
                reserve: reserve)
        }
        let left = try await Self.departures(
            count: 30, budgets: budgets, clock: clock, stallFrom: .milliseconds(500), stallTo: .milliseconds(2_500))
        #expect(left.count == 30)
        #expect(Self.busiestSecond(left) <= Self.appleLimit, "\(left.sorted())")
        #expect(Self.busiestSecond(left) <= 9, "the bound RequestRates.lateness documents")
    }

    @Test(
        """
        Without a stall every lookup leaves at its slot: 30 at 8 a second (80 % of Apple's 10) take 3.625 s, \
        none waits for a second slot
        """)
    func noStallNoSlotLost() async throws {
        let clock = HandMovedClock()
        let budget = LocalRequestBudget(rates: OrderEndpoints.lookUp.rates, clock: clock.budgetClock)
        let left = try await Self.departures(
            count: 30, budgets: [budget], clock: clock, stallFrom: .seconds(-1), stallTo: .seconds(-1))
        #expect(left.sorted() == (0..<30).map { Duration.milliseconds(125 * $0) })
    }
}

/// When each request left its budget, in the hand-moved clock's time.
final class Departures: Sendable {
    private let times = Mutex<[Duration]>([])

    func record(_ time: Duration) { times.withLock { $0.append(time) } }
    var count: Int { times.withLock { $0.count } }
    var all: [Duration] { times.withLock { $0 } }
}
