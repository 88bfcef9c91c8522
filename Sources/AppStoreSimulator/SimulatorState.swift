import Foundation
import Synchronization

/// The simulator's mutable state, shared by the HTTP routes and in-process users (tests, the demo).
///
/// Thread-safe: everything sits behind one `Mutex`.
public final class SimulatorState: Sendable {
    /// A fault applied to every verifyReceipt request, whatever the receipt.
    public enum Fault: String, Codable, Sendable, CaseIterable {
        /// Answer normally.
        case none
        /// HTTP 503 with an HTML body.
        case outage
        /// HTTP 200 with an HTML page.
        case html200 = "html_200"
        /// HTTP 200 `{"status":21005}`.
        case status21005 = "status_21005"
    }

    /// A fixed answer for one account, replacing its scenario's (tests of odd or hostile answers).
    public struct ScriptedAnswer: Sendable, Hashable {
        public var httpStatus: Int
        public var contentType: String
        /// The bytes sent, as they are: they need not be UTF-8 or JSON.
        public var body: Data

        public init(httpStatus: Int = 200, contentType: String = "application/json", body: String) {
            self.init(httpStatus: httpStatus, contentType: contentType, bytes: Data(body.utf8))
        }

        public init(httpStatus: Int = 200, contentType: String = "application/json", bytes: Data) {
            self.httpStatus = httpStatus
            self.contentType = contentType
            self.body = bytes
        }

        /// A JSON object answered with HTTP 200 (`JSONSerialization` output of `object`).
        public static func json(_ object: [String: Any]) -> ScriptedAnswer {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return ScriptedAnswer(bytes: data)
        }
    }

    /// Request counters.
    public struct Stats: Codable, Sendable, Hashable {
        /// verifyReceipt requests on both endpoints.
        public var requests: Int
        /// Requests to the production endpoint.
        public var production: Int
        /// Requests to the sandbox endpoint.
        public var sandbox: Int
    }

    private struct Storage {
        var base: Date?
        var offset: TimeInterval
        var fault: Fault = .none
        var latency: Duration = .zero
        var stats = Stats(requests: 0, production: 0, sandbox: 0)
        var attempts: [String: Int] = [:]
        var received: [String: String] = [:]
        var scripts: [String: ScriptedAnswer] = [:]
    }

    private let storage: Mutex<Storage>

    /// Creates the state.
    /// - Parameters:
    ///   - now: a fixed clock start; nil (the default) follows the wall clock.
    ///   - offset: seconds added to the clock (the executable's `--clock-offset-seconds`).
    public init(now: Date? = nil, offset: TimeInterval = 0) {
        storage = Mutex(Storage(base: now, offset: offset))
    }

    /// The simulator clock: the fixed start (or the wall clock) plus every `advance(by:)`.
    public var now: Date {
        storage.withLock { ($0.base ?? Date()).addingTimeInterval($0.offset) }
    }

    /// Moves the clock forward (or back, with a negative interval).
    public func advance(by interval: TimeInterval) {
        storage.withLock { $0.offset += interval }
    }

    /// Sets the clock to `date` and freezes it there.
    public func set(_ date: Date) {
        storage.withLock {
            $0.base = date
            $0.offset = 0
        }
    }

    /// The global fault for every verifyReceipt request (for circuit-breaker tests).
    public var fault: Fault {
        get { storage.withLock { $0.fault } }
        set { storage.withLock { $0.fault = newValue } }
    }

    /// Extra delay before every verifyReceipt answer.
    public var latency: Duration {
        get { storage.withLock { $0.latency } }
        set { storage.withLock { $0.latency = newValue } }
    }

    /// The request counters so far.
    public var stats: Stats {
        storage.withLock { $0.stats }
    }

    /// The last `receipt-data` received for `account`, nil if none.
    public func lastReceived(account: String) -> String? {
        storage.withLock { $0.received[account] }
    }

    /// How many verifyReceipt requests named `account` so far.
    public func attempts(account: String) -> Int {
        storage.withLock { $0.attempts[account] ?? 0 }
    }

    /// Answers every request for `account` with `answer` (after the shared-secret check) until
    /// cleared with nil.
    public func script(account: String, _ answer: ScriptedAnswer?) {
        storage.withLock { $0.scripts[account] = answer }
    }

    /// The scripted answer for `account`, if any.
    func scripted(account: String) -> ScriptedAnswer? {
        storage.withLock { $0.scripts[account] }
    }

    /// Counts one verifyReceipt request.
    func recordRequest(sandbox: Bool) {
        storage.withLock {
            $0.stats.requests += 1
            if sandbox { $0.stats.sandbox += 1 } else { $0.stats.production += 1 }
        }
    }

    /// Records a receipt for its account and returns the attempt number (1 for the first request).
    func recordReceipt(account: String, receiptData: String) -> Int {
        storage.withLock {
            $0.received[account] = receiptData
            let attempt = ($0.attempts[account] ?? 0) + 1
            $0.attempts[account] = attempt
            return attempt
        }
    }
}
