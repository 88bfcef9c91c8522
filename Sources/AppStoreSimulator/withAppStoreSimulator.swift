import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// Why the simulator could not be started.
public struct SimulatorStartupError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String

    /// `error`, thrown by a server that was to listen on `host`:`port`, in words naming both and `fix`
    /// (NIO's own description of a failed bind names neither); other errors as they are.
    public static func listening(on host: String, port: Int, failedWith error: any Error, fix: String) -> any Error {
        guard let error = error as? IOError else { return error }
        let reason =
            error.errnoCode == EADDRINUSE
            ? "the port is in use, perhaps by another simulator" : String(cString: strerror(error.errnoCode))
        return SimulatorStartupError(description: "Cannot listen on \(host):\(port): \(reason); \(fix).")
    }
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
        failedToListen: { error in
            SimulatorStartupError.listening(
                on: configuration.host, port: configuration.port, failedWith: error,
                fix: "stop what holds it, or configure another port (0: any free port)")
        },
        { listening in buildSimulator(configuration: configuration, logger: logger) { listening($0) } }, body)
}
