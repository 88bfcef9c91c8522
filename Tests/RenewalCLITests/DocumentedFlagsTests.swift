import Foundation
import Testing

/// Every `--flag` the README, the pages in `docs/`, `crontab.example` and the files in `Deploy/` name,
/// checked against the options the built binaries list in `renewal SUBCOMMAND --help` (and `appstore-simulator
/// SUBCOMMAND --help`), so the documents and the binaries cannot drift apart again (the README once
/// named `--server-api-url` while the binary only knew `--server-apiurl`).
@Suite(
    "Documented flags: every flag the README, docs/ and Deploy/ name is accepted by the command they name it for"
)
struct DocumentedFlagsTests {
    /// The project's programs and their subcommands, as `renewal run` names one.
    static let programs = [
        "renewal": [
            "demo", "migrate", "import", "run", "backfill", "status", "report", "analytics", "check", "deliver",
            "copy-database", "extend", "lookup", "claim",
        ],
        "appstore-simulator": ["serve", "receipts", "storekit2", "bench-jws"],
    ]
    static var commands: [String] {
        programs.sorted { $0.key < $1.key }.flatMap { program, subcommands in subcommands.map { "\(program) \($0)" } }
    }

    /// Flags of other programs that the documents mention (Docker, kubectl, SwiftPM, useradd, the
    /// Pushgateway, Chromium, systemctl). A flag in neither this list nor any subcommand's help fails.
    static let otherPrograms: Set<String> = [
        "--static-swift-stdlib", "--show-bin-path", "--no-install-recommends", "--mount", "--from", "--rm",
        "--system", "--gid", "--uid", "--home-dir", "--create-home", "--shell", "--from-file", "--from-literal",
        "--ignore-not-found", "--persistence.file", "--headless", "--no-sandbox", "--screenshot", "--window-size",
        "--now", "--filter", "--product", "--in-place", "--recursive",
    ]

    /// Flags swift-argument-parser gives every command without listing them in `--help` (the
    /// completion and manual generators), with arguments that make each answer: accepted only when
    /// the binary really answers to them.
    static let parserBuiltIns: [String: [String]] = [
        "--generate-completion-script": ["bash"], "--experimental-dump-help": [],
    ]

    /// One flag named in a document, and the subcommand it is named for (nil: the text names none).
    struct Mention: CustomStringConvertible {
        var file: String
        var line: Int
        var command: String?
        var flag: String
        var description: String { "\(file):\(line): \(command.map { "\($0) " } ?? "")\(flag)" }
    }

    /// The documents a user reads: the README, every page in `docs/`, the crontab example and every text
    /// file in `Deploy/`.
    static func documents() throws -> [(name: String, text: String)] {
        var names = ["README.md", "crontab.example"]
        names += try FileManager.default.contentsOfDirectory(atPath: DeployFiles.root + "/docs")
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        let deploy = DeployFiles.root + "/Deploy"
        let enumerator = FileManager.default.enumerator(atPath: deploy)
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: deploy + "/" + path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            {
                names.append("Deploy/" + path)
            }
        }
        return try names.sorted().map { ($0, try DeployFiles.text($0)) }
    }

    /// Where a flag is named, and for which subcommand:
    /// - a row of the configuration table (in the README or a page of `docs/`, under a heading
    ///   "Configuration" of any level): `renewal run` and `renewal backfill` (both take every option it lists);
    /// - a row of the commands table (its first cell is a `renewal` subcommand);
    /// - `renewal SUBCOMMAND …` or `appstore-simulator SUBCOMMAND …` up to the end of the shell
    ///   command or code span;
    /// - an argument list whose first element is a `renewal` subcommand (`args: ["run", …]`, `CMD ["run", …]`);
    /// - anywhere else: no subcommand (it must then be accepted by one of them, or be another program's).
    static func mentions(in text: String, file: String) -> [Mention] {
        let subcommand = (programs["renewal"] ?? []).joined(separator: "|")
        let simulatorSubcommand = (programs["appstore-simulator"] ?? []).joined(separator: "|")
        let flagPattern = try! Regex(#"--[a-z][a-z0-9.-]*[a-z0-9]"#)
        let invocations = [
            ("renewal", try! Regex(#"renewal\s+(\#(subcommand))\b([^`|;&>)\]]*)"#)),
            ("appstore-simulator", try! Regex(#"appstore-simulator\s+(\#(simulatorSubcommand))\b([^`|;&>)\]]*)"#)),
            ("renewal", try! Regex(#"(?:args|CMD|command)\s*:?\s*\[\s*"(\#(subcommand))"([^\]]*)\]"#)),
        ]
        let commandRow = try! Regex(#"^\|\s*`(\#(subcommand))\b[^|]*\|"#)
        var mentions: [Mention] = []
        var inConfigurationSection = false
        // Shell continuation lines are joined, so a command's flags stay with it.
        let lines = text.replacingOccurrences(of: "\\\n", with: " ").split(
            separator: "\n", omittingEmptySubsequences: false)
        for (index, line) in lines.enumerated() {
            let number = index + 1
            if line.hasPrefix("#") {
                inConfigurationSection = line.drop { $0 == "#" }.hasPrefix(" Configuration")
            }
            var attributed: [Range<String.Index>] = []
            func add(_ command: String, _ range: Range<String.Index>) {
                attributed.append(range)
                for match in line[range].matches(of: flagPattern) {
                    mentions.append(
                        Mention(file: file, line: number, command: command, flag: String(line[match.range])))
                }
            }
            if file == "README.md" || file.hasPrefix("docs/"), inConfigurationSection, line.hasPrefix("| `--") {
                let firstCell = line.dropFirst().prefix { $0 != "|" }
                for command in ["renewal run", "renewal backfill"] {
                    add(command, firstCell.startIndex..<firstCell.endIndex)
                }
            } else if let row = line.firstMatch(of: commandRow), let command = row.output[1].substring {
                add("renewal \(command)", line.startIndex..<line.endIndex)
            }
            for (program, pattern) in invocations {
                for match in line.matches(of: pattern) {
                    if let command = match.output[1].substring, let rest = match.output[2].range {
                        add("\(program) \(command)", rest)
                    }
                }
            }
            for match in line.matches(of: flagPattern) where !attributed.contains(where: { $0.overlaps(match.range) }) {
                mentions.append(Mention(file: file, line: number, command: nil, flag: String(line[match.range])))
            }
        }
        return mentions
    }

    @Test("the reader's rules find flags where the documents name them, and for the right subcommand")
    func extraction() {
        let text = """
            ### Configuration
            | `--server-api-url` | `APPSTORE_SERVER_API_URL` | `https://api.storekit.apple.com` |
            ### Commands
            | `status [--json] [--user ID]` | one row per subscription |
            */5 * * * * exec renewal run --quiet --report x.json >>/var/log/renewal.log 2>&1 --not-ours
            renewal backfill --state active \\
              --concurrency 8
                          args: ["backfill", "--state", "active", "--quiet"]
            Raise --concurrency or run `renewal report --format csv`.
            (`appstore-simulator serve --export-dir DIR` writes files; `--register FILE` makes …)
            """
        let found = Self.mentions(in: text, file: "README.md").map { "\($0.command ?? "-") \($0.flag)" }
        #expect(
            found == [
                "renewal run --server-api-url", "renewal backfill --server-api-url",
                "renewal status --json", "renewal status --user",
                "renewal run --quiet", "renewal run --report", "- --not-ours",
                "renewal backfill --state", "renewal backfill --concurrency",
                "renewal backfill --state", "renewal backfill --quiet",
                "renewal report --format", "- --concurrency",
                "appstore-simulator serve --export-dir", "- --register",
            ])
        // The configuration table is found in a page of docs/ too, under a heading of any level.
        let page = """
            ## Configuration
            | `--timeout` | — | `30` seconds per Apple request |
            ## Exit codes
            | `--limit` | — | none |
            """
        let inDocs = Self.mentions(in: page, file: "docs/operating.md").map { "\($0.command ?? "-") \($0.flag)" }
        #expect(inDocs == ["renewal run --timeout", "renewal backfill --timeout", "- --limit"])
    }

    @Test(
        """
        every flag named in README.md, docs/, crontab.example and Deploy/ is in the named subcommand's --help, or in \
        some subcommand's
        """
    )
    func documentedFlagsExist() async throws {
        var options: [String: Set<String>] = [:]
        for command in Self.commands {
            let words = command.split(separator: " ").map(String.init)
            options[command] = try await DeployFiles.options(of: words[1], program: words[0])
        }
        var anyCommand = options.values.reduce(into: Set(["--help", "--version"])) { $0.formUnion($1) }
        for (flag, arguments) in Self.parserBuiltIns where try await CLI.run([flag] + arguments).status == 0 {
            anyCommand.insert(flag)
        }
        var checked = 0
        for document in try Self.documents() {
            for mention in Self.mentions(in: document.text, file: document.name) {
                checked += 1
                if let command = mention.command {
                    #expect(
                        options[command]?.contains(mention.flag) == true, "\(mention): \(command) has no such option")
                } else {
                    #expect(
                        anyCommand.contains(mention.flag) || Self.otherPrograms.contains(mention.flag),
                        """
                        \(mention): no subcommand of renewal or appstore-simulator has this option, and it is not \
                        listed as another program's
                        """
                    )
                }
            }
        }
        #expect(checked > 100, "only \(checked) flags found in the documents; has the reader stopped finding them?")
    }
}
