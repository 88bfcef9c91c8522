import Foundation
import Synchronization
import Testing

/// On PostgreSQL each committed batch of changes is announced on the `renewal_changes` channel, so an
/// app server on the same database can react at once without webhooks.
@Suite(
    "NOTIFY renewal_changes on PostgreSQL",
    .enabled(
        if: PostgresKillEnvironment.baseURL != nil && PostgresKillTests.psqlPath != nil,
        "RENEWAL_TEST_POSTGRES_URL is not set, or psql is missing"))
struct ChangeNotifyTests {
    /// A `psql` session reading statements from a pipe, its output gathered as it comes.
    final class Listener: Sendable {
        let process = Process()
        let input = Pipe()
        let output = Gathered()

        final class Gathered: Sendable {
            private let text = Mutex("")
            func append(_ data: Data) { text.withLock { $0 += String(decoding: data, as: UTF8.self) } }
            var value: String { text.withLock { $0 } }
        }

        init(url: String, psql: String) throws {
            let pipe = Pipe()
            process.executableURL = URL(fileURLWithPath: psql)
            process.arguments = ["-X", "-q", "-A", "-t", url]
            process.standardInput = input
            process.standardOutput = pipe
            process.standardError = pipe
            pipe.fileHandleForReading.readabilityHandler = { [output] handle in
                output.append(handle.availableData)
            }
            try process.run()
        }

        /// Sends `sql` followed by a marker query, and waits (polling) until the marker is echoed.
        func send(_ sql: String, marker: String) async throws {
            input.fileHandleForWriting.write(Data("\(sql)\nSELECT '\(marker)';\n".utf8))
            let deadline = ContinuousClock.now + .seconds(20)
            while !output.value.contains(marker), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        /// The change ids of every notification received on `renewal_changes`.
        var announced: Set<Int> {
            let text = output.value
            var ids: Set<Int> = []
            for line in text.split(separator: "\n") where line.contains("\"renewal_changes\"") {
                guard let payload = line.split(separator: "\"").dropFirst(3).first else { continue }
                ids.formUnion(payload.split(separator: ",").compactMap { Int($0) })
            }
            return ids
        }

        /// Ends the session, waiting on a GCD thread (never on the test's concurrency pool).
        func stop() async {
            try? input.fileHandleForWriting.close()
            _ = await PostgresKillTests.waitForExit(process)
        }
    }

    @Test("Every change a run commits is announced to a LISTENing session, with its id")
    func listeningSessionHearsEveryChange() async throws {
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath)
        let target = try KillLoopTests.Target.postgres(base: base, psql: psql)
        defer { target.drop() }
        try await ObservedRun.with(database: target.database) { observed in
            let listener = try Listener(url: target.database, psql: psql)
            try await listener.send("LISTEN renewal_changes;", marker: "listening")
            let run = try await CLI.run(["run"], environment: observed.environment)
            #expect(run.status == 3, "\(run.stderr.suffix(500))")
            // psql prints notifications when it next runs a statement.
            try await listener.send("SELECT 1;", marker: "after-run")
            let recorded = Set(try await target.lines("SELECT id FROM entitlement_changes").compactMap { Int($0) })
            #expect(!recorded.isEmpty)
            #expect(recorded.isSubset(of: listener.announced), "\(recorded.subtracting(listener.announced).sorted())")
            await listener.stop()
        }
    }
}
