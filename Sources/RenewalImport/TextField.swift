/// The rules every free-text field of an import line follows, the same whatever database stores it.
/// Without them PostgreSQL refused a NUL (and with it the whole import) where SQLite cut the text at
/// the NUL, so two users could become one; and a user id longer than an index entry holds failed
/// PostgreSQL's import while SQLite stored it.
enum TextField {
    case userID
    case productID

    /// Longest value in UTF-8 bytes: far above any real id, and well under what a PostgreSQL B-tree
    /// index entry holds (about 2,700 bytes).
    var maximumBytes: Int {
        switch self {
        case .userID: 1_024
        case .productID: 255
        }
    }

    /// Why `text` breaks the rules ("holds a control character (U+0000) at character 4"), or nil.
    /// Control characters are C0 (U+0000–U+001F, tab and line breaks included), DEL and C1
    /// (U+007F–U+009F): none belongs in an id, and NUL cannot be stored by PostgreSQL at all.
    func problem(with text: String) -> String? {
        let bytes = text.utf8.count
        if bytes > maximumBytes {
            return "is \(bytes) bytes long, over the \(maximumBytes) allowed"
        }
        for (offset, scalar) in text.unicodeScalars.enumerated() where Self.isControl(scalar) {
            let code = String(scalar.value, radix: 16, uppercase: true)
            return
                "holds a control character (U+\(String(repeating: "0", count: 4 - code.count))\(code)) at character \(offset + 1)"
        }
        return nil
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}
