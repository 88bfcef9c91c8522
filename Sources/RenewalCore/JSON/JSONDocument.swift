/// A parsed JSON text kept as its bytes plus a flat list of nodes (a "tape"): one node per value,
/// in document order, each knowing the byte range of its text and where its subtree ends.
///
/// Nothing is converted while parsing: strings stay bytes until a reader asks for one, numbers stay
/// digits. Readers of Apple's answers and of import lines look up the few fields they use, so a
/// 5 KB answer costs one pass over its bytes and a few small allocations, where Foundation's
/// `JSONDecoder` builds every string and dictionary. Parsing is iterative (no recursion), depth is
/// capped at `maximumDepth`, and the grammar is RFC 8259's, strictly: anything else is a
/// `JSONSyntaxError` naming the byte offset, never the content.
package final class JSONDocument: Sendable {
    package enum Kind: UInt8, Sendable {
        case object, array, string, number, `true`, `false`, null
    }

    struct Node: Sendable {
        var kind: Kind
        /// A string holding a backslash escape (decoded when read).
        var escaped: Bool
        /// The text: inside the quotes for strings; the whole value otherwise.
        var start: Int32
        var end: Int32
        /// The index of the first node after this value's subtree.
        var next: Int32
        /// Members of an object, elements of an array.
        var count: Int32
    }

    /// Deeper nesting is refused: no answer Apple sends comes close, and it bounds the parser's stack.
    package static let maximumDepth = 512

    let bytes: [UInt8]
    let nodes: [Node]

    /// The root value.
    package var root: JSONValue { JSONValue(document: self, index: 0) }

    package init(bytes: [UInt8]) throws(JSONSyntaxError) {
        guard bytes.count < Int(Int32.max) else { throw JSONSyntaxError(offset: 0, problem: "over 2 GB") }
        var nodes: [Node] = []
        nodes.reserveCapacity(bytes.count / 16 + 4)
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONSyntaxError) in
            var parser = JSONParser(bytes: buffer)
            try parser.parse(into: &nodes)
        }
        self.bytes = bytes
        self.nodes = nodes
    }

    package convenience init(_ bytes: some Sequence<UInt8>) throws(JSONSyntaxError) {
        try self.init(bytes: Array(bytes))
    }
}

/// Malformed JSON: where (a byte offset) and what, never the bytes themselves.
package struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    package var offset: Int
    package var problem: String
    package var description: String { "not JSON: \(problem) at byte \(offset)" }
}

/// The single-pass, non-recursive parser behind `JSONDocument`.
private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    private func fail(_ problem: String) -> JSONSyntaxError {
        JSONSyntaxError(offset: position, problem: problem)
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    mutating func parse(into nodes: inout [JSONDocument.Node]) throws(JSONSyntaxError) {
        // Open containers, innermost last: their node indexes.
        var open: [Int32] = []
        skipWhitespace()
        try value(into: &nodes, open: &open)
        while let container = open.last {
            skipWhitespace()
            guard position < bytes.count else { throw fail("cut short inside a container") }
            let isObject = nodes[Int(container)].kind == .object
            let byte = bytes[position]
            if byte == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                position += 1
                close(container, in: &nodes)
                open.removeLast()
                continue
            }
            if nodes[Int(container)].count > 0 {
                guard byte == UInt8(ascii: ",") else { throw fail(isObject ? "expected , or }" : "expected , or ]") }
                position += 1
                skipWhitespace()
            }
            nodes[Int(container)].count += 1
            if isObject {
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                    throw fail("expected a member name")
                }
                try string(into: &nodes)
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw fail("expected :") }
                position += 1
                skipWhitespace()
            }
            try value(into: &nodes, open: &open)
        }
        skipWhitespace()
        guard position == bytes.count else { throw fail("text after the value") }
    }

    private func close(_ container: Int32, in nodes: inout [JSONDocument.Node]) {
        nodes[Int(container)].end = Int32(position)
        nodes[Int(container)].next = Int32(nodes.count)
    }

    /// Reads one value at `position`; a container is opened (pushed) and filled by the caller's loop.
    private mutating func value(into nodes: inout [JSONDocument.Node], open: inout [Int32]) throws(JSONSyntaxError) {
        guard position < bytes.count else { throw fail("cut short where a value belongs") }
        let start = position
        switch bytes[position] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard open.count < JSONDocument.maximumDepth else {
                throw fail("nested deeper than \(JSONDocument.maximumDepth)")
            }
            let kind: JSONDocument.Kind = bytes[position] == UInt8(ascii: "{") ? .object : .array
            position += 1
            open.append(Int32(nodes.count))
            nodes.append(.init(kind: kind, escaped: false, start: Int32(start), end: 0, next: 0, count: 0))
        case UInt8(ascii: "\""):
            try string(into: &nodes)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number()
            append(.number, from: start, to: &nodes)
        case UInt8(ascii: "t"):
            try literal("true")
            append(.true, from: start, to: &nodes)
        case UInt8(ascii: "f"):
            try literal("false")
            append(.false, from: start, to: &nodes)
        case UInt8(ascii: "n"):
            try literal("null")
            append(.null, from: start, to: &nodes)
        default:
            throw fail("unexpected byte")
        }
    }

    private func append(_ kind: JSONDocument.Kind, from start: Int, to nodes: inout [JSONDocument.Node]) {
        let index = Int32(nodes.count)
        nodes.append(
            .init(kind: kind, escaped: false, start: Int32(start), end: Int32(position), next: index + 1, count: 0))
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw fail("cut short in a literal") }
        for offset in 0..<count where bytes[position + offset] != word.utf8Start[offset] {
            throw fail("unknown literal")
        }
        position += count
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() throws(JSONSyntaxError) {
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count, isDigit(bytes[position]) else { throw fail("a number without digits") }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            digits()
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard position < bytes.count, isDigit(bytes[position]) else { throw fail("a fraction without digits") }
            digits()
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                position += 1
            }
            guard position < bytes.count, isDigit(bytes[position]) else { throw fail("an exponent without digits") }
            digits()
        }
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    private mutating func digits() {
        while position < bytes.count, isDigit(bytes[position]) { position += 1 }
    }

    /// A string at `position` (its opening quote). Escapes are checked here and decoded when read;
    /// control characters are refused; UTF-8 is checked when the string is read.
    private mutating func string(into nodes: inout [JSONDocument.Node]) throws(JSONSyntaxError) {
        position += 1
        let start = position
        var escaped = false
        while true {
            guard position < bytes.count else { throw fail("cut short in a string") }
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { throw fail("a control character in a string") }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                position += 1
                guard position < bytes.count else { throw fail("cut short in an escape") }
                switch bytes[position] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    guard position + 4 < bytes.count else { throw fail("cut short in a \\u escape") }
                    for offset in 1...4 where JSONText.hexValue(bytes[position + offset]) == nil {
                        throw fail("a \\u escape without four hex digits")
                    }
                    position += 4
                default:
                    throw fail("an unknown escape")
                }
            }
            position += 1
        }
        let index = Int32(nodes.count)
        nodes.append(
            .init(kind: .string, escaped: escaped, start: Int32(start), end: Int32(position), next: index + 1, count: 0)
        )
        position += 1
    }
}

/// Decoding and encoding of string contents.
enum JSONText {
    /// Appends `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func appendQuoted(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                output.append(UInt8(ascii: "\\"))
                output.append(byte)
            case 0x0A: output.append(contentsOf: #"\n"#.utf8)
            case 0x0D: output.append(contentsOf: #"\r"#.utf8)
            case 0x09: output.append(contentsOf: #"\t"#.utf8)
            case ..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                output.append(contentsOf: #"\u00"#.utf8)
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    static func hexValue(_ byte: UInt8) -> UInt16? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt16(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt16(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt16(byte - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    /// The UTF-8 of an escaped string's contents (already checked by the parser); nil for a lone
    /// surrogate, which no valid UTF-8 can hold.
    static func unescape(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.count)
        var index = 0
        func unit(at offset: Int) -> UInt16? {
            guard offset + 4 <= text.count else { return nil }
            var value: UInt16 = 0
            for position in offset..<offset + 4 {
                guard let digit = hexValue(text[position]) else { return nil }
                value = value << 4 | digit
            }
            return value
        }
        while index < text.count {
            let byte = text[index]
            guard byte == UInt8(ascii: "\\"), index + 1 < text.count else {
                output.append(byte)
                index += 1
                continue
            }
            let code = text[index + 1]
            index += 2
            switch code {
            case UInt8(ascii: "b"): output.append(0x08)
            case UInt8(ascii: "f"): output.append(0x0C)
            case UInt8(ascii: "n"): output.append(0x0A)
            case UInt8(ascii: "r"): output.append(0x0D)
            case UInt8(ascii: "t"): output.append(0x09)
            case UInt8(ascii: "u"):
                guard let high = unit(at: index) else { return nil }
                index += 4
                var scalar = UInt32(high)
                if (0xD800..<0xDC00).contains(high) {
                    guard index + 6 <= text.count, text[index] == UInt8(ascii: "\\"),
                        text[index + 1] == UInt8(ascii: "u"),
                        let low = unit(at: index + 2), (0xDC00..<0xE000).contains(low)
                    else { return nil }
                    index += 6
                    scalar = 0x10000 + (UInt32(high - 0xD800) << 10) + UInt32(low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(high) {
                    return nil
                }
                guard let decoded = Unicode.Scalar(scalar) else { return nil }
                UTF8.encode(decoded) { output.append($0) }
            default: output.append(code)
            }
        }
        return output
    }
}
