import Foundation
import Testing

/// The exit codes the documentation's tables list and the ones `renewal --help` names are the same set,
/// so an operator reading either learns every code the binary can return.
@Suite("Exit codes: --help and the documentation name the same codes")
struct DocumentedExitCodesTests {
    /// Every Markdown file of the documentation: the README, docs/ and Deploy/.
    static func documents() throws -> [(name: String, text: String)] {
        var names = ["README.md", "Deploy/README.md"]
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: DeployFiles.root + "/docs")) ?? []
        names += docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return try names.map { ($0, try DeployFiles.text($0)) }
    }

    /// The codes in the first column of every table whose header starts `| code | meaning |` (the
    /// reference table) or `| exit | meaning |` (the schedulers' table); "130 / 143" counts as two.
    static func documentedCodes(in text: String) -> (reference: Set<Int>, all: Set<Int>) {
        var reference: Set<Int> = []
        var all: Set<Int> = []
        var table: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("| code | meaning |") || line.hasPrefix("| exit | meaning |") {
                table = line.hasPrefix("| code") ? "code" : "exit"
                continue
            }
            guard let current = table else { continue }
            guard line.hasPrefix("|") else {
                table = nil
                continue
            }
            let first = line.split(separator: "|", omittingEmptySubsequences: true).first ?? ""
            let codes = first.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            all.formUnion(codes)
            if current == "code" { reference.formUnion(codes) }
        }
        return (reference, all)
    }

    /// The codes `renewal --help` names: its paragraph "Exit codes: 0 …; 3 …; 130 / 143 …." up to USAGE.
    static func helpCodes() async throws -> Set<Int> {
        let help = try await CLI.run(["--help"])
        let flat = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let paragraph = try #require(flat.range(of: "Exit codes: ").map { String(flat[$0.upperBound...]) })
        var codes: Set<Int> = []
        for item in paragraph.components(separatedBy: "USAGE:")[0].components(separatedBy: "; ") {
            let lead = item.prefix { $0.isNumber || $0 == " " || $0 == "/" }
            codes.formUnion(lead.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) })
        }
        return codes
    }

    @Test(
        "every code the docs' exit code tables list is in renewal --help, and --help names exactly the reference table's"
    )
    func helpAndDocsAgree() async throws {
        let help = try await Self.helpCodes()
        var reference: Set<Int> = []
        var all: Set<Int> = []
        for document in try Self.documents() {
            let codes = Self.documentedCodes(in: document.text)
            reference.formUnion(codes.reference)
            all.formUnion(codes.all)
        }
        #expect(!reference.isEmpty, "no `| code | meaning |` table in the documentation")
        #expect(all.subtracting(help).isEmpty, "--help leaves out \(all.subtracting(help).sorted())")
        #expect(help == reference, "--help names \(help.sorted()), the reference table \(reference.sorted())")
    }
}
