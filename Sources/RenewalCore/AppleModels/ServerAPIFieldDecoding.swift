import Foundation

/// The App Store Server API's JSON, read leniently: a number may come as a string and a string as a
/// number, and a field of the wrong type reads as absent rather than failing the whole payload.
extension KeyedDecodingContainer {
    package func flexibleString(_ key: Key) -> String? {
        if let text = try? decodeIfPresent(String.self, forKey: key) { return text }
        if let number = try? decodeIfPresent(Int64.self, forKey: key) { return String(number) }
        return nil
    }

    package func flexibleInt(_ key: Key) -> Int? {
        if let number = try? decodeIfPresent(Int.self, forKey: key) { return number }
        if let text = try? decodeIfPresent(String.self, forKey: key) { return Int(text) }
        return nil
    }

    package func flexibleBool(_ key: Key) -> Bool? {
        if let flag = try? decodeIfPresent(Bool.self, forKey: key) { return flag }
        if let number = flexibleInt(key) { return number != 0 }
        if let text = try? decodeIfPresent(String.self, forKey: key) { return text == "true" }
        return nil
    }

    /// UNIX milliseconds as an integer, a fractional number or a string of digits; nil outside 2000-2100
    /// (a date there is a broken answer, not a subscription until the year 3000).
    package func milliseconds(_ key: Key) -> Date? {
        let value: Double?
        if let number = try? decodeIfPresent(Double.self, forKey: key) {
            value = number
        } else if let text = try? decodeIfPresent(String.self, forKey: key) {
            value = Double(text)
        } else {
            value = nil
        }
        guard let value, value.isFinite, (946_684_800_000...4_102_444_800_000).contains(value) else { return nil }
        return Date(timeIntervalSince1970: value / 1000)
    }
}
