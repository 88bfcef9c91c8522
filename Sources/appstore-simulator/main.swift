import AppStoreSimulator
import ArgumentParser
import Foundation
import Hummingbird
import Logging

/// `appstore-simulator`: a verifyReceipt simulator on loopback, and a generator of sample receipts.
struct AppStoreSimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore-simulator",
        abstract: "A simulator of Apple's verifyReceipt endpoints, for tests, demos and benchmarks.",
        subcommands: [Serve.self, Receipts.self],
        defaultSubcommand: Serve.self)
}

/// Parses scenario names, with `all` meaning every scenario.
func parseScenarios(_ names: [String]) throws -> [Scenario] {
    var scenarios: [Scenario] = []
    for name in names {
        if name == "all" {
            scenarios += Scenario.allCases
        } else if let scenario = Scenario(rawValue: name) {
            scenarios.append(scenario)
        } else {
            let known = Scenario.allCases.map(\.rawValue).joined(separator: ", ")
            throw ValidationError("Unknown --scenario '\(name)'. Use one of: all, \(known).")
        }
    }
    return scenarios
}

extension AppStoreSimulatorCommand {
    /// Runs the simulator until SIGINT or SIGTERM.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve /verifyReceipt and /sandbox/verifyReceipt. The shared secret, if any, comes from APPSTORE_SHARED_SECRET.")

        @Option(help: "Address to bind.") var host = "127.0.0.1"
        @Option(help: "Port to bind (0: any free port).") var port = 8099
        @Option(name: .customLong("latency-ms"), help: "Delay before every verifyReceipt answer, in milliseconds.")
        var latencyMS = 0
        @Option(name: .customLong("slow-delay-ms"), help: "Delay of the `slow` scenario, in milliseconds.")
        var slowDelayMS = 10_000
        @Option(help: "Seconds added to the wall clock to make the simulator clock.")
        var clockOffsetSeconds: Double = 0

        func validate() throws {
            guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0...65535, got \(port).") }
            guard latencyMS >= 0 else { throw ValidationError("--latency-ms must be 0 or more.") }
            guard slowDelayMS >= 0 else { throw ValidationError("--slow-delay-ms must be 0 or more.") }
            guard clockOffsetSeconds.isFinite else { throw ValidationError("--clock-offset-seconds must be a number.") }
        }

        func run() async throws {
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
            var logger = Logger(label: "appstore-simulator")
            logger.logLevel = .info
            let secret = ProcessInfo.processInfo.environment["APPSTORE_SHARED_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
            let configuration = SimulatorConfiguration(
                host: host, port: port, sharedSecret: secret,
                latency: .milliseconds(latencyMS), slowDelay: .milliseconds(slowDelayMS),
                state: SimulatorState(offset: clockOffsetSeconds))
            logger.info("Starting App Store simulator", metadata: ["configuration": "\(configuration)"])
            let application = buildSimulator(configuration: configuration, logger: logger) { endpoints in
                let lines = """
                    production: \(endpoints.productionURL)
                    sandbox:    \(endpoints.sandboxURL)
                    control:    \(endpoints.controlURL)

                    """
                FileHandle.standardOutput.write(Data(lines.utf8))
            }
            try await application.runService()  // SIGTERM and SIGINT shut it down gracefully
        }
    }

    /// Prints sample import lines: `{"user_id": "...", "latest_receipt": "..."}` as JSON Lines.
    struct Receipts: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print sample import lines (JSON Lines) for a mix of scenarios, round-robin.")

        @Option(help: "How many lines to print.") var count = 10
        @Option(help: "A scenario for the mix (repeat for several; `all` for every one).")
        var scenario: [String] = ["renewal"]
        @Option(help: "Prefix of the generated user ids (and simulator accounts).") var userPrefix = "user"
        @Option(help: "Days before the simulator clock at which each subscription started.")
        var startedDaysAgo: Double = 10
        @Option(help: "Paid period length, in days.") var periodDays: Double = 30
        @Option(help: "Product identifier.") var productID = "com.example.pro.monthly"
        @Option(help: "The simulator's --clock-offset-seconds, so start dates match its clock.")
        var clockOffsetSeconds: Double = 0

        func validate() throws {
            guard count >= 0 else { throw ValidationError("--count must be 0 or more.") }
            guard periodDays > 0, periodDays.isFinite else { throw ValidationError("--period-days must be more than 0.") }
            guard startedDaysAgo.isFinite, clockOffsetSeconds.isFinite else {
                throw ValidationError("--started-days-ago and --clock-offset-seconds must be numbers.")
            }
            guard !userPrefix.isEmpty else { throw ValidationError("--user-prefix must not be empty.") }
            _ = try parseScenarios(scenario)
        }

        func run() throws {
            let scenarios = try parseScenarios(scenario)
            guard !scenarios.isEmpty else { return }
            let now = Date().timeIntervalSince1970.rounded(.down)
            let start = Date(timeIntervalSince1970: now + clockOffsetSeconds - startedDaysAgo * 86_400)
            let width = max(6, String(count).count)
            let encoder = JSONEncoder()
            var chunk = ""
            for index in 0..<count {
                let number = String(index + 1)
                let user = "\(userPrefix)-\(String(repeating: "0", count: max(0, width - number.count)))\(number)"
                let receipt = SimulatedReceipt(
                    account: user, scenario: scenarios[index % scenarios.count], start: start,
                    period: periodDays * 86_400, productID: productID)
                let quotedUser = (try? encoder.encode(user)).flatMap { String(data: $0, encoding: .utf8) } ?? "\"\(user)\""
                chunk += "{\"user_id\": \(quotedUser), \"latest_receipt\": \"\(receipt.encoded)\"}\n"
                if chunk.utf8.count > 64 << 10 {
                    FileHandle.standardOutput.write(Data(chunk.utf8))
                    chunk = ""
                }
            }
            FileHandle.standardOutput.write(Data(chunk.utf8))
        }
    }
}

// `main.swift` cannot hold `@main`, and top-level code resolves `main()`/`run()` to the synchronous
// overloads, so dispatch from an async function the way `AsyncParsableCommand.main()` does.
func runCommand() async {
    do {
        var command = try AppStoreSimulatorCommand.parseAsRoot()
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    } catch {
        AppStoreSimulatorCommand.exit(withError: error)
    }
}

await runCommand()
