import AppStoreSimulator
import Foundation
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Fault injection on Apple's side: the real binary against an Apple that is down in five ways.
/// Each time the circuit breaker trips (exit 4), not one subscription changes, failures are
/// recorded, and the number of Apple requests stays within the documented bound
/// (breaker threshold + concurrency − 1) × max attempts.
@Suite("Apple down: the breaker trips, nothing changes, the calls are bounded")
struct AppleDownTests {
    static let secret = "apple-down-secret-3f9a"

    enum Outage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case html503 = "every answer a 503 HTML page"
        case html200 = "HTTP 200 with an HTML page"
        case timeout = "answers slower than --timeout"
        case reset = "connections reset on accept"
        case neverAnswers = "a server that accepts and never answers"
        var testDescription: String { rawValue }

        /// The job's `--timeout`: short where the outage is a silence the timeout must end, generous
        /// where Apple answers at once, so a loaded test machine cannot turn a request that has not
        /// reached the simulator yet into a timeout the simulator never counted.
        var timeout: String {
            switch self {
            case .timeout: "2"
            case .neverAnswers: "0.5"
            case .html503, .html200, .reset: "20"
            }
        }
    }

    static let threshold = 3
    static let concurrency = 2
    static let attempts = 2
    static var callBound: Int { (threshold + concurrency - 1) * attempts }

    @Test(
        """
        Apple down → exit 4, no subscription changed, failures recorded, calls ≤ (threshold + concurrency − 1) × \
        attempts
        """,
        arguments: Outage.allCases)
    func appleDown(_ outage: Outage) async throws {
        try await CLI.withDirectoryAndSimulator(secret: Self.secret) { directory, state, _, endpoints in
            var env = [
                "APPSTORE_SHARED_SECRET": Self.secret, "RENEWAL_DATABASE": directory + "/r.sqlite",
                "APPSTORE_VERIFY_RECEIPT_URL": endpoints.productionURL,
                "APPSTORE_SANDBOX_VERIFY_RECEIPT_URL": endpoints.sandboxURL,
            ]
            // Given twelve receipts verified while Apple was fine
            #expect(try await CLI.run(["migrate"], environment: env).status == 0)
            let lines = (0..<12).map { index in
                let receipt = SimulatedReceipt(
                    account: "down-\(index)", scenario: .renewal, start: state.now.addingTimeInterval(-86_400))
                return #"{"user_id": "u\#(index)", "latest_receipt": "\#(receipt.encoded)"}"#
            }
            #expect(
                try await CLI.run(["import", "-"], environment: env, stdin: lines.joined(separator: "\n") + "\n").status
                    == 0)
            #expect(try await CLI.run(["run"], environment: env).status == 0)
            let before = try await CLI.run(["status", "--json"], environment: env).stdout

            // When Apple goes down and a backfill re-checks all of them
            let server = try Self.breakApple(outage, state: state, env: &env)
            defer { server?.stop() }
            let requestsBefore = state.stats.requests
            let started = ContinuousClock.now
            let down = try await CLI.run(
                [
                    "backfill", "--all", "--timeout", outage.timeout, "--max-attempts", "\(Self.attempts)",
                    "--breaker-threshold", "\(Self.threshold)", "--concurrency", "\(Self.concurrency)",
                    "--report", directory + "/down.json",
                ], environment: env)
            // Requests that reached the broken Apple: for a resetting server, connections that carried
            // request bytes; for one that never answers, every connection (each held a request).
            let raw = outage == .reset ? server?.requests : server?.connections
            let calls = (raw ?? 0) + state.stats.requests - requestsBefore
            print(
                """
                apple-down figures: \(outage.rawValue): exit \(down.status), \(calls) Apple calls (bound \
                \(Self.callBound)), \(ContinuousClock.now - started)
                """
            )

            // Then the breaker trips, nothing changes, failures are recorded, and the calls are bounded
            #expect(down.status == 4, "\(down.stdout)\n\(down.stderr)")
            #expect(try await CLI.run(["status", "--json"], environment: env).stdout == before)
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/down.json")))
                    as? [String: Any])
            #expect(report["status"] as? String == "aborted_apple_unavailable")
            #expect((report["changes"] as? [Any])?.isEmpty == true)
            #expect(((report["failures"] as? [Any])?.count ?? 0) >= Self.threshold)
            #expect(
                calls >= Self.threshold && calls <= Self.callBound,
                "\(calls) calls (\(server?.connections ?? 0) connections)")
            #expect(!(down.stdout + down.stderr).contains(Self.secret))
        }
    }

    /// Points the production URL at a broken Apple; returns the raw server when one is used.
    static func breakApple(_ outage: Outage, state: SimulatorState, env: inout [String: String]) throws -> RawServer? {
        switch outage {
        case .html503:
            state.fault = .outage
        case .html200:
            state.fault = .html200
        case .timeout:
            state.latency = .seconds(6)
        case .reset, .neverAnswers:
            let server = try RawServer(resetting: outage == .reset)
            env["APPSTORE_VERIFY_RECEIPT_URL"] = "http://127.0.0.1:\(server.port)/verifyReceipt"
            return server
        }
        return nil
    }
}

/// A TCP server on loopback that resets every connection once the request's first bytes arrive (or
/// at once, when none come within a second), or accepts and never answers. Counts the connections
/// it accepted, and the requests: connections that carried request bytes. A connection the client
/// opens but never sends on (AsyncHTTPClient replaces one that died before its request went out) is
/// not a request to Apple.
final class RawServer: Sendable {
    let port: Int
    private let socket: Int32
    private let box = Box()

    private final class Box: Sendable {
        let value = Mutex<(accepted: Int, requests: Int, held: [Int32], stopped: Bool)>((0, 0, [], false))
    }

    var connections: Int { box.value.withLock { $0.accepted } }
    var requests: Int { box.value.withLock { $0.requests } }

    init(resetting: Bool) throws {
        let listener = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 64) == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        socket = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let box = self.box
        Thread.detachNewThread {
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                let stopped = box.value.withLock { value -> Bool in
                    value.accepted += 1
                    if !resetting { value.held.append(connection) }
                    return value.stopped
                }
                if stopped { close(connection); return }
                if resetting {
                    Thread.detachNewThread {
                        var descriptor = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
                        var byte: UInt8 = 0
                        if poll(&descriptor, 1, 1_000) == 1, recv(connection, &byte, 1, Int32(MSG_PEEK)) == 1 {
                            box.value.withLock { $0.requests += 1 }
                        }
                        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                        _ = setsockopt(
                            connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                        close(connection)
                    }
                }
            }
        }
    }

    func stop() {
        let held = box.value.withLock { value -> [Int32] in
            value.stopped = true
            return value.held
        }
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
        held.forEach { close($0) }
    }
}
