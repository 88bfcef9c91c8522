import Hummingbird
import Logging
import ServiceLifecycle

/// Why the simulator could not be started.
public struct SimulatorStartupError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String
}

/// Runs the simulator for the length of `body` and always shuts it down afterwards.
///
/// The server binds `configuration.host`/`port` (port 0 picks a free port), and `body` starts only
/// once it listens.
/// - Parameters:
///   - configuration: address, shared secret, delays and the shared state. Default: loopback, any port.
///   - logger: the server's logger.
///   - body: runs while the simulator listens, with its URLs.
/// - Returns: what `body` returns.
public func withAppStoreSimulator<T>(
    configuration: SimulatorConfiguration = SimulatorConfiguration(),
    logger: Logger,
    _ body: (SimulatorEndpoints) async throws -> T
) async throws -> T {
    let (listening, continuation) = AsyncStream.makeStream(of: SimulatorEndpoints.self)
    let application = buildSimulator(configuration: configuration, logger: logger) { endpoints in
        continuation.yield(endpoints)
        continuation.finish()
    }
    let serviceGroup = ServiceGroup(configuration: .init(services: [application], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { continuation.finish() }
            try await serviceGroup.run()
        }
        var iterator = listening.makeAsyncIterator()
        guard let endpoints = await iterator.next() else {
            // The server stopped before listening: surface its error.
            try await group.waitForAll()
            throw SimulatorStartupError(
                description:
                    "The App Store simulator stopped before listening on \(configuration.host):\(configuration.port).")
        }
        let result: T
        do {
            result = try await body(endpoints)
        } catch {
            await serviceGroup.triggerGracefulShutdown()
            try? await group.waitForAll()
            throw error
        }
        await serviceGroup.triggerGracefulShutdown()
        try await group.waitForAll()
        return result
    }
}
