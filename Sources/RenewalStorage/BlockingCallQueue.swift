import Dispatch

/// Runs blocking calls (a C client library waiting on a socket or a file lock) one at a time on a
/// dedicated Dispatch thread, so they never occupy a thread of Swift's cooperative pool: a stalled
/// database then stalls only its own queue, while the run's timers, signal handling and Apple
/// requests go on.
public struct BlockingCallQueue: Sendable {
    private let queue: DispatchQueue

    public init(label: String) {
        queue = DispatchQueue(label: label)
    }

    /// Runs `body` on the queue and resumes with its result. `body` does not escape: the caller
    /// stays suspended until it has returned.
    public func run<T: Sendable>(_ body: () throws -> T) async throws -> T {
        try await withoutActuallyEscaping(body) { body in
            let call = UncheckedCall(body: body)
            return try await withCheckedThrowingContinuation { continuation in
                queue.async { continuation.resume(with: call.run()) }
            }
        }
    }
}

/// Carries a non-`Sendable` closure to the queue. Sound because the caller is suspended until the
/// closure has run, so it is never used from two threads at once.
private final class UncheckedCall<T>: @unchecked Sendable {
    private var body: (() throws -> T)?

    init(body: @escaping () throws -> T) {
        self.body = body
    }

    /// Runs the closure once and drops it before the caller resumes, as `withoutActuallyEscaping`
    /// requires.
    func run() -> Result<T, any Error> {
        let result = Result { try body?() ?? { throw CancellationError() }() }
        body = nil
        return result
    }
}
