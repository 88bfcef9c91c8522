import Foundation
import Testing

/// The house limits on size, over every Swift file in Sources: no file over 400 lines and no function
/// or initializer over 80 (from its `func`/`init` line to its closing brace). A longer one is split by
/// meaning; a file past the limit is split into extensions by topic.
@Suite("Source sizes: files at most 400 lines, functions at most 80")
struct SourceSizeTests {
    static let fileLimit = 400
    static let functionLimit = 80

    /// Offenders known when this test was written, in files other work was changing at the time, with
    /// their length then ("path:name" or a file's path). Each is split and removed from here; the list
    /// only ever shrinks, and an offender not listed (or grown past its length) fails the test.
    static let allowed: [String: Int] = [:]

    /// One function's extent in a file.
    struct Function: Equatable {
        var name: String
        var line: Int
        var length: Int
    }

    /// A declaration that has a body: `func`, `init`, `deinit` or `subscript`, after any attributes
    /// and modifiers.
    nonisolated(unsafe) static let declaration = try! Regex(
        #"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|static|class|final|override|mutating|nonmutating|nonisolated|convenience|required|dynamic|borrowing|consuming)(?:\([^)]*\))?\s+)*((?:func\s+[^\s(<]+)|init[?!]?|deinit|subscript)(?=[\s(<{])"#
    )
    /// A line that starts another declaration: a requirement without a body ended before it.
    nonisolated(unsafe) static let nextDeclaration = try! Regex(
        #"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|static|class|final|override|mutating|nonisolated)\s+)*(?:func|var|let|init|subscript|case|typealias|associatedtype|deinit)\b"#
    )

    /// Every function of `source` that has a body, with its length in lines.
    static func functions(in source: SwiftSourceText) -> [Function] {
        let lines = source.codeLines.map { Array($0) }
        var found: [Function] = []
        for (index, line) in source.codeLines.enumerated() {
            guard let match = line.firstMatch(of: declaration), let name = match.output[1].substring,
                let start = match.output[1].range?.lowerBound
            else { continue }
            let column = line.distance(from: line.startIndex, to: start)
            guard let open = bodyStart(lines, line: index, column: column),
                let close = closingBrace(lines, from: open)
            else { continue }
            found.append(Function(name: String(name), line: index + 1, length: close - index + 1))
        }
        return found
    }

    /// The line and column of the `{` that opens the body of the declaration at `line`/`column`,
    /// outside its parameters; nil for a requirement without a body.
    static func bodyStart(_ lines: [[Character]], line: Int, column: Int) -> (line: Int, column: Int)? {
        var depth = 0
        var row = line
        var col = column
        while row < lines.count {
            if row > line, depth == 0, String(lines[row]).firstMatch(of: nextDeclaration) != nil { return nil }
            while col < lines[row].count {
                switch lines[row][col] {
                case "(", "[": depth += 1
                case ")", "]": depth -= 1
                case "{" where depth == 0: return (row, col)
                case "}" where depth == 0: return nil
                default: break
                }
                col += 1
            }
            row += 1
            col = 0
        }
        return nil
    }

    /// The line of the `}` that closes the brace at `open`.
    static func closingBrace(_ lines: [[Character]], from open: (line: Int, column: Int)) -> Int? {
        var depth = 0
        var col = open.column
        for row in open.line..<lines.count {
            while col < lines[row].count {
                if lines[row][col] == "{" { depth += 1 }
                if lines[row][col] == "}" {
                    depth -= 1
                    if depth == 0 { return row }
                }
                col += 1
            }
            col = 0
        }
        return nil
    }

    /// Every offender over Sources: files past `fileLimit` and functions past `functionLimit`, as
    /// "path" or "path:name" with the length.
    static func offenders() throws -> [String: Int] {
        let root = DeployFiles.root + "/Sources"
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [:] }
        var offenders: [String: Int] = [:]
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let path = "Sources/" + relative
            let text = try String(contentsOfFile: root + "/" + relative, encoding: .utf8)
            let source = SwiftSourceText(text)
            let lineCount = source.codeLines.count - (text.hasSuffix("\n") ? 1 : 0)
            if lineCount > fileLimit { offenders[path] = lineCount }
            for function in functions(in: source) where function.length > functionLimit {
                offenders["\(path):\(function.name)@\(function.line)", default: 0] = function.length
            }
        }
        return offenders
    }

    @Test("no file in Sources is over 400 lines and no function over 80, beyond the listed ones")
    func sourcesStayWithinTheLimits() throws {
        let offenders = try Self.offenders()
        let unlisted = offenders.filter { key, length in
            let listedKey = Self.allowed.keys.first { key == $0 || key.hasPrefix($0 + "@") }
            return listedKey.map { length > Self.allowed[$0] ?? 0 } ?? true
        }
        #expect(
            unlisted.isEmpty,
            "\(unlisted.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value) lines" }.joined(separator: "\n"))")
    }

    @Test("functions are measured from their declaration to their closing brace, ignoring strings and comments")
    func functionsAreMeasured() {
        let source = SwiftSourceText(
            """
            protocol P {
                func requirement() throws
                var x: Int { get }
            }
            struct S {
                /// A doc comment with a } brace.
                public init(a: Int = { 1 }()) {
                    let text = "a } brace \\(a.description) and { another"
                    _ = text
                }
                @discardableResult
                static func long<T>(
                    _ value: T
                ) -> String where T: Sendable {
                    let multi = \"""
                        } unbalanced {
                        \"""
                    /* } */
                    return multi
                }
            }
            """)
        #expect(
            Self.functions(in: source) == [
                Function(name: "init", line: 7, length: 4), Function(name: "func long", line: 12, length: 9),
            ])
    }
}
