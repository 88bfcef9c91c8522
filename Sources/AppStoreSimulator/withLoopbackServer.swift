import Hummingbird
import Logging
import ServiceLifecycle

/// Serves `router` on a free loopback port for the length of `body`, which gets the port once the
/// server listens; the server always shuts down afterwards. For the small receivers tests and
/// benchmarks stand up (webhook endpoints); the simulator itself uses `withAppStoreSimulator`.
public func withLoopbackServer<T>(
    _ router: Router<BasicRequestContext>,
    logger: Logger,
    _ body: (Int) async throws -> T
) async throws -> T {
    let (listening, continuation) = AsyncStream.makeStream(of: Int.self)
    let application = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            continuation.yield(channel.localAddress?.port ?? 0)
            continuation.finish()
        }, logger: logger)
    let serviceGroup = ServiceGroup(configuration: .init(services: [application], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { continuation.finish() }
            try await serviceGroup.run()
        }
        var iterator = listening.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            try await group.waitForAll()
            throw SimulatorStartupError(description: "A loopback server stopped before listening.")
        }
        let result: T
        do {
            result = try await body(port)
        } catch {
            await serviceGroup.triggerGracefulShutdown()
            group.cancelAll()
            throw error
        }
        await serviceGroup.triggerGracefulShutdown()
        group.cancelAll()
        return result
    }
}
