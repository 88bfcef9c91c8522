import AppStoreSimulator
import Foundation
import Testing

/// docs/simulator.md against the simulator itself: every scenario and fault it knows, every `serve`
/// flag its help lists, and every variable the environment file it exports holds, so the page cannot
/// fall behind when one is added.
@Suite("docs/simulator.md names every scenario, fault, serve flag and exported variable")
struct SimulatorPageTests {
    static var page: String {
        get throws { try String(contentsOfFile: DeployFiles.root + "/docs/simulator.md", encoding: .utf8) }
    }

    @Test("every scenario and every fault mode is in the page, each as code")
    func scenariosAndFaults() throws {
        let page = try Self.page
        for scenario in Scenario.allCases {
            #expect(page.contains("`\(scenario.rawValue)`"), "docs/simulator.md does not name scenario \(scenario)")
        }
        for fault in SimulatorState.Fault.allCases {
            #expect(page.contains("`\(fault.rawValue)`"), "docs/simulator.md does not name fault \(fault)")
        }
        for fault in SimulatorState.FeedFault.allCases {
            #expect(page.contains("`\(fault.rawValue)`"), "docs/simulator.md does not name feed fault \(fault)")
        }
        for route in ["/_simulator/clock", "/_simulator/fault", "/_simulator/feed", "/_simulator/receipts"] {
            #expect(page.contains(route), "docs/simulator.md does not name \(route)")
        }
    }

    @Test("every flag of appstore-simulator serve --help is in the page")
    func serveFlags() async throws {
        let help = try await CLI.run(["serve", "--help"], program: "appstore-simulator")
        #expect(help.status == 0, "\(help.stderr)")
        let flags = Set(
            help.stdout.ranges(of: /--[a-z0-9][a-z0-9-]*/).map { String(help.stdout[$0]) })
        #expect(flags.contains("--export-dir"), "\(help.stdout)")
        let page = try Self.page
        for flag in flags.subtracting(["--help", "--version"]) {
            #expect(page.contains(flag), "docs/simulator.md does not name serve \(flag)")
        }
    }

    @Test("every variable serve --export-dir writes is in the page")
    func exportedVariables() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = Process()
        process.executableURL = CLI.binary.deletingLastPathComponent().appendingPathComponent("appstore-simulator")
        process.arguments = ["serve", "--port", "0", "--export-dir", directory + "/sim"]
        process.environment = ["PATH": "/usr/bin:/bin"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
        let envFile = directory + "/sim/server-api.env"
        let written = await poll(timeout: 30) { FileManager.default.fileExists(atPath: envFile) }
        try #require(written, "serve --export-dir wrote no server-api.env")
        let names = try String(contentsOfFile: envFile, encoding: .utf8).split(separator: "\n")
            .compactMap { $0.split(separator: "=", maxSplits: 1).first.map(String.init) }
        #expect(names.contains("APPSTORE_VERIFY_RECEIPT_URL") && names.contains("APPSTORE_BUNDLE_ID"), "\(names)")
        let page = try Self.page
        for name in names {
            #expect(page.contains(name), "docs/simulator.md does not name \(name) of server-api.env")
        }
    }
}
