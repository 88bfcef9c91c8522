import Foundation
import Testing

/// The documentation read as GitHub renders it: every relative link in the README, BENCHMARKS.md,
/// Deploy/README.md and `docs/` leads to a file of the repository, and every `#anchor` to a heading of
/// its target, so moving a section between pages cannot leave a reader on a missing page or at the top
/// of the wrong one. The README stays short: the detail lives in `docs/`.
@Suite("Documentation links: every relative link and anchor resolves, and the README stays short")
struct DocumentationLinksTests {
    /// The pages whose links are checked, relative to the repository root.
    static func documents() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: DeployFiles.root + "/docs")
        return ["README.md", "BENCHMARKS.md", "Deploy/README.md"]
            + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    /// Lines outside fenced code blocks (``` or ~~~, indented or not), with their numbers.
    static func proseLines(_ text: String) -> [(number: Int, line: Substring)] {
        var fence: String?
        var lines: [(number: Int, line: Substring)] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.drop { $0 == " " }
            if let marker = fence {
                if trimmed.hasPrefix(marker) { fence = nil }
                continue
            }
            if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
                fence = String(trimmed.prefix(3))
                continue
            }
            lines.append((index + 1, line))
        }
        return lines
    }

    /// GitHub's anchor of a heading's text: lowercase; everything but letters, digits, spaces, hyphens
    /// and underscores removed; spaces become hyphens. A link in the heading counts as its text.
    static func anchor(_ heading: String) -> String {
        let text = heading.replacing(try! Regex(#"\[([^\]]*)\]\([^)]*\)"#)) { String($0.output[1].substring ?? "") }
        return String(
            text.lowercased()
                .filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" || $0 == "_" }
                .map { $0 == " " ? "-" : $0 })
    }

    /// The anchors of a page's headings (ATX headings outside code blocks), a repeated one suffixed -1, -2, ….
    static func anchors(in text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for (_, line) in proseLines(text) {
            guard let match = line.wholeMatch(of: try! Regex(#"#{1,6}[ \t]+(.*?)[ \t#]*"#)),
                let heading = match.output[1].substring
            else { continue }
            let base = anchor(String(heading))
            let count = seen[base, default: 0]
            seen[base] = count + 1
            anchors.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return anchors
    }

    /// One link in a page: its target as written, and where it is.
    struct Link: CustomStringConvertible {
        var file: String
        var line: Int
        var target: String
        var description: String { "\(file):\(line): (\(target))" }
    }

    /// The inline links (and images) of a page outside code blocks, without those that name a scheme
    /// (`https:`, `mailto:`, …).
    static func links(in text: String, file: String) -> [Link] {
        let pattern = try! Regex(#"\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)"#)
        let scheme = try! Regex(#"^[A-Za-z][A-Za-z0-9+.-]*:"#)
        var links: [Link] = []
        for (number, line) in proseLines(text) {
            for match in line.matches(of: pattern) {
                guard let target = match.output[1].substring.map(String.init) else { continue }
                if target.firstMatch(of: scheme) != nil { continue }
                links.append(Link(file: file, line: number, target: target))
            }
        }
        return links
    }

    /// What is wrong with a link, or nil: its file must exist inside the repository, and its anchor
    /// must be one of that page's headings.
    static func problem(with link: Link, root: String) -> String? {
        let parts = link.target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0]).removingPercentEncoding ?? String(parts[0])
        let fragment = parts.count > 1 ? String(parts[1]) : nil
        let page = URL(fileURLWithPath: root).appendingPathComponent(link.file)
        let resolved = path.isEmpty ? page : page.deletingLastPathComponent().appendingPathComponent(path)
        let standardized = resolved.standardizedFileURL.path
        let relative =
            standardized.hasPrefix(root + "/") ? String(standardized.dropFirst(root.count + 1)) : standardized
        guard standardized == root || standardized.hasPrefix(root + "/") else {
            return "leads outside the repository (\(standardized))"
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: standardized, isDirectory: &isDirectory) else {
            return "no such file: \(relative)"
        }
        guard let fragment else { return nil }
        guard !isDirectory.boolValue, standardized.hasSuffix(".md"),
            let text = try? String(contentsOfFile: standardized, encoding: .utf8)
        else { return "an anchor into \(relative), which is not a Markdown page" }
        let anchors = Self.anchors(in: text)
        guard anchors.contains(fragment) else {
            let known = anchors.sorted().joined(separator: ", ")
            return "no heading of \(relative) has the anchor #\(fragment) (it has: \(known))"
        }
        return nil
    }

    @Test("the anchor rules are GitHub's: lowercase, punctuation dropped, spaces as hyphens, repeats numbered")
    func anchorRules() {
        #expect(Self.anchor("Apple's change feed (Notification History)") == "apples-change-feed-notification-history")
        #expect(Self.anchor("How `renewal` is built, and why") == "how-renewal-is-built-and-why")
        #expect(Self.anchor("1. The job") == "1-the-job")
        #expect(Self.anchor("snake_case and -dashes-") == "snake_case-and--dashes-")
        #expect(Self.anchor("See [Webhooks](webhooks.md)") == "see-webhooks")
        let page = """
            # Title
            ## Grafana
            ```sh
            # not a heading
            ```
            ## Grafana
            ### Grafana ##
            #no space, no heading
            """
        #expect(Self.anchors(in: page) == ["title", "grafana", "grafana-1", "grafana-2"])
        let links = Self.links(
            in: """
                [a](docs/a.md#x) and [b](https://example.com) and ![c](c.png "C") and [d](#here)
                ```
                [e](not-a-link.md)
                ```
                """, file: "README.md"
        ).map(\.target)
        #expect(links == ["docs/a.md#x", "c.png", "#here"])
    }

    @Test("every relative link in README.md, BENCHMARKS.md, Deploy/README.md and docs/ resolves, anchors included")
    func linksResolve() throws {
        let root = URL(fileURLWithPath: DeployFiles.root).standardizedFileURL.path
        var checked = 0
        var anchored = 0
        for document in try Self.documents() {
            let text = try DeployFiles.text(document)
            for link in Self.links(in: text, file: document) {
                checked += 1
                if link.target.contains("#") { anchored += 1 }
                if let problem = Self.problem(with: link, root: root) { Issue.record("\(link): \(problem)") }
            }
        }
        #expect(checked > 50, "only \(checked) relative links found; has the reader stopped finding them?")
        #expect(anchored > 20, "only \(anchored) links with an anchor found")
    }

    @Test("README.md is at most 300 lines; the rest is in docs/")
    func readmeIsShort() throws {
        let text = try DeployFiles.text("README.md")
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).count - (text.hasSuffix("\n") ? 1 : 0)
        #expect(lines <= 300, "README.md has \(lines) lines")
    }
}
