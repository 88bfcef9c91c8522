import AppStoreSimulator
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real `renewal` binary on a real SQLite file while the database misbehaves: another process
/// holds a write transaction, the file or its directory is read-only, the disk is full. Each test
/// checks the exit code, one `renewal: …` line naming the file, that nothing is half-written, and
/// that the next run ends where an uninterrupted pass over the same answers ends.
@Suite("Database faults on SQLite (real binary, real files)", .serialized)
struct DatabaseFaultTests {
    static let secret = "db-fault-secret-5e1d0c"
    static let receipts = 48

    // MARK: - Another process holds the write lock

    @Test(
        """
        injected: sqlite3 shell holds BEGIN IMMEDIATE before the run starts → exit 75 naming the file, nothing \
        written, next run finishes
        """
    )
    func lockedAtStart() async throws {
        try await SQLiteFaultFixture.with(prefix: "lock-start") { fixture in
            let locker = try await SQLiteWriteLocker(database: fixture.database, directory: fixture.directory)
            let requestsBefore = fixture.state.stats.requests
            let run = try await fixture.run()
            let requestsDuring = fixture.state.stats.requests - requestsBefore
            locker.release()

            #expect(run.status == 75, "exit \(run.status): \(run.stderr)")
            fixture.expectOneFailureLine(run, mentioning: ["locked", "another process"])
            #expect(
                requestsDuring == 0,
                "Apple was called \(requestsDuring) times although the database refused the run's first write")
            try fixture.expectUntouched()

            let recovered = try await fixture.recover()
            print(
                """
                figures[sqlite lock at start]: receipts \(Self.receipts), failed run \(fmt(run.seconds)) s, \
                recovery run \(fmt(recovered.seconds)) s
                """
            )
        }
    }

    @Test(
        """
        injected: sqlite3 shell takes BEGIN IMMEDIATE mid-run and keeps it → exit 1 naming the file, nothing \
        half-written, next run finishes
        """
    )
    func lockedMidRun() async throws {
        try await SQLiteFaultFixture.with(prefix: "lock-mid") { fixture in
            fixture.state.latency = .milliseconds(40)
            let start = fixture.state.stats.requests
            let child = try fixture.start()
            let reached = await poll(timeout: 30) { fixture.state.stats.requests - start >= 10 || !child.isRunning }
            #expect(reached && child.isRunning, "the run ended before the lock could be taken")
            let locker = try await SQLiteWriteLocker(database: fixture.database, directory: fixture.directory)
            let run = await child.finish()
            let faultSeconds = run.seconds
            fixture.runs.append(run)

            #expect(run.status == 1, "exit \(run.status): \(run.stderr)")
            fixture.expectOneFailureLine(run, mentioning: ["locked", "another process"])
            let verified = try fixture.query("SELECT count(*) FROM receipts WHERE status = 'verified'")
            #expect(
                (Int(verified) ?? 0) > 0 && (Int(verified) ?? 0) < Self.receipts,
                "verified when the lock was taken: \(verified)")
            try fixture.expectConsistent()
            locker.release()

            let recovered = try await fixture.recover()
            print(
                """
                figures[sqlite lock mid-run]: receipts \(Self.receipts), verified before the fault \(verified), \
                failed run \(fmt(faultSeconds)) s, recovery run \(fmt(recovered.seconds)) s
                """
            )
        }
    }

    // MARK: - Read-only file or directory

    @Test(
        """
        injected: database file chmod 0444 for an unprivileged user → exit 78 naming the file and the fix, \
        nothing written, next run finishes
        """
    )
    func readOnlyFile() async throws {
        try await SQLiteFaultFixture.with(prefix: "ro-file") { fixture in
            try fixture.handToUnprivilegedUser()
            try fixture.setMode(fixture.database, 0o444)
            let run = try await fixture.run(asUnprivileged: true)
            #expect(run.status == 78, "exit \(run.status): \(run.stderr)")
            fixture.expectOneFailureLine(run, mentioning: ["read-only", "writable"])
            try fixture.setMode(fixture.database, 0o644)
            try fixture.expectUntouched()

            let recovered = try await fixture.recover(asUnprivileged: true)
            print(
                """
                figures[sqlite read-only file]: receipts \(Self.receipts), failed run \(fmt(run.seconds)) s, \
                recovery run \(fmt(recovered.seconds)) s
                """
            )
        }
    }

    @Test(
        """
        injected: database directory chmod 0555 for an unprivileged user → exit 78 naming the file and the fix, \
        nothing written, next run finishes
        """
    )
    func readOnlyDirectory() async throws {
        try await SQLiteFaultFixture.with(prefix: "ro-dir") { fixture in
            try fixture.handToUnprivilegedUser()
            try fixture.setMode(fixture.databaseDirectory, 0o555)
            let run = try await fixture.run(asUnprivileged: true)
            try fixture.setMode(fixture.databaseDirectory, 0o755)
            #expect(run.status == 78, "exit \(run.status): \(run.stderr)")
            fixture.expectOneFailureLine(run, mentioning: ["directory", "writable"])
            try fixture.expectUntouched()

            let recovered = try await fixture.recover(asUnprivileged: true)
            print(
                """
                figures[sqlite read-only directory]: receipts \(Self.receipts), failed run \(fmt(run.seconds)) s, \
                recovery run \(fmt(recovered.seconds)) s
                """
            )
        }
    }

    // MARK: - Disk full

    @Test(
        """
        injected: file-size limit (ulimit -f, writes fail with EFBIG) reached mid-run → exit 1 naming the file, \
        not killed by SIGXFSZ, nothing half-written, next run finishes
        """
    )
    func diskFullMidRun() async throws {
        try await SQLiteFaultFixture.with(prefix: "full") { fixture in
            // dash's `ulimit -f` counts 512-byte blocks: the WAL may grow to 160 KiB, which a few
            // receipts' transactions fill (each writes several 4 KiB pages). The test process may
            // itself ignore SIGXFSZ, which children inherit: `env --default-signal` restores the
            // default (kill the process), so only the binary's own `signal(SIGXFSZ, SIG_IGN)` saves it.
            let blocks = 320
            let launcher = [
                "/bin/sh", "-c", "ulimit -f \(blocks) && exec /usr/bin/env --default-signal=XFSZ \"$0\" \"$@\"",
            ]
            let run = try await fixture.run(launcher: launcher)

            #expect(
                run.reason == .exit, "killed by signal \(run.status) (SIGXFSZ is \(SIGXFSZ)): the binary must ignore it"
            )
            #expect(run.status == 1, "exit \(run.status): \(run.stderr)")
            fixture.expectOneFailureLine(run, mentioning: ["space", "limit"])
            let verified = try fixture.query("SELECT count(*) FROM receipts WHERE status = 'verified'")
            #expect(
                (Int(verified) ?? 0) > 0 && (Int(verified) ?? 0) < Self.receipts,
                "verified when the limit was reached: \(verified) (adjust the limit)")
            try fixture.expectConsistent()

            let recovered = try await fixture.recover()
            print(
                """
                figures[sqlite disk full]: receipts \(Self.receipts), limit \(blocks * 512) bytes, verified \
                before the fault \(verified), failed run \(fmt(run.seconds)) s, recovery run \
                \(fmt(recovered.seconds)) s
                """
            )
        }
    }
}

func fmt(_ seconds: Double) -> String { String(format: "%.2f", seconds) }

/// A simulator, a baseline database that had one uninterrupted run, and a second database with the
/// same receipts imported for the fault; everything under a temporary directory reachable by
/// `nobody`.
final class SQLiteFaultFixture: @unchecked Sendable {
    static let nobody: UInt32 = 65_534

    let directory: String
    /// Its own folder, so its permissions can change without touching the test's other files.
    let databaseDirectory: String
    let database: String
    let state: SimulatorState
    let environment: [String: String]
    let data: FaultReceipts
    let baselineStatus: [String]
    let baselineEvents: String
    var runs: [FaultRun] = []

    private init(
        directory: String, databaseDirectory: String, database: String, state: SimulatorState,
        environment: [String: String],
        data: FaultReceipts, baselineStatus: [String], baselineEvents: String, runs: [FaultRun]
    ) {
        self.directory = directory
        self.databaseDirectory = databaseDirectory
        self.database = database
        self.state = state
        self.environment = environment
        self.data = data
        self.baselineStatus = baselineStatus
        self.baselineEvents = baselineEvents
        self.runs = runs
    }

    static func with(prefix: String, _ body: (SQLiteFaultFixture) async throws -> Void) async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: SQLiteShell.path),
            "the sqlite3 shell is needed (apt-get install sqlite3)")
        let directory = try CLI.temporaryDirectory()
        chmod(directory, 0o755)
        defer {
            chmod(directory + "/db", 0o755)
            try? FileManager.default.removeItem(atPath: directory)
        }
        let state = SimulatorState()
        let configuration = SimulatorConfiguration(sharedSecret: DatabaseFaultTests.secret, state: state)
        try await withAppStoreSimulator(configuration: configuration, logger: faultSimulatorLogger) { endpoints in
            let environment = [
                "APPSTORE_SHARED_SECRET": DatabaseFaultTests.secret,
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
            ]
            let data = FaultReceipts(count: DatabaseFaultTests.receipts, prefix: prefix, now: state.now)
            var runs: [FaultRun] = []

            // The uninterrupted pass over the same answers.
            let baseline = directory + "/baseline.sqlite"
            for arguments in [["migrate"], ["import", "-"], ["run", "--concurrency", "2"]] {
                let stdin = arguments.first == "import" ? data.importLines : nil
                let run = try await FaultProcess.run(
                    arguments + ["--database", baseline], environment: environment, stdin: stdin, directory: directory)
                try #require(run.status == 0, "baseline \(arguments): exit \(run.status): \(run.stderr)")
                runs.append(run)
            }
            let status = try await FaultProcess.run(["status", "--json", "--database", baseline], directory: directory)
            let baselineStatus = try StableStatus.rows(status.stdout)
            try #require(baselineStatus.count >= DatabaseFaultTests.receipts)
            let baselineEvents = try SQLiteShell.query(baseline, DatabaseInvariants.eventsQuery)
            let violations = try DatabaseInvariants.violations(
                DatabaseInvariants.rules + DatabaseInvariants.afterRecovery
            ) {
                try SQLiteShell.query(baseline, $0)
            }
            try #require(violations.isEmpty, "the uninterrupted pass itself breaks: \(violations)")

            // The database the fault hits: migrated, receipts imported, nothing verified yet.
            let databaseDirectory = directory + "/db"
            try FileManager.default.createDirectory(atPath: databaseDirectory, withIntermediateDirectories: false)
            let database = databaseDirectory + "/renewal.sqlite"
            for arguments in [["migrate"], ["import", "-"]] {
                let stdin = arguments.first == "import" ? data.importLines : nil
                let run = try await FaultProcess.run(
                    arguments + ["--database", database], environment: environment, stdin: stdin, directory: directory)
                try #require(run.status == 0, "\(arguments): exit \(run.status): \(run.stderr)")
                runs.append(run)
            }

            let fixture = SQLiteFaultFixture(
                directory: directory, databaseDirectory: databaseDirectory, database: database, state: state,
                environment: environment, data: data, baselineStatus: baselineStatus, baselineEvents: baselineEvents,
                runs: runs)
            try await body(fixture)
            expectNoSecrets(in: fixture.runs, secrets: [DatabaseFaultTests.secret], receipts: data.encoded)
        }
    }

    var runArguments: [String] { ["run", "--database", database, "--concurrency", "2"] }

    /// `setpriv` drops to nobody/nogroup and keeps the environment as given (root ignores file modes).
    private func launcher(asUnprivileged: Bool) -> [String] {
        guard asUnprivileged, geteuid() == 0 else { return [] }
        return ["/usr/bin/setpriv", "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", "--"]
    }

    func start(launcher: [String] = []) throws -> FaultProcess {
        try FaultProcess(runArguments, launcher: launcher, environment: environment, directory: directory)
    }

    func run(asUnprivileged: Bool = false, launcher: [String] = []) async throws -> FaultRun {
        let run = try await FaultProcess.run(
            runArguments, launcher: launcher.isEmpty ? self.launcher(asUnprivileged: asUnprivileged) : launcher,
            environment: environment, directory: directory)
        runs.append(run)
        return run
    }

    /// Gives the database folder and its files to `nobody`, who is subject to file modes.
    func handToUnprivilegedUser() throws {
        guard geteuid() == 0 else { return }
        for path in [databaseDirectory]
            + ((try? FileManager.default.contentsOfDirectory(atPath: databaseDirectory)) ?? []).map({
                databaseDirectory + "/" + $0
            })
        {
            try #require(
                chown(path, Self.nobody, Self.nobody) == 0, "chown \(path): \(String(cString: strerror(errno)))")
        }
        // The launcher runs a copy of the binary in a folder every user can search (a clone under a
        // 0700 `mktemp -d`, as CI makes, would keep nobody out).
        let binary = try CLI.binaryReachableByAnyone()
        try #require(access(binary, X_OK) == 0)
    }

    func setMode(_ path: String, _ mode: mode_t) throws {
        try #require(chmod(path, mode) == 0, "chmod \(path): \(String(cString: strerror(errno)))")
    }

    func query(_ sql: String) throws -> String {
        try SQLiteShell.query(database, sql)
    }

    /// Exactly one `renewal: …` line, naming the database file and holding each of `words`.
    func expectOneFailureLine(
        _ run: FaultRun, mentioning words: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let lines = run.failureLines
        #expect(
            lines.count == 1, "expected one `renewal: …` line on stderr, got: \(run.stderr)",
            sourceLocation: sourceLocation)
        guard let line = lines.first else { return }
        #expect(
            line.contains(database), "the message does not name \(database): \(line)", sourceLocation: sourceLocation)
        for word in words {
            #expect(
                line.lowercased().contains(word), "the message lacks “\(word)”: \(line)", sourceLocation: sourceLocation
            )
        }
    }

    /// After a fault at start: every receipt still unverified, no subscription, no change event.
    func expectUntouched(sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(
            try query("SELECT count(*) FROM receipts WHERE status = 'unverified'") == "\(DatabaseFaultTests.receipts)",
            sourceLocation: sourceLocation)
        #expect(try query("SELECT count(*) FROM subscriptions") == "0", sourceLocation: sourceLocation)
        #expect(try query("SELECT count(*) FROM entitlement_changes") == "0", sourceLocation: sourceLocation)
    }

    /// Each receipt's result, subscriptions and change events were written together or not at all.
    func expectConsistent(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let violations = try DatabaseInvariants.violations(DatabaseInvariants.rules) { try query($0) }
        #expect(violations.isEmpty, "\(violations)", sourceLocation: sourceLocation)
    }

    /// The fault is gone: one normal run exits 0 and the database equals the uninterrupted pass.
    @discardableResult
    func recover(asUnprivileged: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> FaultRun
    {
        state.latency = .zero
        let run = try await self.run(asUnprivileged: asUnprivileged)
        #expect(
            run.status == 0, "the run after the fault: exit \(run.status): \(run.stderr)",
            sourceLocation: sourceLocation)
        runs.append(
            try await DatabaseInvariants.expectUninterruptedPass(
                database: database, directory: directory, baselineStatus: baselineStatus,
                baselineEvents: baselineEvents, query: query,
                sourceLocation: sourceLocation))
        return run
    }
}
