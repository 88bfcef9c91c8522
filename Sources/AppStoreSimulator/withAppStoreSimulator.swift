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
    try await withListeningService(
        logger: logger, abandonInFlight: false,
        stoppedEarly:
            "The App Store simulator stopped before listening on \(configuration.host):\(configuration.port).",
        { listening in buildSimulator(configuration: configuration, logger: logger) { listening($0) } }, body)
}
