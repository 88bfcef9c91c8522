import AppStoreSimulator
import Foundation
import Logging
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Paths of the outside tools these tests drive; `.ci/run` installs them.
enum ObservabilityTools {
    static let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let pushgateway = ProcessInfo.processInfo.environment["RENEWAL_TEST_PUSHGATEWAY_URL"].flatMap {
        $0.isEmpty ? nil : $0
    }

    static func get(_ url: String) async throws -> String {
        let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: url)))
        return String(decoding: data, as: UTF8.self)
    }
}

/// A run with a mix of outcomes against the simulator, for the metrics, log and report tests.
struct ObservedRun {
    static let secret = "observability-secret-7d31"
    static let scenarios: [(String, Scenario)] = [
        ("ana", .renewal), ("ben", .billingRetry), ("cal", .gracePeriod), ("dee", .refund), ("eve", .familyShared),
        ("fay", .sandbox), ("gus", .outage), ("hal", .voluntaryExpiry), ("ivy", .accountNotFound), ("jo", .upgrade),
        ("kit", .trial), ("lee", .html200),
    ]

    let directory: String
    let database: String
    let environment: [String: String]
    let state: SimulatorState
    let receipts: [String]
    var userIDs: [String] { Self.scenarios.map(\.0) }

    /// `database`: a SQLite file (default: `renewal.sqlite` in the run's folder) or a postgres:// URL.
    static func with(database: String? = nil, _ body: (ObservedRun) async throws -> Void) async throws {
        try await CLI.withDirectoryAndSimulator(secret: secret) { directory, state, _, endpoints in
            let database = database ?? directory + "/renewal.sqlite"
            let environment = [
                "APPSTORE_SHARED_SECRET": secret, "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL, "RENEWAL_DATABASE": database,
            ]
            let start = state.now.addingTimeInterval(-50 * 86_400)
            let receipts = scenarios.map { SimulatedReceipt(account: $0.0, scenario: $0.1, start: start) }
            let lines = zip(scenarios, receipts).map {
                #"{"user_id": "\#($0.0.0)", "latest_receipt": "\#($0.1.encoded)"}"#
            }
            try #require(try await CLI.run(["migrate"], environment: environment).status == 0)
            let imported = try await CLI.run(
                ["import", "-"], environment: environment, stdin: lines.joined(separator: "\n"))
            try #require(imported.status == 0, "\(imported.stderr)")
            try await body(
                ObservedRun(
                    directory: directory, database: database, environment: environment, state: state,
                    receipts: receipts.map(\.encoded)))
        }
    }
}

@Suite("Metrics, JSON logs and progress of a real run", .serialized)
struct MetricsAndLogsTests {
    static let metricNames = [
        "renewal_run_duration_seconds", "renewal_last_run_timestamp_seconds", "renewal_last_success_timestamp_seconds",
        "renewal_last_run_exit_code", "renewal_last_run_status", "renewal_receipts_checked_total",
        "renewal_changes_total",
        "renewal_failures_total", "renewal_apple_responses_total", "renewal_apple_request_duration_seconds_bucket",
        "renewal_apple_retries_total", "renewal_breaker_trips_total", "renewal_due_receipts", "renewal_conflicts_total",
        "renewal_lease_lost_total",
    ]

    @Test(
        """
        --metrics-textfile passes promtool, --pushgateway shows the run during and after it, JSON logs are one \
        object per line, and no id, receipt or secret is in any of them
        """,
        .enabled(if: ObservabilityTools.pushgateway != nil, "RENEWAL_TEST_PUSHGATEWAY_URL is not set"),
        .enabled(if: ObservabilityTools.promtool != nil, "promtool is not installed (Debian package prometheus)"))
    func metricsTextfilePushgatewayAndJSONLogs() async throws {
        let gateway = try #require(ObservabilityTools.pushgateway)
        let promtool = try #require(ObservabilityTools.promtool)
        try await ObservedRun.with { observed in
            observed.state.latency = .milliseconds(250)
            let instance = "renewal-test-" + UUID().uuidString.prefix(8).lowercased()
            let textfile = observed.directory + "/renewal.prom"
            let child = try FaultProcess(
                [
                    "run", "--concurrency", "1", "--metrics-textfile", textfile, "--pushgateway", gateway,
                    "--push-interval", "1",
                    "--log-format", "json", "--log-level", "debug",
                ],
                environment: observed.environment.merging(["RENEWAL_METRICS_INSTANCE": instance]) { $1 },
                directory: observed.directory)
            var pushedDuringRun = false
            let deadline = Date().addingTimeInterval(30)
            while child.isRunning, Date() < deadline, !pushedDuringRun {
                let metrics = (try? await ObservabilityTools.get(gateway + "/metrics")) ?? ""
                pushedDuringRun =
                    metrics.split(separator: "\n").contains {
                        $0.hasPrefix("renewal_receipts_checked_total{") && $0.contains("job=\"renewal\"")
                    } && child.isRunning
                try await Task.sleep(for: .milliseconds(200))
            }
            let run = await child.finish()
            #expect(
                run.status == 3,
                "outages and HTML answers leave receipts unverified: exit \(run.status): \(run.stderr.suffix(2_000))")
            #expect(pushedDuringRun, "the Pushgateway had no renewal metrics while the run was going")

            // The textfile: promtool's lint passes, every promised family is there.
            let text = try String(contentsOfFile: textfile, encoding: .utf8)
            let lint = try? await toolOffPool(promtool, ["check", "metrics"], stdin: text)
            #expect(lint != nil, "promtool check metrics failed on:\n\(text)")
            for name in Self.metricNames {
                #expect(text.contains("\n\(name){") || text.hasPrefix("\(name){"), "no \(name) in the textfile")
            }
            #expect(text.contains(#"renewal_last_run_exit_code{command="run"} 3"#))
            #expect(text.contains(#"renewal_last_run_status{command="run",status="completed_with_failures"} 1"#))
            #expect(text.contains(#"renewal_failures_total{command="run",reason="http_503"}"#))
            #expect(text.contains(#"renewal_apple_responses_total{command="run",status="0",environment="Production"}"#))
            Self.expectNoIdentifiers(in: text, observed: observed, what: "the textfile")

            // The Pushgateway has the final push, grouped by job and the instance RENEWAL_METRICS_INSTANCE names.
            let pushed = try await ObservabilityTools.get(gateway + "/metrics")
            let exitLine = pushed.split(separator: "\n").first {
                $0.hasPrefix("renewal_last_run_exit_code{") && $0.contains("instance=\"\(instance)\"")
            }
            #expect(
                exitLine?.contains(#"job="renewal""#) == true && exitLine?.hasSuffix(" 3") == true,
                "pushed: \(exitLine.map(String.init) ?? "nothing")")
            Self.expectNoIdentifiers(
                in: pushed.split(separator: "\n").filter { $0.hasPrefix("renewal_") }.joined(separator: "\n"),
                observed: observed, what: "the Pushgateway")

            // JSON logs: one object per line with timestamp, level and message; start and summary lines.
            var messages: [String] = []
            for line in run.stderr.split(separator: "\n") where !line.isEmpty {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object != nil, "not a JSON object: \(line.prefix(300))")
                guard let object else { continue }
                #expect(
                    object["timestamp"] is String && object["level"] is String && object["message"] is String,
                    "\(line.prefix(300))")
                messages.append(object["message"] as? String ?? "")
            }
            #expect(messages.contains("Configuration") && messages.contains("Run finished"), "\(messages)")
            #expect(messages.contains("Verified receipt"), "per-receipt lines at debug: \(messages)")
            for secret in [ObservedRun.secret] + observed.receipts {
                #expect(
                    !run.stderr.contains(secret) && !run.stdout.contains(secret),
                    "a secret or whole receipt reached the output")
            }
        }
    }

    /// No label value is a user id, a transaction id or a receipt; no secret anywhere.
    static func expectNoIdentifiers(
        in text: String, observed: ObservedRun, what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        var values: Set<String> = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let open = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}") else { continue }
            for pair in line[line.index(after: open)..<close].split(separator: ",") {
                if let equals = pair.firstIndex(of: "=") {
                    values.insert(
                        String(pair[pair.index(after: equals)...]).trimmingCharacters(
                            in: CharacterSet(charactersIn: "\"")))
                }
            }
        }
        let forbidden = Set(observed.userIDs + observed.receipts + [ObservedRun.secret])
        #expect(
            values.isDisjoint(with: forbidden), "\(what) carries \(values.intersection(forbidden))",
            sourceLocation: sourceLocation)
        #expect(
            !values.contains { $0.count >= 12 && $0.allSatisfy(\.isNumber) },
            "\(what) carries what looks like a transaction id: \(values.sorted())", sourceLocation: sourceLocation)
        #expect(!text.contains(ObservedRun.secret), "\(what) holds the shared secret", sourceLocation: sourceLocation)
    }

    @Test("Text logs stay text; a bad --log-format or --pushgateway is a usage error naming the fix")
    func logFormatFlags() async throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let env = ["RENEWAL_DATABASE": dir + "/r.sqlite"]
        let migrated = try await CLI.run(["migrate"], environment: env)
        #expect(migrated.status == 0)
        #expect(!migrated.stderr.hasPrefix("{"), "text is the default: \(migrated.stderr)")
        let json = try await CLI.run(["migrate"], environment: env.merging(["RENEWAL_LOG_FORMAT": "json"]) { $1 })
        #expect(
            json.stderr.split(separator: "\n").allSatisfy { $0.hasPrefix("{") },
            "RENEWAL_LOG_FORMAT=json: \(json.stderr)")
        let bad = try await CLI.run(["run", "--log-format", "yaml"], environment: env)
        #expect(bad.status == 64 && bad.stderr.contains("--log-format must be text or json"), "\(bad.stderr)")
        let gateway = try await CLI.run(["run", "--pushgateway", "pushgateway:9091"], environment: env)
        #expect(gateway.status == 64 && gateway.stderr.contains("http(s) URL"), "\(gateway.stderr)")
        let instance = try await CLI.run(
            ["run", "--pushgateway", "http://127.0.0.1:9", "--metrics-instance", "a/b"], environment: env)
        #expect(instance.status == 64 && instance.stderr.contains("without '/'"), "\(instance.stderr)")
    }
}
