import AppStoreSimulator
import Foundation
import Hummingbird
import Logging
import Testing

/// Smaller things a new user met, each through the real binaries: status of several users, a table
/// that keeps its columns with long values, the simulator's port-in-use error, and the JSON log keys
/// the help names.
@Suite("Details a new user met: status, the simulator's port, the JSON log's keys")
struct NewUserDetailsTests {
    /// An import line of a never-verified receipt (its bytes differ per user).
    static func line(_ user: String, product: String? = nil) -> String {
        let receipt = Data("MIIB-\(user)-receipt".utf8).base64EncodedString()
        let productKey = product.map { #", "product_id": "\#($0)""# } ?? ""
        return #"{"user_id": "\#(user)", "latest_receipt": "\#(receipt)"\#(productKey)}"# + "\n"
    }

    @Test("status --user given twice shows both users (and says which one has no receipt), in JSON and the table")
    func statusOfSeveralUsers() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = ["RENEWAL_DATABASE": directory + "/renewal.sqlite"]
        #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
        let lines = Self.line("ann") + Self.line("bob") + Self.line("cai")
        #expect(try await CLI.run(["import", "-"], environment: environment, stdin: lines).status == 0)

        let json = try await CLI.run(["status", "--json", "--user", "bob", "--user", "ann"], environment: environment)
        #expect(json.status == 0, "\(json.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(Set(rows.compactMap { $0["user_id"] as? String }) == ["ann", "bob"], "\(json.stdout)")
        #expect(rows.count == 2, "\(json.stdout)")

        let table = try await CLI.run(
            ["status", "--user", "ann", "--user", "nobody", "--user", "cai"], environment: environment)
        #expect(table.status == 0, "\(table.stderr)")
        let users = table.stdout.split(separator: "\n").dropFirst().compactMap { $0.split(separator: " ").first }
        #expect(users.contains("ann") && users.contains("cai") && !users.contains("bob"), "\(table.stdout)")
        #expect(table.stdout.contains("nobody has no receipt"), "\(table.stdout)")
    }

    @Test("the status table sizes its columns to their values: long product and user ids keep every column aligned")
    func statusTableAlignment() async throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = ["RENEWAL_DATABASE": directory + "/renewal.sqlite"]
        #expect(try await CLI.run(["migrate"], environment: environment).status == 0)
        let lines =
            Self.line("ann", product: "com.example.subscriptions.premium.family.yearly.introductory")
            + Self.line("a-user-id-longer-than-the-default-column", product: "pro")
            + Self.line("bob", product: "com.example.pro.monthly")
        #expect(try await CLI.run(["import", "-"], environment: environment, stdin: lines).status == 0)
        let table = try await CLI.run(["status"], environment: environment)
        #expect(table.status == 0, "\(table.stderr)")
        let output = table.stdout.split(separator: "\n").map(String.init)
        let header = try #require(output.first)
        #expect(output.count == 4, "\(table.stdout)")
        // Every row's state ("unverified") and entitlement ("no") start where their headings do.
        let state = try #require(header.range(of: "STATE")).lowerBound.utf16Offset(in: header)
        let entitled = try #require(header.range(of: "ENTITLED")).lowerBound.utf16Offset(in: header)
        for row in output.dropFirst() {
            let found = try #require(row.range(of: " unverified ")).lowerBound.utf16Offset(in: row) + 1
            #expect(found == state, "\(table.stdout)")
            let entitlement = row.utf16.dropFirst(entitled).prefix(3)
            #expect(String(entitlement) == "no ", "\(table.stdout)")
        }
    }

    @Test("the simulator's error for a port in use names the address and port, with balanced parentheses")
    func simulatorPortInUse() async throws {
        let quiet = Logger(label: "listener", factory: { _ in SwiftLogNoOpLogHandler() })
        let router = Router()
        try await withLoopbackServer(router, logger: quiet) { port in
            let result = try await CLI.run(
                ["serve", "--port", "\(port)"], program: "appstore-simulator", timeLimit: .seconds(60))
            #expect(result.status != 0, "\(result.stdout) \(result.stderr)")
            let message = result.stderr
            #expect(message.contains("127.0.0.1:\(port)"), "\(message)")
            #expect(message.contains("in use"), "\(message)")
            #expect(
                message.filter { $0 == "(" }.count == message.filter { $0 == ")" }.count,
                "unbalanced parentheses: \(message)")
        }
    }

    @Test("the simulator started in-process on a port in use fails naming the address and port")
    func inProcessSimulatorPortInUse() async throws {
        let quiet = Logger(label: "listener", factory: { _ in SwiftLogNoOpLogHandler() })
        try await withLoopbackServer(Router(), logger: quiet) { port in
            let configuration = SimulatorConfiguration(port: port)
            do {
                try await withAppStoreSimulator(configuration: configuration, logger: quiet) { _ in
                    Issue.record("the simulator listened on a port in use")
                }
            } catch {
                let message = "\(error)"
                #expect(message.contains("127.0.0.1:\(port)") && message.contains("in use"), "\(message)")
                #expect(message.filter { $0 == "(" }.count == message.filter { $0 == ")" }.count, "\(message)")
            }
        }
    }

    @Test("--log-format's help names exactly the keys a JSON log line has")
    func logFormatHelpNamesTheKeys() async throws {
        let help = try await CLI.run(["migrate", "--help"])
        let flat = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let listed = try #require(
            flat.firstMatch(of: #/one JSON object per line[^:]*: ([a-z_, ]+)/#)?.output.1, "\(help.stdout)")
        let named = Set(
            listed.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init).filter { $0 != "and" })

        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let migrate = try await CLI.run([
            "migrate", "--database", directory + "/renewal.sqlite", "--log-format", "json", "--log-level", "debug",
        ])
        #expect(migrate.status == 0, "\(migrate.stderr)")
        let entries = migrate.stderr.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let withMetadata = try #require(entries.first { $0["metadata"] != nil }, "\(migrate.stderr)")
        #expect(
            Set(withMetadata.keys) == named, "help names \(named.sorted()), a line has \(withMetadata.keys.sorted())")
        for entry in entries {
            #expect(Set(entry.keys).isSubset(of: named), "\(entry)")
        }
    }
}
