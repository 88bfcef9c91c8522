import Foundation

/// A coding key for Apple's snake_case (and occasionally hyphenated) field names.
struct AppleKey: CodingKey, Hashable {
    var stringValue: String
    var intValue: Int? { nil }

    init(_ name: String) {
        self.stringValue = name
    }

    init?(stringValue: String) {
        self.stringValue = stringValue
    }

    init?(intValue: Int) {
        return nil
    }
}

/// Apple sends numbers and booleans as strings ("1", "true"), sometimes as JSON numbers, and dates as
/// triples (`x`, `x_ms`, `x_pst`). These helpers accept every shape seen in real answers.
extension KeyedDecodingContainer where Key == AppleKey {
    /// A string field that may arrive as a JSON string or number.
    func appleString(_ name: String) throws -> String? {
        let key = AppleKey(name)
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let string = try? decode(String.self, forKey: key) { return string }
        if let integer = try? decode(Int64.self, forKey: key) { return String(integer) }
        if let double = try? decode(Double.self, forKey: key) { return String(double) }
        if let bool = try? decode(Bool.self, forKey: key) { return bool ? "true" : "false" }
        throw DecodingError.typeMismatch(
            String.self,
            .init(codingPath: codingPath + [key], debugDescription: "Expected a string or number for \(name).")
        )
    }

    /// A flag sent as "true"/"false", "1"/"0", a JSON boolean or a JSON number.
    func appleBool(_ name: String) throws -> Bool? {
        let key = AppleKey(name)
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let bool = try? decode(Bool.self, forKey: key) { return bool }
        if let integer = try? decode(Int.self, forKey: key) { return integer != 0 }
        if let string = try? decode(String.self, forKey: key) {
            switch string.lowercased() {
            case "true", "1": return true
            case "false", "0", "": return false
            default: break
            }
        }
        throw DecodingError.dataCorruptedError(
            forKey: key, in: self, debugDescription: "Expected a boolean flag for \(name).")
    }

    /// A date sent as a triple: `name_ms` (preferred, as Apple advises), or `name` holding either
    /// milliseconds (iOS 6 answers) or `yyyy-MM-dd HH:mm:ss Etc/GMT`. A null `name_ms` falls back
    /// to `name`; an unreadable one fails (the error's path names it) rather than guess.
    func appleDate(_ name: String) throws -> Date? {
        if let milliseconds = try appleString(name + "_ms") {
            guard let date = AppleDateFormat.date(milliseconds: milliseconds), AppleDateFormat.plausible.contains(date) else {
                throw DecodingError.dataCorruptedError(
                    forKey: AppleKey(name + "_ms"), in: self,
                    debugDescription: "Expected milliseconds since 1970, between 2000 and 2100, for \(name)_ms.")
            }
            return date
        }
        guard let text = try appleString(name) else { return nil }
        if let date = AppleDateFormat.date(milliseconds: text) ?? AppleDateFormat.date(gmt: text), AppleDateFormat.plausible.contains(date) {
            return date
        }
        throw DecodingError.dataCorruptedError(
            forKey: AppleKey(name), in: self, debugDescription: "Unreadable date for \(name) (milliseconds or yyyy-MM-dd HH:mm:ss Etc/GMT, between 2000 and 2100).")
    }
}

extension KeyedEncodingContainer where Key == AppleKey {
    mutating func encodeApple(_ value: String?, _ name: String) throws {
        if let value { try encode(value, forKey: AppleKey(name)) }
    }

    /// Transaction flags are "true"/"false" strings.
    mutating func encodeAppleTrueFalse(_ value: Bool?, _ name: String) throws {
        if let value { try encode(value ? "true" : "false", forKey: AppleKey(name)) }
    }

    /// Renewal flags are "1"/"0" strings.
    mutating func encodeAppleOneZero(_ value: Bool?, _ name: String) throws {
        if let value { try encode(value ? "1" : "0", forKey: AppleKey(name)) }
    }

    /// Encodes the triple `name`, `name_ms`, `name_pst` as Apple does.
    mutating func encodeAppleDate(_ value: Date?, _ name: String) throws {
        guard let value else { return }
        try encode(AppleDateFormat.gmtString(value), forKey: AppleKey(name))
        try encode(String(AppleDateFormat.milliseconds(value)), forKey: AppleKey(name + "_ms"))
        try encode(AppleDateFormat.pacificString(value), forKey: AppleKey(name + "_pst"))
    }
}

