import Hummingbird
import Logging
import ServiceLifecycle

/// Serves `router` on a free loopback port for the length of `body`, which gets the port once the
/// server listens. Requests still in flight when `body` ends are abandoned, so a receiver that
/// hangs on purpose does not hold the caller. For the small receivers tests and benchmarks stand
/// up (webhook endpoints); the simulator itself uses `withAppStoreSimulator`.
public func withLoopbackServer<T>(
    _ router: Router<BasicRequestContext>,
    logger: Logger,
    _ body: (Int) async throws -> T
) async throws -> T {
    try await withListeningService(
        logger: logger, abandonInFlight: true, stoppedEarly: "A loopback server stopped before listening.",
        { listening in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in listening(channel.localAddress?.port ?? 0) }, logger: logger)
        }, body)
}

/// Runs the service `make` builds for the length of `body`, which starts once the service has called
/// the callback it was given (when it listens) and gets what it passed. Afterwards the service shuts
/// down gracefully and is waited for (its error, if any, is thrown), or with `abandonInFlight` it is
/// cancelled after the graceful shutdown starts. If it stops before listening, its error, else
/// `SimulatorStartupError(stoppedEarly)`, is thrown; `failedToListen` may put the error in clearer words.
func withListeningService<Started: Sendable, T>(
    logger: Logger, abandonInFlight: Bool, stoppedEarly: @autoclosure () -> String,
    failedToListen: (any Error) -> any Error = { $0 },
    _ make: (@escaping @Sendable (Started) -> Void) -> any Service,
    _ body: (Started) async throws -> T
) async throws -> T {
    let (listening, continuation) = AsyncStream.makeStream(of: Started.self)
    let service = make { started in
        continuation.yield(started)
        continuation.finish()
    }
    let serviceGroup = ServiceGroup(configuration: .init(services: [service], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { continuation.finish() }
            try await serviceGroup.run()
        }
        var iterator = listening.makeAsyncIterator()
        guard let started = await iterator.next() else {
            do { try await group.waitForAll() } catch { throw failedToListen(error) }
            throw SimulatorStartupError(description: stoppedEarly())
        }
        func stop() async throws {
            await serviceGroup.triggerGracefulShutdown()
            if abandonInFlight { group.cancelAll() } else { try await group.waitForAll() }
        }
        let result: T
        do {
            result = try await body(started)
        } catch {
            try? await stop()
            throw error
        }
        try await stop()
        return result
    }
}
