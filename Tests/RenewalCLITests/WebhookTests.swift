import Foundation
import RenewalCore
import Testing

/// `renewal run` queueing each change in the webhook outbox and `renewal deliver` sending it, signed,
/// to a real receiver on loopback that checks every signature.
@Suite("Webhooks: the outbox, signed deliveries, retries, 410 and a slow endpoint")
struct WebhookTests {
    static func secret() -> String {
        "whsec_" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }

    /// The observed run's environment with a webhook URL and a secret file.
    static func environment(_ observed: ObservedRun, url: String, secret: String) throws -> [String: String] {
        let path = observed.directory + "/webhook-secret"
        try secret.write(toFile: path, atomically: true, encoding: .utf8)
        var environment = observed.environment
        environment["RENEWAL_WEBHOOK_URL"] = url
        environment["RENEWAL_WEBHOOK_SECRET_FILE"] = path
        return environment
    }

    static func changeNumber(_ id: String) -> Int {
        Int(id.split(separator: "_").dropFirst().first ?? "") ?? -1
    }

    @Test(
        """
        Every change of a run arrives once the receiver recovers, signed, with the same webhook-id as the failed \
        attempt, each user's in order, and no receipt in any body
        """)
    func everyChangeArrivesSigned() async throws {
        try await ObservedRun.with { observed in
            let secret = Self.secret()
            let receiver = WebhookReceiver(secret: secret)
            try await receiver.serve { url in
                let environment = try Self.environment(observed, url: url, secret: secret)
                let report = observed.directory + "/report.json"
                // The endpoint fails: the run tries every user's first change once, keeps it, and ends as
                // it would without webhooks.
                receiver.mode = .fail
                let run = try await CLI.run(["run", "--report", report], environment: environment)
                #expect(run.status == 3, "\(run.stderr.suffix(1_000))")
                let written = try ServerAPIMigrationTests.json(report)
                let changes = try #require(written["changes"] as? [[String: Any]])
                #expect(changes.count > 5)
                let counts = try #require(written["counts"] as? [String: Any])
                let failedIDs = Set(receiver.received.map(\.id))
                #expect(counts["delivered"] as? Int == 0, "\(counts)")
                #expect(counts["delivery_failed"] as? Int == receiver.received.count && !failedIDs.isEmpty, "\(counts)")
                #expect(counts["oldest_undelivered_seconds"] is Double || counts["oldest_undelivered_seconds"] is Int)
                #expect(
                    !failedIDs.isEmpty && failedIDs.count <= Set(changes.compactMap { $0["user_id"] as? String }).count)

                // It recovers; past the backoff, everything arrives. deliver writes its own metrics.
                receiver.mode = .ok
                let later = Timestamp.string(Date().addingTimeInterval(6 * 3600))
                let textfile = observed.directory + "/deliver.prom"
                let instance = "renewal-deliver-test-" + UUID().uuidString.prefix(8).lowercased()
                var metricsFlags = ["--metrics-textfile", textfile]
                if let gateway = ObservabilityTools.pushgateway {
                    metricsFlags += ["--pushgateway", gateway, "--metrics-instance", instance]
                }
                let delivered = try await CLI.run(["deliver", "--now", later] + metricsFlags, environment: environment)
                #expect(delivered.status == 0, "\(delivered.stdout)\(delivered.stderr)")
                let arrived = receiver.received.filter { $0.answered == 204 }
                #expect(arrived.count == changes.count, "\(arrived.count) of \(changes.count)")
                try await Self.expectDeliverMetrics(
                    textfile: textfile, instance: instance, delivered: arrived.count, observed: observed)
                #expect(arrived.allSatisfy { $0.signatureValid })
                #expect(Set(arrived.map(\.id)).count == arrived.count, "each change once")
                #expect(failedIDs.isSubset(of: Set(arrived.map(\.id))), "a redelivery carries the same webhook-id")
                var lastByUser: [String: Int] = [:]
                for event in arrived {
                    let body = event.body
                    #expect(body["type"] as? String == "entitlement.changed")
                    let data = try #require(body["data"] as? [String: Any])
                    let user = try #require(data["user_id"] as? String)
                    #expect(data["kind"] is String && data["run_id"] is String && data["occurred_at"] is String)
                    let number = Self.changeNumber(event.id)
                    #expect(number > lastByUser[user] ?? -1, "\(user)'s changes out of order")
                    lastByUser[user] = number
                    let raw = String(decoding: event.raw, as: UTF8.self)
                    #expect(!observed.receipts.contains { raw.contains($0.prefix(40)) }, "a receipt in a webhook")
                    #expect(!raw.contains(String(secret.dropFirst(6).prefix(12))))
                }
                // A body changed in transit fails the receiver's check.
                let sample = try #require(arrived.first)
                var tampered = sample.raw
                tampered.append(contentsOf: Array(" ".utf8))
                #expect(
                    !receiver.verify(id: sample.id, timestamp: sample.timestamp, body: tampered, signatures: "v1,x"))
                let forged = receiver.verify(
                    id: sample.id, timestamp: String((Int(sample.timestamp) ?? 0) + 1), body: sample.raw,
                    signatures: "v1,\(Data(count: 32).base64EncodedString())")
                #expect(!forged)

                let status = try await CLI.run(["deliver", "--status", "--json"], environment: environment)
                let object = try #require(
                    try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
                #expect(object["pending"] as? Int == 0 && object["delivered"] as? Int == changes.count, "\(object)")
                // Nothing left: a second deliver sends nothing.
                let again = try await CLI.run(["deliver", "--now", later], environment: environment)
                #expect(again.status == 0 && receiver.received.count == failedIDs.count + changes.count)
            }
        }
    }

    /// deliver's textfile passes promtool and counts what it delivered under `command="deliver"`, with
    /// none of the receipt-checking families; on the Pushgateway it is a group of its own.
    static func expectDeliverMetrics(textfile: String, instance: String, delivered: Int, observed: ObservedRun)
        async throws
    {
        let text = try String(contentsOfFile: textfile, encoding: .utf8)
        #expect(text.contains(#"renewal_webhook_deliveries_total{command="deliver",result="delivered"} \#(delivered)"#))
        #expect(text.contains(#"renewal_webhook_deliveries_total{command="deliver",result="retried"} 0"#))
        #expect(text.contains(#"renewal_webhook_oldest_undelivered_seconds{command="deliver"} 0"#))
        #expect(text.contains(#"renewal_last_run_exit_code{command="deliver"} 0"#))
        #expect(!text.contains("renewal_receipts_checked_total"), "deliver checks no receipt:\n\(text)")
        MetricsAndLogsTests.expectNoIdentifiers(in: text, observed: observed, what: "deliver's textfile")
        if let promtool = ObservabilityTools.promtool {
            let lint = try? await toolOffPool(promtool, ["check", "metrics"], stdin: text)
            #expect(lint != nil, "promtool check metrics failed on:\n\(text)")
        }
        guard let gateway = ObservabilityTools.pushgateway else { return }
        let pushed = try await ObservabilityTools.get(gateway + "/metrics")
        let line = pushed.split(separator: "\n").first {
            $0.hasPrefix("renewal_webhook_deliveries_total{") && $0.contains(#"instance="\#(instance)""#)
                && $0.contains(#"result="delivered""#)
        }
        #expect(
            line?.contains(#"command="deliver""#) == true && line?.hasSuffix(" \(delivered)") == true,
            "\(line ?? "none")")
        // Its own group: job, instance and command=deliver.
        #expect(pushed.contains(#"push_time_seconds{command="deliver",instance="\#(instance)",job="renewal"}"#))
    }

    @Test("410 Gone stops delivery to the URL (exit 78, listed by --status); a slow endpoint trips the breaker")
    func goneAndSlow() async throws {
        try await ObservedRun.with { observed in
            let secret = Self.secret()
            let receiver = WebhookReceiver(secret: secret)
            try await receiver.serve { url in
                let environment = try Self.environment(observed, url: url, secret: secret)
                // Hanging: the run spends its webhook budget (2 s), not a request timeout on top. (With 1 s,
                // a run starved of CPU by parallel tests once spent it before its first request arrived.)
                receiver.mode = .hang
                let run = try await CLI.run(["run", "--webhook-seconds", "2"], environment: environment)
                let runEnded = ContinuousClock.now
                let firstAttempt = try #require(receiver.received.first?.arrived)
                // From its first webhook request to its exit: the 2 s budget and the report, not the 10 s
                // request timeout (nor the receiver's 12 s hang).
                #expect(run.status == 3 && runEnded - firstAttempt < .seconds(6), "\(runEnded - firstAttempt)")

                // deliver: one batch times out after a second each, and the breaker stops the rest.
                let later0 = Timestamp.string(Date().addingTimeInterval(3600))
                let started = ContinuousClock.now
                let slow = try await CLI.run(["deliver", "--timeout", "1", "--now", later0], environment: environment)
                let took = ContinuousClock.now - started
                #expect(slow.status == 3, "\(slow.stdout)\(slow.stderr)")
                #expect(took < .seconds(15), "\(took)")

                receiver.mode = .gone
                let later = Timestamp.string(Date().addingTimeInterval(12 * 3600))
                let gone = try await CLI.run(["deliver", "--now", later], environment: environment)
                #expect(gone.status == 78 && gone.stderr.contains("410 Gone"), "\(gone.stdout)\(gone.stderr)")
                let sent = receiver.received.count
                let again = try await CLI.run(["deliver", "--now", later], environment: environment)
                #expect(again.status == 78 && receiver.received.count == sent, "nothing more is sent")
                let status = try await CLI.run(["deliver", "--status"], environment: environment)
                // The changes wait for a new URL; none is given up.
                #expect(status.stdout.contains("410 Gone") && status.stdout.contains("failed 0"), "\(status.stdout)")
                #expect(!status.stdout.contains("pending 0"), "\(status.stdout)")
            }
        }
    }

    @Test(
        """
        check sends a signed webhook.test event the receiver verifies; a receiver that refuses it, or redirects it, \
        is exit 78
        """)
    func checkSendsATestEvent() async throws {
        try await ObservedRun.with { observed in
            let secret = Self.secret()
            let receiver = WebhookReceiver(secret: secret)
            try await receiver.serve { url in
                let environment = try Self.environment(observed, url: url, secret: secret)
                let check = try await CLI.run(["check"], environment: environment)
                #expect(check.stdout.contains("webhook: ok"), "\(check.stdout)\(check.stderr)")
                let event = try #require(receiver.received.last)
                #expect(event.signatureValid && event.body["type"] as? String == "webhook.test")
                // A receiver holding another secret answers 401: check says so.
                let wrong = try Self.environment(observed, url: url, secret: Self.secret())
                let refused = try await CLI.run(["check"], environment: wrong)
                #expect(refused.status == 78 && refused.stderr.contains("HTTP 401"), "\(refused.stderr)")
                // A redirect is not followed: the event does not reach where it points.
                receiver.mode = .redirect
                let redirected = try await CLI.run(["check"], environment: environment)
                #expect(redirected.status == 78 && redirected.stderr.contains("HTTP 307"), "\(redirected.stderr)")
                #expect(receiver.redirected == 0, "the redirect was followed")
            }
        }
    }

    @Test(
        """
        An https endpoint whose certificate the system does not trust gets no request: check exits 78 naming TLS, \
        deliver keeps the changes
        """)
    func untrustedCertificate() async throws {
        try await ObservedRun.with { observed in
            let server = try UntrustedTLSServer(directory: observed.directory)
            defer { server.stop() }
            let environment = try Self.environment(
                observed, url: "https://127.0.0.1:\(server.port)/hooks", secret: Self.secret())
            let check = try await CLI.run(["check"], environment: environment)
            #expect(check.status == 78 && check.stderr.contains("TLS"), "\(check.stdout)\(check.stderr)")
            #expect(!check.stderr.contains("127.0.0.1:\(server.port)"), "the URL stays out of the reason")
            print("untrusted certificate: \(check.stderr.split(separator: "\n").last ?? "")")
            let run = try await CLI.run(["run", "--webhook-seconds", "2"], environment: environment)
            #expect(run.status == 3, "\(run.stderr.suffix(1_000))")
            let status = try await CLI.run(["deliver", "--status", "--json"], environment: environment)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
            #expect((object["pending"] as? Int ?? 0) > 0 && object["delivered"] as? Int == 0, "\(object)")
            #expect(server.requests == 0, "a request passed an untrusted certificate")
        }
    }

    @Test("A webhook URL without a usable secret is a configuration error naming the variable, never the secret")
    func secretProblems() async throws {
        try await ObservedRun.with { observed in
            var environment = observed.environment
            environment["RENEWAL_WEBHOOK_URL"] = "http://127.0.0.1:9/hooks"
            let missing = try await CLI.run(["run"], environment: environment)
            #expect(missing.status == 78 && missing.stderr.contains("RENEWAL_WEBHOOK_SECRET_FILE"), "\(missing.stderr)")
            let path = observed.directory + "/bad-secret"
            try "not-a-whsec-secret-value".write(toFile: path, atomically: true, encoding: .utf8)
            environment["RENEWAL_WEBHOOK_SECRET_FILE"] = path
            let bad = try await CLI.run(["deliver"], environment: environment)
            #expect(bad.status == 78 && bad.stderr.contains("whsec_"), "\(bad.stderr)")
            #expect(!bad.stderr.contains("not-a-whsec-secret-value") && !bad.stdout.contains("not-a-whsec"))
        }
    }

    @Test(
        "Three deliver processes on PostgreSQL deliver each change exactly once, each user's in order",
        .enabled(
            if: PostgresKillEnvironment.baseURL != nil && PostgresKillTests.psqlPath != nil,
            "RENEWAL_TEST_POSTGRES_URL is not set, or psql is missing"))
    func threeWorkersDeliverOnce() async throws {
        let base = try #require(PostgresKillEnvironment.baseURL)
        let psql = try #require(PostgresKillTests.psqlPath)
        let target = try KillLoopTests.Target.postgres(base: base, psql: psql)
        defer { target.drop() }
        try await ObservedRun.with(database: target.database) { observed in
            let secret = Self.secret()
            let receiver = WebhookReceiver(secret: secret)
            try await receiver.serve { url in
                let environment = try Self.environment(observed, url: url, secret: secret)
                // The run queues and leaves every delivery to the workers.
                _ = try await CLI.run(["run", "--webhook-seconds", "0"], environment: environment)
                let queued = try await target.count("SELECT COUNT(*) FROM webhook_outbox")
                #expect(queued > 5 && receiver.received.isEmpty)
                receiver.mode = .slow
                let results = try await withThrowingTaskGroup(of: CLI.Result.self) { group in
                    for _ in 0..<3 {
                        group.addTask {
                            try await CLI.run(["deliver", "--concurrency", "2"], environment: environment)
                        }
                    }
                    return try await group.reduce(into: [CLI.Result]()) { $0.append($1) }
                }
                #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stdout))")
                let ids = receiver.received.map(\.id)
                #expect(ids.count == queued && Set(ids).count == queued, "\(ids.count) sent for \(queued) changes")
                print("three deliver workers: \(results.map { $0.stdout.prefix(14) })")
            }
        }
    }
}

/// An HTTPS server (Python's ssl module) with a self-signed certificate made by `openssl` for
/// 127.0.0.1: a client that verifies TLS must refuse it before sending anything. It counts the
/// requests that reach it.
final class UntrustedTLSServer: Sendable {
    let process: Process
    let port: Int
    let log: String

    init(directory: String) throws {
        let key = directory + "/tls-key.pem"
        let certificate = directory + "/tls-cert.pem"
        log = directory + "/tls-requests"
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0, "openssl could not make a certificate")
        let script = """
            import http.server, ssl, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_POST(self):
                    self.rfile.read(int(self.headers.get("Content-Length", 0)))
                    with open(sys.argv[3], "a") as f: f.write("request\\n")
                    self.send_response(204); self.end_headers()
                def log_message(self, *args): pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1], sys.argv[2])
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """
        let output = Pipe()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, certificate, key, log]
        process.standardOutput = output
        try process.run()
        let line = output.fileHandleForReading.availableData
        port = try #require(Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    var requests: Int {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// SIGKILL: the test process's threads block SIGTERM, and a spawned child inherits that mask.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
