import Foundation
import Logging
import RenewalCore
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension RenewalRun {
    /// Runs the job inside a `ServiceGroup` and turns SIGTERM and SIGINT into a bounded stop.
    ///
    /// The first signal starts a graceful shutdown: no new receipts are claimed, retries and backoff
    /// sleeps stop, in-flight requests get `drainTimeout` to answer before they are cancelled, claimed
    /// receipts are released untouched, and the partial report is written (outcome `interrupted`,
    /// exit 3). A second signal, or `hardStopDelay` after the first, ends the process at once with
    /// 128 + the signal number: a transaction not yet committed is rolled back by the database, so
    /// nothing is half-written, and the next run takes back this run's leases (see
    /// `SubscriptionStore.recoverAbandonedWork`).
    public func runUntilDone() async throws -> RenewalOutcome {
        let service = Job(run: self)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(
                        service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                        failureTerminationBehavior: .gracefullyShutdownGroup)
                ],
                logger: logger))
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let logger = self.logger
        let hardStop = configuration.drainTimeout + Self.cleanupAllowance
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                var received = 0
                for await signal in signals {
                    received += 1
                    guard received == 1 else { Self.exitNow(signal, reason: "second \(signal) received") }
                    logger.notice(
                        "Signal received: stopping (a second signal exits at once)",
                        metadata: [
                            LogKey.signal: "\(signal)", LogKey.hardStopSeconds: "\(hardStop.components.seconds)",
                        ])
                    await group.triggerGracefulShutdown()
                    Task.detached {
                        try await Task.sleep(for: hardStop)
                        Self.exitNow(signal, reason: "the stop took longer than \(hardStop.components.seconds) s")
                    }
                }
            }
            try await tasks.next()
            tasks.cancelAll()
        }
        return try service.result.withLock { result in
            guard let result else { throw CancellationError() }
            return try result.get()
        }
    }

    /// Time allowed after the drain for releasing leases and writing the report and the run row.
    static var cleanupAllowance: Duration { .seconds(8) }

    /// Ends the process now, without unwinding: open transactions die with the connection.
    private static func exitNow(_ signal: UnixSignal, reason: String) -> Never {
        let line =
            """
            renewal: \(reason): exiting now; uncommitted work is rolled back and the next run takes back this \
            run's leases\n
            """
        FileHandle.standardError.write(Data(line.utf8))
        _exit(ExitStatus.afterSignal(signal.rawValue))
    }

    private final class Job: Service {
        let run: RenewalRun
        let result = Mutex<Result<RenewalOutcome, any Error>?>(nil)

        init(run: RenewalRun) {
            self.run = run
        }

        func run() async throws {
            do {
                let outcome = try await run.run()
                result.withLock { $0 = .success(outcome) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
        }
    }
}
