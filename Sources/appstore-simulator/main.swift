import AppStoreSimulator
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import RenewalServerAPI

/// `appstore-simulator`: a verifyReceipt simulator on loopback, and a generator of sample receipts.
struct AppStoreSimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore-simulator",
        abstract:
            "A simulator of Apple's verifyReceipt endpoints and App Store Server API, for tests, demos and benchmarks.",
        subcommands: [Serve.self, Receipts.self, StoreKit2.self, BenchJWS.self],
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
            abstract:
                """
                Serve /verifyReceipt and /sandbox/verifyReceipt. The shared secret, if any, comes from \
                APPSTORE_SHARED_SECRET.
                """
        )

        @Option(help: "Address to bind.") var host = "127.0.0.1"
        @Option(help: "Port to bind (0: any free port).") var port = 8099
        @Option(name: .customLong("latency-ms"), help: "Delay before every verifyReceipt answer, in milliseconds.")
        var latencyMS = 0
        @Option(name: .customLong("slow-delay-ms"), help: "Delay of the `slow` scenario, in milliseconds.")
        var slowDelayMS = 10_000
        @Option(help: "Seconds added to the wall clock to make the simulator clock.")
        var clockOffsetSeconds: Double = 0
        @Option(
            help: ArgumentHelp(
                """
                Write the Server API's credentials here at start: AuthKey.p8 (the API key the simulator accepts), \
                root.pem (the root its signed data chains to), signing-chain.pem (its signing key and chain, \
                for `storekit2 --signing-chain`) and server-api.env (the APPSTORE_* variables for renewal).
                """,
                valueName: "dir"))
        var exportDir: String?
        @Option(
            help: ArgumentHelp(
                """
                Import lines ({\"user_id\", \"latest_receipt\"} JSON Lines, as `receipts` prints) whose \
                transactions the Server API knows from the start; verifyReceipt requests and POST \
                /_simulator/receipts add more.
                """,
                valueName: "file"))
        var register: [String] = []
        @Option(
            name: .customLong("app"),
            help: ArgumentHelp(
                """
                A further app (bundle id) the Server API answers for, with the same key (a team key); \
                repeatable. com.example.app always is.
                """,
                valueName: "bundle-id"))
        var apps: [String] = []

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
            var configuration = SimulatorConfiguration(
                host: host, port: port, sharedSecret: secret,
                latency: .milliseconds(latencyMS), slowDelay: .milliseconds(slowDelayMS),
                state: SimulatorState(offset: clockOffsetSeconds))
            configuration.serverAPI?.bundleIDs.formUnion(apps)
            logger.info("Starting App Store simulator", metadata: ["configuration": "\(configuration)"])
            for file in register {
                let receipts = try Self.receipts(inImportFile: file)
                configuration.state.register(receipts)
                logger.info("Registered receipts", metadata: ["file": "\(file)", "receipts": "\(receipts.count)"])
            }
            let exportDir = self.exportDir
            let serverAPI = configuration.serverAPI
            let application = buildSimulator(configuration: configuration, logger: logger) { endpoints in
                var lines = """
                    production: \(endpoints.productionURL)
                    sandbox:    \(endpoints.sandboxURL)
                    server api: \(endpoints.serverAPIURL) (sandbox \(endpoints.sandboxServerAPIURL))
                    control:    \(endpoints.controlURL)

                    """
                if let exportDir, let serverAPI {
                    do {
                        try Self.export(serverAPI, endpoints: endpoints, to: exportDir)
                        lines += "credentials: \(exportDir)/server-api.env\n"
                    } catch {
                        lines += "credentials: not written to \(exportDir) (\(error))\n"
                    }
                }
                FileHandle.standardOutput.write(Data(lines.utf8))
            }
            do {
                try await application.runService()  // SIGTERM and SIGINT shut it down gracefully
            } catch {
                throw SimulatorStartupError.listening(
                    on: host, port: port, failedWith: error,
                    fix: "stop what holds it, or give another --port (0: any free port)")
            }
        }

        /// The receipts of an import file; lines that hold none are skipped.
        static func receipts(inImportFile path: String) throws -> [SimulatedReceipt] {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("--register: cannot read \(path).")
            }
            struct Line: Decodable {
                var latestReceipt: String
                enum CodingKeys: String, CodingKey { case latestReceipt = "latest_receipt" }
            }
            return data.split(separator: UInt8(ascii: "\n")).compactMap { line in
                (try? JSONDecoder().decode(Line.self, from: Data(line))).flatMap {
                    SimulatedReceipt(encoded: $0.latestReceipt)
                }
            }
        }

        /// Writes the key (0600), the root and an env file for `renewal`.
        static func export(_ serverAPI: SimulatedServerAPI, endpoints: SimulatorEndpoints, to directory: String) throws
        {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let key = directory + "/AuthKey.p8"
            FileManager.default.createFile(
                atPath: key, contents: Data(serverAPI.privateKeyPEM.utf8), attributes: [.posixPermissions: 0o600])
            try serverAPI.chain.rootPEM().write(toFile: directory + "/root.pem", atomically: true, encoding: .utf8)
            FileManager.default.createFile(
                atPath: directory + "/signing-chain.pem", contents: Data(try serverAPI.chain.exported().utf8),
                attributes: [.posixPermissions: 0o600])
            let env = """
                APPSTORE_KEY_ID=\(serverAPI.keyID)
                APPSTORE_ISSUER_ID=\(serverAPI.issuerID)
                APPSTORE_BUNDLE_ID=\(SimulatedReceipt.bundleID)
                APPSTORE_PRIVATE_KEY_FILE=\(key)
                APPSTORE_ROOT_CERTIFICATES=\(directory)/root.pem
                APPSTORE_SERVER_API_URL=\(endpoints.serverAPIURL)
                APPSTORE_SANDBOX_SERVER_API_URL=\(endpoints.sandboxServerAPIURL)
                APPSTORE_VERIFY_RECEIPT_URL=\(endpoints.productionURL)
                APPSTORE_SANDBOX_VERIFY_RECEIPT_URL=\(endpoints.sandboxURL)

                """
            try env.write(toFile: directory + "/server-api.env", atomically: true, encoding: .utf8)
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
            guard periodDays > 0, periodDays.isFinite else {
                throw ValidationError("--period-days must be more than 0.")
            }
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
                let quotedUser =
                    (try? encoder.encode(user)).flatMap { String(data: $0, encoding: .utf8) } ?? "\"\(user)\""
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

extension AppStoreSimulatorCommand {
    /// Rewrites receipt import lines as a StoreKit 2 app's server would hold them.
    struct StoreKit2: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "storekit2",
            abstract: "Print StoreKit 2 import lines (no receipt) for the customers of a receipts file.",
            discussion: """
                Reads import lines as `receipts` prints them and writes, per customer, a line naming the \
                subscription by transaction id (with the app account token) or by a signed transaction. Serve \
                with --register FILE so the Server API knows the customers, and sign with the served chain \
                (--signing-chain EXPORT_DIR/signing-chain.pem).
                """)

        @Argument(help: ArgumentHelp("Import lines with latest_receipt, as `receipts` prints.", valueName: "file"))
        var file: String
        @Option(help: "transaction-id or signed-transaction.") var form = "transaction-id"
        @Option(
            help: ArgumentHelp(
                "The served chain (serve --export-dir writes signing-chain.pem); needed for signed-transaction.",
                valueName: "file"))
        var signingChain: String?

        func validate() throws {
            guard let form = SimulatedReceipt.ImportForm(rawValue: form), form != .receipt else {
                throw ValidationError("--form must be transaction-id or signed-transaction, got '\(form)'.")
            }
            if form == .signedTransaction, signingChain == nil {
                throw ValidationError("--form signed-transaction needs --signing-chain (serve --export-dir writes it).")
            }
        }

        func run() async throws {
            let form = SimulatedReceipt.ImportForm(rawValue: form) ?? .transactionID
            var signer: SigningChain?
            if let signingChain {
                guard let text = try? String(contentsOfFile: signingChain, encoding: .utf8) else {
                    throw ValidationError("--signing-chain: cannot read \(signingChain).")
                }
                signer = try SigningChain(exported: text)
            }
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read \(file).")
            }
            struct Line: Decodable {
                var userID: String
                var latestReceipt: String
                enum CodingKeys: String, CodingKey {
                    case userID = "user_id", latestReceipt = "latest_receipt"
                }
            }
            var chunk = ""
            for raw in data.split(separator: UInt8(ascii: "\n")) {
                guard let line = try? JSONDecoder().decode(Line.self, from: Data(raw)),
                    let receipt = SimulatedReceipt(encoded: line.latestReceipt)
                else { continue }
                chunk += try receipt.importLine(userID: line.userID, form: form, signer: signer) + "\n"
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
