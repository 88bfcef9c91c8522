import AppStoreSimulator
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real `renewal` binary on PostgreSQL while the server misbehaves mid-run: its session is
/// terminated (the shared test server, never restarted), or a private throwaway cluster is
/// restarted. Needs `RENEWAL_TEST_POSTGRES_URL`, `psql` and, for the restart, the server binaries.
@Suite(
    "Database faults on PostgreSQL (real binary, real server)", .serialized,
    .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct PostgresFaultTests {
    static let secret = "pg-fault-secret-2b7e91"
    /// Put into the URL the binary gets (the test servers trust loopback, so it is never checked):
    /// it must not appear in any output.
    static let password = "pg-fault-password-c4d8a3"
    static let receipts = 48

    @Test(
        """
        injected: pg_terminate_backend on the run's session, twice, mid-run (shared server) → exit 0 after \
        reconnecting, or 1 naming the redacted URL; nothing half-written; next run finishes
        """
    )
    func sessionTerminated() async throws {
        let base = try #require(PostgresKillEnvironment.baseURL)
        try await PostgresFaultFixture.with(base: base, prefix: "pg-term") { fixture in
            fixture.state.latency = .milliseconds(40)
            let start = fixture.state.stats.requests
            let child = try fixture.start()
            var terminated: [String] = []
            for threshold in [10, 24] {
                let reached = await poll(timeout: 30) {
                    fixture.state.stats.requests - start >= threshold || !child.isRunning
                }
                guard reached, child.isRunning else { break }
                // Only this test's sessions: the URL gives them their own application_name.
                terminated.append(
                    try fixture.admin(
                        """
                        SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = \
                        '\(fixture.applicationName)'
                        """
                    ))
            }
            #expect(
                terminated.count == 2 && terminated.allSatisfy { $0 != "0" },
                "sessions terminated per attempt: \(terminated)")
            let run = await child.finish()
            fixture.runs.append(run)
            let verifiedAfterFault = try fixture.query("SELECT count(*) FROM receipts WHERE status = 'verified'")

            fixture.expectExitAfterLostSession(run)
            try fixture.expectConsistent()
            let recovered = try await fixture.recover()
            print(
                """
                figures[postgres session terminated]: receipts \(Self.receipts), sessions terminated \
                \(terminated), faulted run exit \(run.status) after \(fmt(run.seconds)) s with \
                \(verifiedAfterFault) verified, recovery run \(fmt(recovered.seconds)) s
                """
            )
        }
    }

    @Test(
        """
        injected: private throwaway cluster restarted with pg_ctl restart -m fast mid-run → exit 0 after \
        reconnecting, or 1 naming the redacted URL; nothing half-written; next run finishes
        """
    )
    func serverRestarted() async throws {
        let cluster = try await PrivateCluster.start()
        defer { cluster.stop() }
        try await PostgresFaultFixture.with(base: cluster.url, prefix: "pg-restart") { fixture in
            fixture.state.latency = .milliseconds(40)
            let start = fixture.state.stats.requests
            let child = try fixture.start()
            let reached = await poll(timeout: 30) { fixture.state.stats.requests - start >= 12 || !child.isRunning }
            #expect(reached && child.isRunning, "the run ended before the server could be restarted")
            let restartStarted = Date()
            try await cluster.restart()
            let restartSeconds = Date().timeIntervalSince(restartStarted)
            let run = await child.finish()
            fixture.runs.append(run)
            let verifiedAfterFault = try fixture.query("SELECT count(*) FROM receipts WHERE status = 'verified'")

            fixture.expectExitAfterLostSession(run)
            try fixture.expectConsistent()
            let recovered = try await fixture.recover()
            print(
                """
                figures[postgres restart]: receipts \(Self.receipts), restart took \(fmt(restartSeconds)) s, \
                faulted run exit \(run.status) after \(fmt(run.seconds)) s with \(verifiedAfterFault) verified, \
                recovery run \(fmt(recovered.seconds)) s
                """
            )
        }
    }
}

/// A simulator, a baseline schema that had one uninterrupted run, and a fault schema with the same
/// receipts imported, on the server at `base`.
final class PostgresFaultFixture: @unchecked Sendable {
    let base: String
    let psql: String
    let directory: String
    let schema: String
    let applicationName: String
    /// What the binary gets: the password, the schema and the application name added.
    let url: String
    let state: SimulatorState
    let environment: [String: String]
    let baselineStatus: [String]
    let baselineEvents: String
    var runs: [FaultRun] = []

    private init(
        base: String, psql: String, directory: String, schema: String, applicationName: String, url: String,
        state: SimulatorState,
        environment: [String: String], baselineStatus: [String], baselineEvents: String, runs: [FaultRun]
    ) {
        self.base = base
        self.psql = psql
        self.directory = directory
        self.schema = schema
        self.applicationName = applicationName
        self.url = url
        self.state = state
        self.environment = environment
        self.baselineStatus = baselineStatus
        self.baselineEvents = baselineEvents
        self.runs = runs
    }

    /// `base` with `password` set, `search_path` set to `schema` and `application_name`.
    static func url(base: String, schema: String, applicationName: String, password: String?) throws -> String {
        var components = try #require(URLComponents(string: base), "RENEWAL_TEST_POSTGRES_URL is not a URL")
        if let password { components.password = password }
        let added = "options=-csearch_path%3D\(schema)&application_name=\(applicationName)"
        components.percentEncodedQuery = [components.percentEncodedQuery, added].compactMap { $0 }.joined(
            separator: "&")
        return try #require(components.string)
    }

    static func with(base: String, prefix: String, _ body: (PostgresFaultFixture) async throws -> Void) async throws {
        let psql = try #require(PostgresKillTests.psqlPath, "psql is needed")
        let id = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        let schema = "renewal_fault_\(id)"
        let baselineSchema = schema + "_base"
        let applicationName = "renewal-fault-\(id)"
        try await PostgresKillTests.sqlOffPool(
            "CREATE SCHEMA \(schema); CREATE SCHEMA \(baselineSchema)", url: base, psql: psql)
        defer {
            _ = try? PostgresKillTests.sql(
                "DROP SCHEMA \(schema) CASCADE; DROP SCHEMA \(baselineSchema) CASCADE", url: base, psql: psql)
        }
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let url = try Self.url(
            base: base, schema: schema, applicationName: applicationName, password: PostgresFaultTests.password)
        let baselineURL = try Self.url(
            base: base, schema: baselineSchema, applicationName: applicationName + "-base",
            password: PostgresFaultTests.password)

        let state = SimulatorState()
        let configuration = SimulatorConfiguration(sharedSecret: PostgresFaultTests.secret, state: state)
        try await withAppStoreSimulator(configuration: configuration, logger: faultSimulatorLogger) { endpoints in
            let environment = [
                "APPSTORE_SHARED_SECRET": PostgresFaultTests.secret,
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
            ]
            let data = FaultReceipts(count: PostgresFaultTests.receipts, prefix: prefix, now: state.now)
            var runs: [FaultRun] = []

            for arguments in [["migrate"], ["import", "-"], ["run", "--concurrency", "2"]] {
                let stdin = arguments.first == "import" ? data.importLines : nil
                let run = try await FaultProcess.run(
                    arguments + ["--database", baselineURL], environment: environment, stdin: stdin,
                    directory: directory)
                try #require(run.status == 0, "baseline \(arguments): exit \(run.status): \(run.stderr)")
                runs.append(run)
            }
            let status = try await FaultProcess.run(
                ["status", "--json", "--database", baselineURL], directory: directory)
            let baselineStatus = try StableStatus.rows(status.stdout)
            try #require(baselineStatus.count >= PostgresFaultTests.receipts)
            let baselineQuery: (String) throws -> String = { sql in
                try PostgresKillTests.sql("SET search_path TO \(baselineSchema); \(sql)", url: base, psql: psql)
            }
            let baselineEvents = try baselineQuery(DatabaseInvariants.eventsQuery)
            let violations = try DatabaseInvariants.violations(
                DatabaseInvariants.rules + DatabaseInvariants.afterRecovery, query: baselineQuery)
            try #require(violations.isEmpty, "the uninterrupted pass itself breaks: \(violations)")

            for arguments in [["migrate"], ["import", "-"]] {
                let stdin = arguments.first == "import" ? data.importLines : nil
                let run = try await FaultProcess.run(
                    arguments + ["--database", url], environment: environment, stdin: stdin, directory: directory)
                try #require(run.status == 0, "\(arguments): exit \(run.status): \(run.stderr)")
                runs.append(run)
            }
            let fixture = PostgresFaultFixture(
                base: base, psql: psql, directory: directory, schema: schema, applicationName: applicationName,
                url: url, state: state,
                environment: environment, baselineStatus: baselineStatus, baselineEvents: baselineEvents, runs: runs)
            try await body(fixture)
            expectNoSecrets(
                in: fixture.runs, secrets: [PostgresFaultTests.secret, PostgresFaultTests.password],
                receipts: data.encoded)
        }
    }

    func start() throws -> FaultProcess {
        try FaultProcess(
            ["run", "--database", url, "--concurrency", "2"], environment: environment, directory: directory)
    }

    /// One statement in the fault schema.
    func query(_ sql: String) throws -> String {
        try PostgresKillTests.sql("SET search_path TO \(schema); \(sql)", url: base, psql: psql)
    }

    /// One statement as the administrator, outside the schema.
    func admin(_ sql: String) throws -> String {
        try PostgresKillTests.sql(sql, url: base, psql: psql)
    }

    /// A lost session mid-run either is survived (reconnect, the run finishes: exit 0, no failure
    /// line) or ends the run as an internal error: exit 1, one `renewal: …` line naming the server
    /// with the password redacted.
    func expectExitAfterLostSession(_ run: FaultRun, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            run.reason == .exit && [0, 1].contains(run.status), "exit \(run.status) (\(run.reason)): \(run.stderr)",
            sourceLocation: sourceLocation)
        let lines = run.failureLines
        if run.status == 0 {
            #expect(lines.isEmpty, "a run that exits 0 printed a failure: \(lines)", sourceLocation: sourceLocation)
            return
        }
        #expect(
            lines.count == 1, "expected one `renewal: …` line on stderr, got: \(run.stderr)",
            sourceLocation: sourceLocation)
        guard let line = lines.first, let components = URLComponents(string: base), let host = components.host else {
            return
        }
        let server = components.port.map { "\(host):\($0)" } ?? host
        #expect(
            line.contains(server), "the message does not name the server \(server): \(line)",
            sourceLocation: sourceLocation)
        #expect(
            line.lowercased().contains("postgres"), "the message does not say PostgreSQL: \(line)",
            sourceLocation: sourceLocation)
    }

    func expectConsistent(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let violations = try DatabaseInvariants.violations(DatabaseInvariants.rules) { try query($0) }
        #expect(violations.isEmpty, "\(violations)", sourceLocation: sourceLocation)
    }

    /// One normal run exits 0 and the schema equals the uninterrupted pass.
    @discardableResult
    func recover(sourceLocation: SourceLocation = #_sourceLocation) async throws -> FaultRun {
        state.latency = .zero
        let run = try await FaultProcess.run(
            ["run", "--database", url, "--concurrency", "2"], environment: environment, directory: directory)
        runs.append(run)
        #expect(
            run.status == 0, "the run after the fault: exit \(run.status): \(run.stderr)",
            sourceLocation: sourceLocation)
        runs.append(
            try await DatabaseInvariants.expectUninterruptedPass(
                database: url, directory: directory, baselineStatus: baselineStatus, baselineEvents: baselineEvents,
                query: query,
                sourceLocation: sourceLocation))
        return run
    }
}

/// A throwaway PostgreSQL cluster on a free loopback port, run as the `postgres` user when the
/// tests run as root (the recipe in `.ci/run`), so it can be restarted without touching the shared one.
final class PrivateCluster: @unchecked Sendable {
    let directory: String
    let port: Int
    let binaries: String
    var url: String { "postgresql://postgres@127.0.0.1:\(port)/postgres" }

    private init(directory: String, port: Int, binaries: String) {
        self.directory = directory
        self.port = port
        self.binaries = binaries
    }

    static func start() async throws -> PrivateCluster {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let newest = versions.sorted { $0.compare($1, options: .numeric) == .orderedDescending }.first
        let binaries = try #require(
            newest.map { "/usr/lib/postgresql/\($0)/bin" }, "PostgreSQL server binaries are needed")
        let directory = "/tmp/renewal-fault-pg-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
        chmod(directory, 0o755)
        if geteuid() == 0 {
            let owner = try #require(getpwnam("postgres"), "the postgres system user is needed")
            chown(directory, owner.pointee.pw_uid, owner.pointee.pw_gid)
            chown(directory + "/data", owner.pointee.pw_uid, owner.pointee.pw_gid)
        }
        let cluster = PrivateCluster(directory: directory, port: try freePort(), binaries: binaries)
        // initdb and pg_ctl take seconds: waited for off the Swift concurrency threads the
        // in-process simulators of other tests answer on.
        try await offPool {
            try cluster.control([
                "initdb", "-D", directory + "/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync",
            ])
        }
        try await offPool {
            try cluster.control([
                "pg_ctl", "-D", directory + "/data", "-l", directory + "/log", "-w", "-o", cluster.serverOptions,
                "start",
            ])
        }
        return cluster
    }

    private var serverOptions: String {
        """
        -p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c \
        full_page_writes=off
        """
    }

    /// `pg_ctl restart -m fast`: every session is ended, the server comes back on the same port.
    func restart() async throws {
        try await offPool { try self.restartBlocking() }
    }

    private func restartBlocking() throws {
        try control([
            "pg_ctl", "-D", directory + "/data", "-l", directory + "/log", "-w", "-m", "fast", "-o", serverOptions,
            "restart",
        ])
    }

    func stop() {
        _ = try? control(["pg_ctl", "-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a server tool with stdin from /dev/null, its output appended to `control.log` and every
    /// other descriptor closed. Not `Foundation.Process`: it learns that a child ended when a socket
    /// the child inherited closes, and `pg_ctl start` would leave a server holding it open for ever.
    private func control(_ command: [String]) throws {
        let program = binaries + "/" + command[0]
        let arguments =
            geteuid() == 0
            ? ["/usr/sbin/runuser", "-u", "postgres", "--", program] + command.dropFirst()
            : [program] + command.dropFirst()
        let log = directory + "/control.log"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // bash closes every inherited descriptor above 2, then runs the tool.
        let closeAll = #"for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done; exec "$@""#
        let command = ["/bin/bash", "-c", closeAll, "control"] + arguments
        let argv = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        try #require(spawned == 0, "cannot start \(arguments[0]): error \(spawned)")
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        let exitCode = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exitCode == 0 else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw ToolFailure(
                command: arguments.joined(separator: " "), status: exitCode, stderr: String(output.suffix(2_000)))
        }
    }

    private static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        try #require(bound, "cannot find a free port")
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
