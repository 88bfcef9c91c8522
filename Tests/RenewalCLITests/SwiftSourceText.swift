import Foundation

/// A Swift source file as the shape tests read it: its lines with the insides of string literals and
/// all comments blanked to spaces, so an `import` or a brace in a string, a doc comment or a test's
/// embedded Python is never taken for code. Not a parser: interpolations are followed (their code is
/// kept), raw strings (`#"…"#`) and multi-line strings (`"""`) are known; regex literals are not.
struct SwiftSourceText {
    /// The file's lines with literals and comments blanked; as many as the file has.
    let codeLines: [String]

    init(_ text: String) {
        var lexer = Lexer()
        codeLines = text.split(separator: "\n", omittingEmptySubsequences: false).map { lexer.code(of: Array($0)) }
    }

    init(contentsOfFile path: String) throws {
        self.init(try String(contentsOfFile: path, encoding: .utf8))
    }

    /// The lexer's state carried from one line to the next.
    private struct Lexer {
        /// What the lexer is inside, innermost last.
        enum Context {
            /// A string literal: multi-line or not, with its raw delimiter's `#` count.
            case string(multiline: Bool, hashes: Int)
            /// Code inside `\( … )` of a string, with its open parentheses.
            case interpolation(depth: Int)
            /// A block comment, nested as deep as the count.
            case blockComment(depth: Int)
        }
        var stack: [Context] = []

        mutating func code(of line: [Character]) -> String {
            // A single-line string cannot span lines: one left open is dropped at the line's end.
            defer { dropOpenSingleLineStrings() }
            var output = ""
            var index = 0
            while index < line.count {
                let (emitted, next) = step(line, at: index)
                output += emitted
                index = next
            }
            return output
        }

        private mutating func dropOpenSingleLineStrings() {
            while let last = stack.last {
                switch last {
                case .string(multiline: false, _), .interpolation:
                    stack.removeLast()
                default:
                    return
                }
            }
        }

        /// Reads from `index`: returns what it stands for in code and where to read next.
        private mutating func step(_ line: [Character], at index: Int) -> (String, Int) {
            switch stack.last {
            case .blockComment(let depth):
                if starts(line, index, "*/") {
                    stack.removeLast()
                    if depth > 1 { stack.append(.blockComment(depth: depth - 1)) }
                    return ("  ", index + 2)
                }
                if starts(line, index, "/*") {
                    stack.removeLast()
                    stack.append(.blockComment(depth: depth + 1))
                    return ("  ", index + 2)
                }
                return (" ", index + 1)
            case .string(let multiline, let hashes):
                return stringStep(line, at: index, multiline: multiline, hashes: hashes)
            case .interpolation(let depth):
                if line[index] == ")" {
                    stack.removeLast()
                    if depth > 0 {
                        stack.append(.interpolation(depth: depth - 1))
                        return (")", index + 1)
                    }
                    return (" ", index + 1)
                }
                if line[index] == "(" {
                    stack.removeLast()
                    stack.append(.interpolation(depth: depth + 1))
                    return ("(", index + 1)
                }
                return codeStep(line, at: index)
            case nil:
                return codeStep(line, at: index)
            }
        }

        private mutating func codeStep(_ line: [Character], at index: Int) -> (String, Int) {
            if starts(line, index, "//") {
                return (String(repeating: " ", count: line.count - index), line.count)
            }
            if starts(line, index, "/*") {
                stack.append(.blockComment(depth: 1))
                return ("  ", index + 2)
            }
            var hashes = 0
            while index + hashes < line.count, line[index + hashes] == "#" { hashes += 1 }
            if index + hashes < line.count, line[index + hashes] == "\"" {
                let multiline = starts(line, index + hashes, "\"\"\"")
                stack.append(.string(multiline: multiline, hashes: hashes))
                let length = hashes + (multiline ? 3 : 1)
                return (String(repeating: "\"", count: length), index + length)
            }
            return (String(line[index]), index + 1)
        }

        private mutating func stringStep(
            _ line: [Character], at index: Int, multiline: Bool, hashes: Int
        ) -> (String, Int) {
            let delimiter = String(repeating: "\"", count: multiline ? 3 : 1) + String(repeating: "#", count: hashes)
            if starts(line, index, delimiter) {
                stack.removeLast()
                return (String(repeating: "\"", count: delimiter.count), index + delimiter.count)
            }
            let escape = "\\" + String(repeating: "#", count: hashes)
            if starts(line, index, escape) {
                let after = index + escape.count
                if after < line.count, line[after] == "(" {
                    stack.append(.interpolation(depth: 0))
                    return (String(repeating: " ", count: escape.count + 1), after + 1)
                }
                // An escaped character: skipped with its backslash.
                return (String(repeating: " ", count: min(escape.count + 1, line.count - index)), after + 1)
            }
            return (" ", index + 1)
        }

        private func starts(_ line: [Character], _ index: Int, _ text: String) -> Bool {
            let characters = Array(text)
            guard index + characters.count <= line.count else { return false }
            return Array(line[index..<index + characters.count]) == characters
        }
    }
}
