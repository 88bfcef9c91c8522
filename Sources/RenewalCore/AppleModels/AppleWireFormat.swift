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
