import Foundation
import Testing

/// The files in `Deploy/` and `crontab.example`, read as their tools read them, and every command they
/// name run as written (paths moved into a scratch folder) against a real database and the simulator.
enum DeployFiles {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let hasPyYAML = python.map { (try? tool($0, ["-c", "import yaml"])) != nil } ?? false

    static func text(_ relative: String) throws -> String {
        try String(contentsOfFile: root + "/" + relative, encoding: .utf8)
    }

    /// Every document of a YAML file, through PyYAML's safe loader (as kubectl and Prometheus would refuse what it
    /// refuses).
    static func yamlDocuments(_ relative: String) throws -> [[String: Any]] {
        try yamlDocuments(atPath: root + "/" + relative)
    }

    static func yamlDocuments(atPath path: String) throws -> [[String: Any]] {
        let python = try #require(python)
        let script =
            """
            import json, sys, yaml\nprint(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is \
            not None]))
            """
        let json = try tool(python, ["-c", script, path])
        return try #require(
            try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]],
            "\(path) is not a list of YAML mappings")
    }

    /// The long options a subcommand's `--help` lists, every name of each (`--server-api-url, --server-apiurl <url>`).
    static func options(of subcommand: String, program: String = "renewal") async throws -> Set<String> {
        let help = try await CLI.run([subcommand, "--help"], program: program)
        #expect(help.status == 0, "\(program) \(subcommand) --help: \(help.stderr)")
        var options: Set<String> = []
        for line in help.stdout.split(separator: "\n") where line.firstMatch(of: /^\s+(?:-\w, )?--[a-z0-9]/) != nil {
            // The names end where the help text starts, after two spaces.
            let names = line.drop { $0 == " " }.split(separator: "  ", maxSplits: 1).first ?? ""
            for match in names.matches(of: /--[a-z0-9][a-z0-9-]*/) { options.insert(String(match.output)) }
        }
        return options
    }

    /// Checks that `arguments` (without the program name) start with a real subcommand and use only its options.
    static func expectValidInvocation(
        _ arguments: [String], in file: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let subcommands = ["demo", "migrate", "import", "run", "backfill", "status", "report", "analytics", "check"]
        guard let subcommand = arguments.first, subcommands.contains(subcommand) else {
            Issue.record(
                "\(file): `renewal \(arguments.joined(separator: " "))` has no subcommand",
                sourceLocation: sourceLocation)
            return
        }
        let known = try await options(of: subcommand)
        for flag in arguments.dropFirst() where flag.hasPrefix("--") {
            #expect(
                known.contains(flag), "\(file): renewal \(subcommand) has no option \(flag)",
                sourceLocation: sourceLocation)
        }
    }

    /// Metric names a real run writes (histograms as their series names).
    static func metricNames(in text: String) -> Set<String> {
        Set(
            text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in
                line.firstMatch(of: /^([a-zA-Z_:][a-zA-Z0-9_:]*)/).map { String($0.1) }
            })
    }
}

/// A scratch copy of the file system the deploy files expect, around an `ObservedRun`: the run's
/// folder stands for `/var/lib/renewal`, with `etc/`, `textfile/`, `log/`, `secrets/` and `credentials/` in it.
struct DeploySandbox {
    let observed: ObservedRun
    var base: String { observed.directory }

    init(_ observed: ObservedRun) throws {
        self.observed = observed
        for folder in ["etc", "textfile", "log", "secrets", "credentials", "reports", "units", "bin"] {
            try FileManager.default.createDirectory(
                atPath: observed.directory + "/" + folder, withIntermediateDirectories: true)
        }
        for folder in ["etc", "secrets", "credentials"] {
            try ObservedRun.secret.write(
                toFile: observed.directory + "/\(folder)/shared-secret", atomically: true, encoding: .utf8)
        }
        try FileManager.default.createSymbolicLink(
            atPath: observed.directory + "/bin/renewal", withDestinationPath: CLI.binary.path)
        // The example environment file, as an operator would install it, plus the simulator's URLs.
        let environment =
            rewrite(try DeployFiles.text("Deploy/systemd/renewal.env.example"))
            + "APPSTORE_VERIFY_RECEIPT_URL=\(observed.environment["APPSTORE_VERIFY_RECEIPT_URL"] ?? "")\n"
            + "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL=\(observed.environment["APPSTORE_SANDBOX_VERIFY_RECEIPT_URL"] ?? "")\n"
        try environment.write(toFile: base + "/etc/renewal.env", atomically: true, encoding: .utf8)
    }

    /// Moves the deploy files' absolute paths into the sandbox.
    func rewrite(_ text: String) -> String {
        let moves: [(String, String)] = [
            ("/usr/local/bin/renewal", CLI.binary.path),
            ("/etc/renewal/", base + "/etc/"),
            ("/var/lib/renewal/", base + "/"),
            ("/var/lib/renewal", base),
            ("/var/lib/prometheus/node-exporter/", base + "/textfile/"),
            ("/var/log/renewal/", base + "/log/"),
            ("/run/secrets/renewal/", base + "/secrets/"),
        ]
        return moves.reduce(text) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
    }

    /// `KEY=value` lines of an environment file.
    static func environmentFile(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    var appleURLs: [String: String] {
        observed.environment.filter { $0.key.hasPrefix("APPSTORE_") && $0.key.hasSuffix("_URL") }
    }
}

/// Runs a program with exactly `environment`, waiting on a GCD thread (the simulator answers on the
/// Swift concurrency threads).
func runProgram(_ path: String, _ arguments: [String], environment: [String: String]) async throws -> CLI.Result {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(
                with: Swift.Result<CLI.Result, any Error> {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: path)
                    process.arguments = arguments
                    process.environment = environment
                    let out = Pipe(), err = Pipe()
                    process.standardOutput = out
                    process.standardError = err
                    process.standardInput = FileHandle.nullDevice
                    try process.run()
                    let stdout = out.fileHandleForReading.readDataToEndOfFile()
                    let stderr = err.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    return CLI.Result(
                        status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                        stderr: String(decoding: stderr, as: UTF8.self))
                })
        }
    }
}

@Suite("Deploy files: they parse, their tools accept them, and every command in them runs as written", .serialized)
struct DeployFilesTests {
    static let units = ["renewal.service", "renewal.timer", "renewal-backfill.service", "renewal-backfill.timer"]

    /// The `[Service]` settings of a unit, each key with all its values in order.
    static func serviceSettings(_ unit: String) -> [String: [String]] {
        var settings: [String: [String]] = [:]
        var section = ""
        for line in unit.split(separator: "\n") where !line.hasPrefix("#") && !line.isEmpty {
            if line.hasPrefix("[") { section = String(line); continue }
            guard section == "[Service]", let equals = line.firstIndex(of: "=") else { continue }
            settings[String(line[..<equals]), default: []].append(String(line[line.index(after: equals)...]))
        }
        return settings
    }

    @Test(
        """
        systemd: systemd-analyze verify accepts the units; each service is oneshot, reads an EnvironmentFile, \
        gets the secret by LoadCredential, maps 3 and 75 to success, and its commands run as written
        """,
        .enabled(if: DeployFiles.systemdAnalyze != nil, "systemd-analyze is not installed (Debian package systemd)"))
    func systemdUnits() async throws {
        let analyze = try #require(DeployFiles.systemdAnalyze)
        try await ObservedRun.with { observed in
            let sandbox = try DeploySandbox(observed)
            let folder = sandbox.base + "/units"
            for name in Self.units {
                try sandbox.rewrite(try DeployFiles.text("Deploy/systemd/" + name)).write(
                    toFile: folder + "/" + name, atomically: true, encoding: .utf8)
            }
            // systemd's own check: unknown keys, bad values, missing executables all print a line.
            let verify = try await runProgram(
                analyze, ["verify", "--man=no"] + Self.units.map { folder + "/" + $0 },
                environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_LOG_LEVEL": "warning"])
            let complaints = (verify.stdout + verify.stderr).split(separator: "\n").filter { $0.contains("renewal") }
            #expect(
                verify.status == 0 && complaints.isEmpty,
                "systemd-analyze verify: \(complaints.joined(separator: "\n"))")

            for name in ["renewal.service", "renewal-backfill.service"] {
                let unit = try DeployFiles.text("Deploy/systemd/" + name)
                let settings = Self.serviceSettings(unit)
                #expect(settings["Type"] == ["oneshot"], "\(name)")
                #expect(settings["EnvironmentFile"] == ["/etc/renewal/renewal.env"], "\(name)")
                #expect(settings["LoadCredential"] == ["shared-secret:/etc/renewal/shared-secret"], "\(name)")
                #expect(
                    settings["Environment", default: []].contains("APPSTORE_SHARED_SECRET_FILE=%d/shared-secret"),
                    "\(name)")
                #expect(!unit.contains("APPSTORE_SHARED_SECRET="), "\(name) puts the secret in the environment")
                let success = Set(
                    (settings["SuccessExitStatus"] ?? []).flatMap { $0.split(separator: " ").map(String.init) })
                #expect(success == ["3", "75"], "\(name): SuccessExitStatus \(success)")
                for hardening in [
                    "NoNewPrivileges", "ProtectSystem", "PrivateTmp", "CapabilityBoundingSet", "SystemCallFilter",
                ] {
                    #expect(settings[hardening] != nil, "\(name) lacks \(hardening)")
                }

                // Run ExecStartPre and ExecStart as systemd would: environment file, Environment=, %d.
                var environment = DeploySandbox.environmentFile(
                    try String(contentsOfFile: sandbox.base + "/etc/renewal.env", encoding: .utf8))
                for assignment in settings["Environment", default: []] {
                    let pair = assignment.replacingOccurrences(of: "%d", with: sandbox.base + "/credentials").split(
                        separator: "=", maxSplits: 1)
                    environment[String(pair[0])] = String(pair[1])
                }
                for key in ["ExecStartPre", "ExecStart"] {
                    for line in settings[key, default: []] {
                        let words = sandbox.rewrite(line).split(separator: " ").map(String.init)
                        #expect(
                            words.first == CLI.binary.path,
                            "\(name) \(key) does not start with /usr/local/bin/renewal: \(line)")
                        let arguments = Array(words.dropFirst())
                        try await DeployFiles.expectValidInvocation(arguments, in: name)
                        let result = try await CLI.run(arguments, environment: environment)
                        #expect(
                            result.status == 0 || success.contains("\(result.status)"),
                            "\(name) \(key) exited \(result.status): \(result.stderr.suffix(1_500))")
                        #expect(!result.stderr.contains(ObservedRun.secret))
                        if key == "ExecStart" {
                            let logs = result.stderr.split(separator: "\n")
                            #expect(
                                !logs.isEmpty && logs.allSatisfy { $0.hasPrefix("{") },
                                "RENEWAL_LOG_FORMAT=json from the unit: \(logs.prefix(2))")
                        }
                    }
                }
            }
            for file in [
                "last-run.json", "last-run.html", "nightly-backfill.json", "textfile/renewal.prom",
                "textfile/renewal-backfill.prom",
            ] {
                #expect(
                    FileManager.default.fileExists(atPath: sandbox.base + "/" + file),
                    "the units' commands did not write \(file)")
            }
            let verified = try SQLiteShell.query(
                observed.database, "SELECT count(*) FROM receipts WHERE status = 'verified'")
            #expect(Int(verified) ?? 0 >= 8, "the unit's run verified \(verified) receipts")
        }
    }

    @Test(
        """
        Kubernetes: the manifests parse; CronJobs forbid overlap, have a starting deadline, take the database URL \
        and secret from a Secret, limit memory from the measured peak; every container command runs
        """,
        .enabled(if: DeployFiles.hasPyYAML, "python3-yaml is not installed (Debian package python3-yaml)"))
    func kubernetesManifests() async throws {
        let files = [
            "secret.example.yaml", "migrate-job.yaml", "cronjob.yaml", "cronjob-parallel.yaml", "backfill-cronjob.yaml",
            "analytics-cronjob.yaml",
        ]
        var documents: [(file: String, object: [String: Any])] = []
        for file in files {
            for object in try DeployFiles.yamlDocuments("Deploy/kubernetes/" + file) {
                documents.append((file, object))
            }
        }
        func kind(_ object: [String: Any]) -> String { object["kind"] as? String ?? "" }
        let configMap = try #require(
            documents.first { kind($0.object) == "ConfigMap" }?.object["data"] as? [String: String])
        let secret = try #require(
            documents.first { kind($0.object) == "Secret" }?.object["stringData"] as? [String: String])
        #expect(Set(secret.keys) == ["shared-secret", "database-url"])

        // Every variable the ConfigMap sets is one renewal reads.
        let runHelp = try await CLI.run(["run", "--help"]).stdout
        for key in configMap.keys {
            #expect(runHelp.contains(key), "the ConfigMap sets \(key), which renewal run --help never mentions")
        }

        var commands: [(file: String, name: String, arguments: [String], environment: [String: String])] = []
        for (file, object) in documents where ["CronJob", "Job"].contains(kind(object)) {
            let name = (object["metadata"] as? [String: Any])?["name"] as? String ?? "?"
            let spec = try #require(object["spec"] as? [String: Any])
            let jobSpec =
                kind(object) == "CronJob"
                ? try #require((spec["jobTemplate"] as? [String: Any])?["spec"] as? [String: Any]) : spec
            let podSpec = try #require((jobSpec["template"] as? [String: Any])?["spec"] as? [String: Any])
            let container = try #require((podSpec["containers"] as? [[String: Any]])?.first)
            let arguments = try #require(container["args"] as? [String], "\(file) \(name): no args")
            let resources = container["resources"] as? [String: [String: Any]]
            #expect(
                resources?["requests"]?["memory"] as? String == "64Mi"
                    && resources?["limits"]?["memory"] as? String == "128Mi",
                "\(file) \(name): memory request 64Mi and limit 128Mi (measured peak 47-51 MiB)")
            #expect(podSpec["restartPolicy"] as? String == "Never")
            let security = container["securityContext"] as? [String: Any]
            #expect(
                security?["readOnlyRootFilesystem"] as? Bool == true
                    && security?["allowPrivilegeEscalation"] as? Bool == false, "\(file) \(name)")

            // The environment: the database URL from the Secret, the shared secret as a mounted file.
            let env = container["env"] as? [[String: Any]] ?? []
            let database = env.first { $0["name"] as? String == "RENEWAL_DATABASE" }
            let reference = (database?["valueFrom"] as? [String: Any])?["secretKeyRef"] as? [String: Any]
            #expect(
                reference?["name"] as? String == "renewal" && reference?["key"] as? String == "database-url",
                "\(file) \(name): RENEWAL_DATABASE from the Secret")
            #expect(
                !env.contains { $0["name"] as? String == "APPSTORE_SHARED_SECRET" },
                "\(file) \(name) puts the secret in a plain variable")

            if kind(object) == "CronJob" {
                #expect(spec["concurrencyPolicy"] as? String == "Forbid", "\(file) \(name)")
                #expect((spec["startingDeadlineSeconds"] as? Int ?? 0) > 0, "\(file) \(name)")
                #expect(jobSpec["backoffLimit"] as? Int == 0, "\(file) \(name): the next schedule is the retry")
                let grace = podSpec["terminationGracePeriodSeconds"] as? Int ?? 30
                let drain = arguments.firstIndex(of: "--drain-seconds").flatMap { Int(arguments[$0 + 1]) } ?? 20
                #expect(grace >= drain + 5, "\(file) \(name): grace \(grace) s leaves no room after a \(drain) s drain")
                // The analytics read the database only; every job that asks Apple mounts its secret.
                let mounted = container["volumeMounts"] as? [[String: Any]] ?? []
                let secretFile =
                    env.first { $0["name"] as? String == "APPSTORE_SHARED_SECRET_FILE" }?["value"] as? String
                #expect(
                    (secretFile == nil && arguments.first == "analytics")
                        || mounted.contains { (secretFile ?? "").hasPrefix(($0["mountPath"] as? String ?? "-") + "/") },
                    "\(file) \(name): \(secretFile ?? "no secret file") is not on a mounted volume")
            }
            if file == "cronjob-parallel.yaml" {
                #expect((jobSpec["parallelism"] as? Int ?? 1) > 1, "the parallel variant runs several workers")
            }

            var environment = configMap.filter { $0.key != "RENEWAL_PUSHGATEWAY_URL" }
            if let gateway = ObservabilityTools.pushgateway { environment["RENEWAL_PUSHGATEWAY_URL"] = gateway }
            for variable in env {
                guard let key = variable["name"] as? String, let value = variable["value"] as? String else { continue }
                environment[key] = value.replacingOccurrences(of: "$(WORKER_INDEX)", with: "0")
            }
            commands.append((file, name, arguments, environment))
        }
        #expect(
            commands.map(\.name).sorted() == [
                "renewal", "renewal", "renewal-analytics", "renewal-migrate", "renewal-nightly-backfill",
            ])

        // Each container's command, with its environment, against a real database and the simulator.
        try await ObservedRun.with { observed in
            let sandbox = try DeploySandbox(observed)
            for command in commands.sorted(by: {
                ($0.name == "renewal-migrate" ? 0 : 1) < ($1.name == "renewal-migrate" ? 0 : 1)
            }) {
                try await DeployFiles.expectValidInvocation(command.arguments, in: command.file)
                var environment = command.environment.mapValues(sandbox.rewrite)
                environment["RENEWAL_DATABASE"] = observed.database
                environment.merge(sandbox.appleURLs) { $1 }
                let result = try await CLI.run(command.arguments, environment: environment)
                #expect(
                    [0, 3].contains(result.status),
                    "\(command.file) \(command.name): exit \(result.status): \(result.stderr.suffix(1_500))")
                #expect(!result.stderr.contains(ObservedRun.secret))
            }
            let verified = try SQLiteShell.query(
                observed.database, "SELECT count(*) FROM receipts WHERE status = 'verified'")
            #expect(Int(verified) ?? 0 >= 8, "the CronJobs' runs verified \(verified) receipts")
        }
    }

    @Test(
        """
        crontab.example is a real crontab: five schedule fields per job, and each line runs through /bin/sh as \
        cron would run it
        """
    )
    func crontab() async throws {
        let text = try DeployFiles.text("crontab.example")
        var header: [String: String] = [:]
        var jobs: [String] = []
        for line in text.split(separator: "\n")
        where !line.hasPrefix("#") && !line.trimmingCharacters(in: .whitespaces).isEmpty {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            if let equals = line.firstIndex(of: "="), fields.count == 1 {
                header[String(line[..<equals])] = String(line[line.index(after: equals)...])
                continue
            }
            try #require(fields.count == 6, "not a crontab job line: \(line)")
            for field in fields.prefix(5) {
                #expect(field.wholeMatch(of: /[0-9*\/,\-]+/) != nil, "schedule field \(field) in: \(line)")
            }
            jobs.append(String(fields[5]))
        }
        #expect(
            jobs.count == 4,
            "every 5 minutes, nightly entitled backfill, weekly expired backfill, nightly analytics daily series")
        #expect(jobs.contains { $0.contains("renewal analytics --refresh-daily") })
        #expect(jobs.contains { $0.contains("renewal run") && $0.contains("--metrics-textfile") })
        #expect(
            jobs.contains {
                $0.contains("renewal backfill") && $0.contains("--state active") && $0.contains("--state grace_period")
            })

        try await ObservedRun.with { observed in
            let sandbox = try DeploySandbox(observed)
            for job in jobs {
                let invocation = try #require(
                    job.firstMatch(of: /exec renewal ([^>]*)/).map { String($0.1) }, "no `exec renewal` in \(job)")
                try await DeployFiles.expectValidInvocation(
                    invocation.split(separator: " ").map(String.init), in: "crontab.example")
                var environment = header.mapValues(sandbox.rewrite)
                environment["PATH"] = sandbox.base + "/bin:/usr/bin:/bin"
                environment["HOME"] = sandbox.base
                let result = try await runProgram(
                    header["SHELL"] ?? "/bin/sh", ["-c", sandbox.rewrite(job)], environment: environment)
                #expect(
                    [0, 3].contains(result.status), "crontab job exited \(result.status): \(job)\n\(result.stderr)")
            }
            let log = try String(contentsOfFile: sandbox.base + "/log/renewal.log", encoding: .utf8)
            // Standard error holds the JSON log lines; standard output's summary lines go to the same file.
            let json = log.split(separator: "\n").filter { $0.hasPrefix("{") }
            let messages = json.compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["message"] as? String
            }
            #expect(messages.count == json.count, "every log line that starts as JSON is a JSON object")
            #expect(messages.filter { $0 == "Run finished" }.count == 3, "three runs logged as JSON: \(messages)")
            #expect(!log.contains(ObservedRun.secret) && !observed.receipts.contains { log.contains($0) })
            for file in [
                "reports/last-run.json", "reports/last-run.html", "reports/nightly-backfill.json",
                "reports/weekly-backfill.json", "textfile/renewal.prom",
            ] {
                #expect(
                    FileManager.default.fileExists(atPath: sandbox.base + "/" + file),
                    "the crontab's commands did not write \(file)")
            }
        }
    }

    @Test(
        """
        Dockerfile: a build stage with the static stdlib, a slim runtime stage with the libraries the binary \
        links, a non-root user, a real entry point
        """
    )
    func dockerfile() async throws {
        let text = try DeployFiles.text("Deploy/Dockerfile")
        // Join continued lines, drop comments.
        let instructions = text.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        let known = ["ARG", "FROM", "RUN", "WORKDIR", "COPY", "USER", "ENV", "ENTRYPOINT", "CMD", "LABEL", "EXPOSE"]
        for instruction in instructions {
            #expect(
                known.contains(String(instruction.prefix { $0 != " " })),
                "not a Dockerfile instruction: \(instruction.prefix(80))")
        }
        let stages = instructions.enumerated().filter { $0.element.hasPrefix("FROM ") }
        try #require(stages.count == 2, "two stages: build and runtime")
        #expect(stages[0].element.hasSuffix(" AS build") && stages[1].element.hasSuffix(" AS runtime"))
        let build = instructions[stages[0].offset..<stages[1].offset]
        let runtime = instructions[stages[1].offset...]
        #expect(build.contains { $0.contains("swift build -c release --static-swift-stdlib --product renewal") })
        for copy in build where copy.hasPrefix("COPY ") {
            let source = copy.split(separator: " ")[1]
            #expect(
                FileManager.default.fileExists(atPath: DeployFiles.root + "/" + source),
                "COPY \(source): no such path in the repository")
        }
        #expect(runtime.contains { $0.hasPrefix("COPY --from=build ") && $0.hasSuffix(" /usr/local/bin/renewal") })
        let user = runtime.first { $0.hasPrefix("USER ") }
        #expect(
            user != nil && !(user ?? "").contains("root") && user != "USER 0", "the runtime runs as a non-root user")
        #expect(runtime.contains(#"ENTRYPOINT ["/usr/local/bin/renewal"]"#))
        let cmd = try #require(runtime.first { $0.hasPrefix("CMD ") })
        let cmdArguments = try #require(
            try JSONSerialization.jsonObject(with: Data(cmd.dropFirst(4).utf8)) as? [String])
        try await DeployFiles.expectValidInvocation(cmdArguments, in: "Dockerfile CMD")

        // The runtime packages cover every C library the binary links, apart from Swift's own libraries
        // (linked statically by --static-swift-stdlib) and what debian:bookworm-slim already has.
        let install = try #require(runtime.first { $0.contains("apt-get install") })
        let afterInstall = try #require(install.components(separatedBy: "apt-get install").last)
        let packages = Set(
            afterInstall.components(separatedBy: "&&")[0].split(separator: " ").map(String.init).filter {
                !$0.hasPrefix("-")
            })
        #expect(packages.isSuperset(of: ["libsqlite3-0", "libpq5", "ca-certificates"]), "\(packages)")
        let inSlimImage: Set<String> = ["libc6", "libgcc-s1", "libstdc++6", "zlib1g"]
        let ldd = try await toolOffPool("/usr/bin/ldd", [CLI.binary.path])
        let resolved = Dictionary(
            ldd.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let match = line.firstMatch(of: /^\s*(\S+) => (\S+)/) else { return nil }
                return (String(match.1), String(match.2))
            }, uniquingKeysWith: { first, _ in first })
        let needed = try await toolOffPool("/usr/bin/readelf", ["-d", CLI.binary.path]).split(separator: "\n")
            .compactMap { line in
                line.firstMatch(of: /\(NEEDED\)\s+Shared library: \[(.+)\]/).map { String($0.1) }
            }
        #expect(needed.contains("libsqlite3.so.0") && needed.contains("libpq.so.5"), "\(needed)")
        for library in needed where !library.hasPrefix("ld-linux") {
            let path = resolved[library] ?? ""
            if path.contains("/lib/swift/") { continue }
            let owners = try await toolOffPool("/usr/bin/dpkg", ["-S", "*/" + library]).split(separator: "\n")
                .compactMap { line -> String? in
                    guard line.hasSuffix("/" + library), !line.contains("-dev"), !line.contains(":i386") else {
                        return nil
                    }
                    return line.split(separator: ":").first.map(String.init)
                }
            #expect(
                !owners.isEmpty && owners.allSatisfy { packages.contains($0) || inSlimImage.contains($0) },
                "\(library) comes from \(owners), which the runtime stage does not install")
        }
    }

    @Test(
        """
        Prometheus: promtool checks and unit-tests the alert rules; every metric the rules and the Grafana \
        dashboard name is one a real run writes
        """,
        .enabled(if: ObservabilityTools.promtool != nil, "promtool is not installed (Debian package prometheus)"))
    func alertRulesAndDashboardMetrics() async throws {
        let promtool = try #require(ObservabilityTools.promtool)
        let rules = DeployFiles.root + "/Deploy/prometheus/alerts.yml"
        let check = try await toolOffPool(promtool, ["check", "rules", rules])
        #expect(check.contains("SUCCESS: 10 rules found"), "\(check)")
        let unitTests = try await toolOffPool(
            promtool, ["test", "rules", DeployFiles.root + "/Deploy/prometheus/alerts.test.yml"])
        #expect(unitTests.contains("SUCCESS"), "\(unitTests)")
        let ruleText = try DeployFiles.text("Deploy/prometheus/alerts.yml")
        for alert in [
            "RenewalJobNotSucceeding", "RenewalAppleOutage", "RenewalHighFailureRate", "RenewalChangeFeedUnhealthy",
            "RenewalRefundRequestMissed", "RenewalUnclaimedPurchaseWaiting",
        ] {
            #expect(ruleText.contains("alert: \(alert)"))
        }

        // The change feed's metrics come from a run with Server API credentials.
        var feedMetrics: Set<String> = []
        try await ServerAPIMigrationTests.withSQLiteAndSimulator { directory, database, _, configuration, endpoints in
            var environment = try ServerAPIMigrationTests.environment(configuration, endpoints, directory: directory)
            environment["RENEWAL_DATABASE"] = database
            // Webhooks to a port nothing listens on: their metrics are written, the run is not held up.
            try ("whsec_" + Data(repeating: 7, count: 24).base64EncodedString()).write(
                toFile: directory + "/webhook-secret", atomically: true, encoding: .utf8)
            environment["RENEWAL_WEBHOOK_SECRET_FILE"] = directory + "/webhook-secret"
            environment["RENEWAL_WEBHOOK_URL"] = "http://127.0.0.1:9/hooks"
            try #require(try await CLI.run(["migrate"], environment: environment).status == 0)
            let textfile = directory + "/renewal.prom"
            let run = try await CLI.run(["run", "--metrics-textfile", textfile], environment: environment)
            #expect(run.status == 0, "\(run.stderr.suffix(1_000))")
            feedMetrics = DeployFiles.metricNames(in: try String(contentsOfFile: textfile, encoding: .utf8))
            #expect(feedMetrics.contains("renewal_feed_healthy"), "\(feedMetrics.sorted())")
            #expect(feedMetrics.contains("renewal_webhook_oldest_undelivered_seconds"), "\(feedMetrics.sorted())")
            #expect(feedMetrics.contains("renewal_unclaimed_purchases_oldest_age_seconds"), "\(feedMetrics.sorted())")
        }
        try await ObservedRun.with { observed in
            let textfile = observed.directory + "/renewal.prom"
            let run = try await CLI.run(["run", "--metrics-textfile", textfile], environment: observed.environment)
            #expect(run.status == 3, "\(run.stderr.suffix(1_000))")
            let verifyReceiptOnly = DeployFiles.metricNames(in: try String(contentsOfFile: textfile, encoding: .utf8))
            #expect(!verifyReceiptOnly.contains("renewal_feed_healthy"), "no feed, no feed health to alert on")
            let written = verifyReceiptOnly.union(feedMetrics)
            let dashboard = try DeployFiles.text("Deploy/grafana/renewal-dashboard.json")
            for (file, text) in [("alerts.yml", ruleText), ("renewal-dashboard.json", dashboard)] {
                let named = Set(text.matches(of: /renewal_[a-z_]+/).map { String($0.0) })
                // A histogram is written as its _bucket, _sum and _count series.
                let missing = named.subtracting(written).filter { !written.contains($0 + "_bucket") }
                #expect(!named.isEmpty && missing.isEmpty, "\(file) names metrics no run writes: \(missing.sorted())")
            }
        }
    }

    /// The dashboard's panels and the SQL of its database panels.
    static func dashboardPanels() throws -> (dashboard: [String: Any], sql: [(title: String, query: String)]) {
        let data = try Data(
            contentsOf: URL(fileURLWithPath: DeployFiles.root + "/Deploy/grafana/renewal-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        var sql: [(String, String)] = []
        for panel in panels {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                if let query = target["rawSql"] as? String { sql.append((panel["title"] as? String ?? "?", query)) }
            }
        }
        return (dashboard, sql)
    }

    @Test(
        """
        Grafana: the dashboard JSON imports (inputs for both data sources, unique ids, a 24-column grid), and \
        every SQL panel runs on SQLite after a real run
        """
    )
    func grafanaDashboardOnSQLite() async throws {
        let (dashboard, sql) = try Self.dashboardPanels()
        let inputs = (dashboard["__inputs"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(Set(inputs) == ["DS_RENEWAL_DB", "DS_PROMETHEUS"])
        let panels = dashboard["panels"] as? [[String: Any]] ?? []
        let ids = panels.compactMap { $0["id"] as? Int }
        #expect(ids.count == panels.count && Set(ids).count == ids.count, "panel ids are unique")
        for panel in panels {
            let grid = panel["gridPos"] as? [String: Int] ?? [:]
            #expect((grid["x"] ?? 99) + (grid["w"] ?? 99) <= 24, "\(panel["title"] ?? "?") leaves the grid")
            if panel["type"] as? String == "row" { continue }
            let uid = (panel["datasource"] as? [String: Any])?["uid"] as? String ?? ""
            #expect(inputs.contains { uid == "${\($0)}" }, "\(panel["title"] ?? "?"): data source \(uid)")
            #expect(!(panel["targets"] as? [Any] ?? []).isEmpty, "\(panel["title"] ?? "?") has no query")
        }
        #expect(sql.count >= 8, "SQL panels over the views: \(sql.count)")

        try await ObservedRun.with { observed in
            let run = try await CLI.run(["run"], environment: try Self.webhookToNowhere(observed))
            #expect(run.status == 3, "\(run.stderr.suffix(1_000))")
            // The Revenue row reads the daily series, which cron keeps with `renewal analytics --refresh-daily`.
            let refresh = try await CLI.run(
                ["analytics", "--refresh-daily"], environment: try Self.webhookToNowhere(observed))
            #expect(refresh.status == 0 && refresh.stdout.contains("analytics_daily: "), "\(refresh.stderr)")
            var rows: [String] = []
            for (title, query) in sql {
                let output = try SQLiteShell.query(observed.database, query)
                let count = output.isEmpty ? 0 : output.split(separator: "\n").count
                rows.append("\(title) \(count)")
                // One first run: its changes are `verified` (a refund seen first is not a `refunded` change), no
                // Apple ID is shared and no purchase is lost (LostPurchaseGapsTests fills the unclaimed panel).
                if !title.contains("conflicts") && !title.contains("Refunds") && !title.contains("Unclaimed") {
                    #expect(count > 0, "\(title): no rows after a run with renewals, billing retry, grace and failures")
                }
            }
            print("figures[grafana sql on sqlite]: \(rows.joined(separator: ", "))")
        }
    }

    /// The run's environment with webhooks to a closed port, so the outbox (and its panel) has rows.
    static func webhookToNowhere(_ observed: ObservedRun) throws -> [String: String] {
        try WebhookTests.environment(observed, url: "http://127.0.0.1:9/hooks", secret: WebhookTests.secret())
    }

    @Test(
        "Grafana: every SQL panel runs on PostgreSQL after a real run",
        .enabled(if: PostgresKillEnvironment.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
    func grafanaDashboardOnPostgres() async throws {
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath, "psql is needed to create the test schema")
        let schema = "renewal_grafana_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        _ = try await PostgresKillTests.sqlOffPool("CREATE SCHEMA \(schema)", url: base, psql: psql)
        defer { _ = try? PostgresKillTests.sql("DROP SCHEMA \(schema) CASCADE", url: base, psql: psql) }
        let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        let (_, sql) = try Self.dashboardPanels()
        try await ObservedRun.with(database: url) { observed in
            let run = try await CLI.run(["run"], environment: try Self.webhookToNowhere(observed))
            #expect(run.status == 3, "\(run.stderr.suffix(1_000))")
            // The Revenue row reads the daily series, which cron keeps with `renewal analytics --refresh-daily`.
            let refresh = try await CLI.run(
                ["analytics", "--refresh-daily"], environment: try Self.webhookToNowhere(observed))
            #expect(refresh.status == 0 && refresh.stdout.contains("analytics_daily: "), "\(refresh.stderr)")
            var rows: [String] = []
            for (title, query) in sql {
                let output = try await PostgresKillTests.sqlOffPool(query, url: url, psql: psql)
                let count = output.isEmpty ? 0 : output.split(separator: "\n").count
                rows.append("\(title) \(count)")
                // One first run: its changes are `verified` (a refund seen first is not a `refunded` change), no
                // Apple ID is shared and no purchase is lost (LostPurchaseGapsTests fills the unclaimed panel).
                if !title.contains("conflicts") && !title.contains("Refunds") && !title.contains("Unclaimed") {
                    #expect(count > 0, "\(title): no rows after a run with renewals, billing retry, grace and failures")
                }
            }
            print("figures[grafana sql on postgresql]: \(rows.joined(separator: ", "))")
        }
    }
}
