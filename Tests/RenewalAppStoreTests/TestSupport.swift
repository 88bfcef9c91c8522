import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
@testable import RenewalAppStore
@testable import RenewalAppleAPI
import RenewalCore

/// Shared set-up: a simulator on a free loopback port and a client with tiny retry delays.
enum TestSupport {
    /// A fixed simulator clock start: 2023-11-14T22:13:20Z.
    static let now = Date(timeIntervalSince1970: 1_700_000_000)
    static let day: TimeInterval = 86_400
    static let period: TimeInterval = 30 * day
    static let secret = "0123456789abcdef-test-shared-secret"
    static let quiet = Logger(label: "renewal.tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A receipt that started 10 days before the fixed clock.
    static func receipt(_ scenario: Scenario, account: String? = nil) -> SimulatedReceipt {
        SimulatedReceipt(
            account: account ?? "acct-\(scenario.rawValue)", scenario: scenario,
            start: now.addingTimeInterval(-10 * day), period: period)
    }

    /// The client configuration the tests start from: simulator URLs, 1 ms backoff.
    static func clientConfiguration(_ endpoints: SimulatorEndpoints, secret: String? = TestSupport.secret)
        -> AppStoreClient.Configuration
    {
        AppStoreClient.Configuration(
            productionURL: endpoints.productionURL, sandboxURL: endpoints.sandboxURL, sharedSecret: secret,
            requestTimeout: .seconds(30), maxAttempts: 4,
            retryBaseDelay: .milliseconds(1), retryMaxDelay: .milliseconds(2))
    }

    /// Runs `body` with a simulator (its own state, fixed clock) and a client pointed at it.
    static func withSimulatorAndClient<T>(
        simulatorSecret: String? = TestSupport.secret,
        slowDelay: Duration = .seconds(10),
        adjust: (inout AppStoreClient.Configuration) -> Void = { _ in },
        _ body: (SimulatorState, SimulatorEndpoints, AppStoreClient) async throws -> T
    ) async throws -> T {
        let state = SimulatorState(now: now)
        let configuration = SimulatorConfiguration(sharedSecret: simulatorSecret, slowDelay: slowDelay, state: state)
        return try await withAppStoreSimulator(configuration: configuration, logger: quiet) { endpoints in
            var clientConfiguration = clientConfiguration(endpoints)
            adjust(&clientConfiguration)
            return try await AppStoreClient.withAppStoreClient(configuration: clientConfiguration) { client in
                try await body(state, endpoints, client)
            }
        }
    }

    /// Calls a control route and returns the decoded JSON object and the HTTP status.
    static func control(
        _ endpoints: SimulatorEndpoints, _ path: String, post json: String? = nil
    ) async throws -> (status: Int, body: [String: Any]) {
        try await HTTPClient.withHTTPClient { http in
            var request = HTTPClientRequest(url: endpoints.controlURL + path)
            if let json {
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: json))
            }
            let response = try await http.execute(request, timeout: .seconds(30))
            let buffer = try await response.body.collect(upTo: 1 << 20)
            let object = try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any]
            return (Int(response.status.code), object ?? [:])
        }
    }
}

extension AppleAnswer {
    /// The evidence of a `.verified` answer, nil otherwise.
    var evidence: AppleEvidence? {
        if case .verified(let evidence) = self { return evidence }
        return nil
    }

    /// The environment of a `.verified` or `.rejected` answer.
    var answeredBy: AppStoreEnvironment? {
        switch self {
        case .verified(let evidence): return evidence.environment
        case .rejected(let rejection): return rejection.environment
        case .transient, .misconfigured: return nil
        }
    }

    /// A `.transient` answer's failure.
    struct Failure: CustomStringConvertible {
        var reason: FailureReason
        var message: String
        var isOutage: Bool
        var description: String { message }
    }

    /// The failure of a `.transient` answer, nil otherwise.
    var failure: Failure? {
        if case .transient(let failure, let isOutage) = self {
            return Failure(reason: failure.reason, message: failure.message, isOutage: isOutage)
        }
        return nil
    }
}

extension AppStoreClient {
    /// Apple's answer as sent on the wire (production, then sandbox on 21007), for tests of the
    /// simulator's format; nil when no JSON answer came back.
    func wireAnswer(receipt: String) async -> VerifyReceiptResponse? {
        guard
            case .success(let first) = await exchange(
                receipt: receipt, environment: .production, logger: TestSupport.quiet)
        else { return nil }
        guard first.status == .sandboxReceiptOnProduction else { return first }
        guard
            case .success(let second) = await exchange(
                receipt: receipt, environment: .sandbox, logger: TestSupport.quiet)
        else { return nil }
        return second
    }
}
