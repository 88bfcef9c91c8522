import Logging
import ServiceLifecycle
import UnixSignals
import Synchronization

extension RenewalRun {
    /// Runs the job inside a `ServiceGroup` that turns SIGTERM and SIGINT into a graceful stop: no new
    /// receipts are claimed, in-flight ones finish and are written, claimed ones are released, and the
    /// partial report is written (outcome `interrupted`).
    public func runUntilDone() async throws -> RenewalOutcome {
        let service = Job(run: self)
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(
                service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
        return try service.result.withLock { result in
            guard let result else { throw CancellationError() }
            return try result.get()
        }
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
