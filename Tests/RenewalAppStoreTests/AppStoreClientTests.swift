import AppStoreSimulator
import Foundation
@testable import RenewalAppStore
@testable import RenewalAppleAPI
import RenewalCore
import Testing

@Suite("AppStoreClient against the simulator on a loopback port")
struct AppStoreClientTests {
    /// What each scenario should end in.
    enum Expected: Sendable, CustomStringConvertible {
        case valid(AppStoreEnvironment)
        case rejected(Int)
        case malformed
        case outage

        var description: String {
            switch self {
            case .valid(let environment): return "valid(\(environment))"
            case .rejected(let code): return "rejected(\(code))"
            case .malformed: return "malformed"
            case .outage: return "outage"
            }
        }
    }

    static let table: [(Scenario, Expected)] = [
        (.renewal, .valid(.production)), (.voluntaryExpiry, .valid(.production)),
        (.billingRetry, .valid(.production)), (.gracePeriod, .valid(.production)),
        (.billingRecovery, .valid(.production)), (.gracePeriodRecovery, .valid(.production)),
        (.refund, .valid(.production)),
        (.upgrade, .valid(.production)), (.sandbox, .valid(.sandbox)),
        (.familyShared, .valid(.production)), (.trial, .valid(.production)),
        (.legacyIOS6, .valid(.production)), (.multipleSubscriptions, .valid(.production)),
        (.accountNotFound, .rejected(21010)), (.notAuthentic, .rejected(21003)),
        (.malformed, .malformed), (.transient21005, .valid(.production)),
        (.outage, .outage), (.html200, .outage), (.truncatedJSON, .outage), (.slow, .valid(.production)),
        (.multiseat, .valid(.production)), (.assignedSeat, .valid(.production)),
        (.refundRequest, .valid(.production)),
    ]

    @Test("The table covers every scenario")
    func tableCoversEveryScenario() {
        #expect(Set(Self.table.map(\.0)) == Set(Scenario.allCases))
    }

    @Test("Every scenario's answer decodes and gives the expected verification", arguments: table)
    func scenarioVerification(scenario: Scenario, expected: Expected) async throws {
        try await TestSupport.withSimulatorAndClient(slowDelay: .milliseconds(50)) { state, _, client in
            let result = await client.verify(receipt: TestSupport.receipt(scenario).encoded, logger: TestSupport.quiet)
            switch expected {
            case .valid(let environment):
                let evidence = try #require(result.evidence, "\(scenario) gave \(result)")
                #expect(result.answeredBy == environment)
                #expect(!evidence.subscriptions.isEmpty)
                #expect(evidence.latestReceipt != nil)
            case .rejected(let code):
                guard case .rejected(let rejection) = result, rejection.environment == .production else {
                    Issue.record("\(scenario) gave \(result)")
                    return
                }
                #expect(rejection.status.rawValue == code)
                #expect(state.stats.requests == 1)
            case .malformed:
                guard case .rejected(let rejection) = result, rejection.kind == .malformedOrTemporary,
                    rejection.environment == .production
                else {
                    Issue.record("\(scenario) gave \(result)")
                    return
                }
                #expect(state.stats.requests == 4)
            case .outage:
                let failure = try #require(result.failure, "\(scenario) gave \(result)")
                #expect(failure.isOutage)
                #expect(state.stats.requests == 4)
            }
        }
    }

    @Test("A sandbox receipt goes to production, gets 21007, and ends in Sandbox")
    func sandboxPath() async throws {
        try await TestSupport.withSimulatorAndClient { state, _, client in
            let result = await client.verify(receipt: TestSupport.receipt(.sandbox).encoded, logger: TestSupport.quiet)
            #expect(result.answeredBy == .sandbox)
            #expect(result.evidence?.subscriptions.allSatisfy { $0.environment == .sandbox } == true)
            let stats = state.stats
            #expect(stats.requests == 2 && stats.production == 1 && stats.sandbox == 1)
        }
    }

    @Test("21007 and 21008 bouncing between endpoints ends in environmentLoop")
    func environmentLoop() async throws {
        try await TestSupport.withSimulatorAndClient(adjust: { $0.sandboxURL = $0.productionURL }) { state, _, client in
            let result = await client.verify(receipt: TestSupport.receipt(.sandbox).encoded, logger: TestSupport.quiet)
            #expect(result.failure?.reason == AppleAPIError.environmentLoop.reason)
            #expect(state.stats.requests == 3)
        }
    }

    @Test("A wrong shared secret gives sharedSecretRejected after exactly one request")
    func wrongSecret() async throws {
        try await TestSupport.withSimulatorAndClient(adjust: { $0.sharedSecret = "wrong" }) { state, _, client in
            let result = await client.verify(receipt: TestSupport.receipt(.renewal).encoded, logger: TestSupport.quiet)
            guard case .misconfigured(let failure) = result, failure.reason == "apple_status_21004" else {
                Issue.record("gave \(result)")
                return
            }
            #expect(state.stats.requests == 1)
        }
    }

    @Test("transient_21005 recovers on the third request")
    func transientRecovers() async throws {
        try await TestSupport.withSimulatorAndClient { state, _, client in
            let result = await client.verify(
                receipt: TestSupport.receipt(.transient21005).encoded, logger: TestSupport.quiet)
            #expect(result.evidence != nil)
            #expect(state.stats.requests == 3)
        }
    }

    @Test("transient_21005 with two attempts fails as a temporary status")
    func transientExhaustsAttempts() async throws {
        try await TestSupport.withSimulatorAndClient(adjust: { $0.maxAttempts = 2 }) { state, _, client in
            let result = await client.verify(
                receipt: TestSupport.receipt(.transient21005).encoded, logger: TestSupport.quiet)
            #expect(result.failure?.reason == AppleAPIError.temporaryStatus(.serverUnavailable).reason)
            #expect(result.failure?.isOutage == true)
            #expect(state.stats.requests == 2)
        }
    }

    @Test("receipt-data that is not a simulated receipt is malformed after maxAttempts requests")
    func garbageReceipt() async throws {
        try await TestSupport.withSimulatorAndClient(adjust: { $0.maxAttempts = 3 }) { state, _, client in
            let result = await client.verify(receipt: "bm90IGEgcmVjZWlwdA==", logger: TestSupport.quiet)
            guard case .rejected(let rejection) = result, rejection.kind == .malformedOrTemporary else {
                Issue.record("gave \(result)")
                return
            }
            #expect(state.stats.requests == 3)
        }
    }

    @Test(
        "The three bad-body scenarios fail with the expected errors",
        arguments: [Scenario.outage, .html200, .truncatedJSON])
    func badBodies(scenario: Scenario) async throws {
        try await TestSupport.withSimulatorAndClient { _, _, client in
            let result = await client.verify(receipt: TestSupport.receipt(scenario).encoded, logger: TestSupport.quiet)
            let failure = try #require(result.failure)
            switch scenario {
            case .outage: #expect(failure.reason == AppleAPIError.httpStatus(503).reason)
            case .html200:
                #expect(failure.reason == "invalid_answer")
                #expect(failure.message.contains("text/html"))
            default:
                #expect(failure.reason == "invalid_answer")
                #expect(failure.message.contains("application/json"))
                #expect(!failure.message.contains(" 0 bytes"))
            }
            #expect(failure.isOutage)
        }
    }

    @Test("A slow answer with a short timeout fails with timeout")
    func slowTimesOut() async throws {
        try await TestSupport.withSimulatorAndClient(
            slowDelay: .milliseconds(800),
            adjust: {
                $0.requestTimeout = .milliseconds(100)
                $0.maxAttempts = 1
            }
        ) { _, _, client in
            let result = await client.verify(receipt: TestSupport.receipt(.slow).encoded, logger: TestSupport.quiet)
            #expect(result.failure?.reason == AppleAPIError.timeout.reason)
            #expect(result.failure?.isOutage == true)
        }
    }

    @Test("An answer over the body cap fails with responseTooLarge after one request")
    func bodyCap() async throws {
        try await TestSupport.withSimulatorAndClient(adjust: { $0.maxResponseBytes = 256 }) { state, _, client in
            let result = await client.verify(receipt: TestSupport.receipt(.renewal).encoded, logger: TestSupport.quiet)
            #expect(result.failure?.reason == AppleAPIError.responseTooLarge(limit: 256).reason)
            #expect(result.failure?.isOutage == false)
            #expect(state.stats.requests == 1)
        }
    }

    @Test("A refused connection fails as an outage")
    func connectionRefused() async throws {
        let endpoints = SimulatorEndpoints(port: 1)
        var configuration = TestSupport.clientConfiguration(endpoints)
        configuration.maxAttempts = 2
        configuration.requestTimeout = .milliseconds(300)
        try await AppStoreClient.withAppStoreClient(configuration: configuration) { client in
            let result = await client.verify(receipt: TestSupport.receipt(.renewal).encoded, logger: TestSupport.quiet)
            let failure = try #require(result.failure)
            #expect(failure.isOutage)
            #expect(failure.reason == "connection_failed" || failure.reason == "timeout")
        }
    }

    @Test("The global fault fails every request until it is cleared")
    func globalFault() async throws {
        try await TestSupport.withSimulatorAndClient { state, _, client in
            let receipt = TestSupport.receipt(.renewal).encoded
            state.fault = .status21005
            #expect(
                await client.verify(receipt: receipt, logger: TestSupport.quiet).failure?.reason
                    == AppleAPIError.temporaryStatus(.serverUnavailable).reason)
            state.fault = .outage
            #expect(
                await client.verify(receipt: receipt, logger: TestSupport.quiet).failure?.reason
                    == AppleAPIError.httpStatus(503).reason)
            state.fault = .none
            #expect(await client.verify(receipt: receipt, logger: TestSupport.quiet).evidence != nil)
        }
    }

    @Test("No error description or configuration description contains the receipt or the secret")
    func noSecretsInDescriptions() async throws {
        var texts: [String] = []
        let scenarios: [Scenario] = [.outage, .html200, .truncatedJSON, .malformed, .renewal]
        try await TestSupport.withSimulatorAndClient(adjust: { $0.maxResponseBytes = 4096 }) { _, _, client in
            for scenario in scenarios {
                let receipt = TestSupport.receipt(scenario).encoded
                let result = await client.verify(receipt: receipt, logger: TestSupport.quiet)
                if let failure = result.failure {
                    texts += [failure.description, failure.reason.rawValue, String(reflecting: failure)]
                }
            }
            texts += [client.configuration.description, String(reflecting: client.configuration)]
            var dumped = ""
            dump(client.configuration, to: &dumped)
            texts.append(dumped)
        }
        var refusedConfiguration = TestSupport.clientConfiguration(SimulatorEndpoints(port: 1))
        refusedConfiguration.requestTimeout = .milliseconds(300)
        let refused = try await AppStoreClient.withAppStoreClient(configuration: refusedConfiguration) { client in
            await client.verify(receipt: TestSupport.receipt(.renewal).encoded, logger: TestSupport.quiet)
        }
        texts.append(refused.failure?.description ?? "")
        for text in texts {
            #expect(!text.contains(TestSupport.secret))
            for scenario in scenarios { #expect(!text.contains(TestSupport.receipt(scenario).encoded)) }
        }
    }

    @Test("Backoff uses full jitter within the doubling ceiling and the cap")
    func backoffBounds() async throws {
        let configuration = AppStoreClient.Configuration(retryBaseDelay: .milliseconds(500), retryMaxDelay: .seconds(8))
        try await AppStoreClient.withAppStoreClient(configuration: configuration) { client in
            for attempt in 1...8 {
                let ceiling = min(8_000, 500 * (1 << (attempt - 1)))
                for _ in 0..<50 {
                    let delay = client.configuration.retryPolicy.backoff(afterAttempt: attempt)
                    #expect(delay >= .zero && delay <= .milliseconds(ceiling))
                }
            }
        }
    }
}
