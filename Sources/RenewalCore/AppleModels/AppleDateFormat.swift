import Foundation

/// Date conversions for Apple's wire formats, through Foundation's formatters (the tz database
/// handles Pacific daylight time). Apple advises reading the `_ms` fields; the string forms are a
/// fallback and what the simulator writes beside them.
public enum AppleDateFormat {
    /// The times an Apple answer can hold: from 2000 (before the App Store opened) to 2100. A date
    /// outside is not a date Apple sent but garbage (`0`, `-1`, `1e300`, a year past 9999): the
    /// answer decoder refuses it, so the check fails instead of granting or ending a subscription.
    public static let plausible = Date(timeIntervalSince1970: 946_684_800)...Date(timeIntervalSince1970: 4_102_444_800)

    /// Milliseconds since 1970, as Apple counts them (clamped to the Int64 range, so no date traps).
    public static func milliseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard value.isFinite else { return value < 0 ? .min : .max }
        if value >= 9_223_372_036_854_775_807 { return .max }
        if value <= -9_223_372_036_854_775_808 { return .min }
        return Int64(value)
    }

    public static func date(milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Parses a decimal millisecond string ("1700000000000"; Xcode sends fractions).
    static func date(milliseconds text: String) -> Date? {
        // What Apple sends: plain digits. Read them directly; anything else takes the careful path.
        if let value = text.utf8.withContiguousStorageIfAvailable(wholeMilliseconds).flatMap({ $0 }) {
            return Date(timeIntervalSince1970: Double(value) / 1000)
        }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let value = Double(trimmed), value.isFinite
        else { return nil }
        return Date(timeIntervalSince1970: value / 1000)
    }

    /// 1 to 15 ASCII digits (up to year 33658), as an integer; nil for anything else.
    private static func wholeMilliseconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard (1...15).contains(bytes.count) else { return nil }
        var value: Int64 = 0
        for byte in bytes {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value * 10 + Int64(digit)
        }
        return value
    }

    /// `yyyy-MM-dd HH:mm:ss` in UTC: Foundation's ISO 8601 style with a space between date and time.
    static let civil = Date.ISO8601FormatStyle(dateTimeSeparator: .space, timeZone: .gmt).year().month().day()
        .time(includingFractionalSeconds: false)

    /// Parses `yyyy-MM-dd HH:mm:ss Etc/GMT` (also `UTC`, `GMT`, `Etc/UTC` or no zone, all meaning UTC).
    static func date(gmt text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 2 || parts.count == 3 else { return nil }
        if parts.count == 3, !["Etc/GMT", "GMT", "UTC", "Etc/UTC"].contains(String(parts[2])) { return nil }
        return strictCivil("\(parts[0]) \(parts[1])")
    }

    /// `yyyy-MM-dd HH:mm:ss` in UTC, refusing out-of-range fields (Foundation's parser would roll
    /// `24:00:00` or `11:60:00` over): the date must format back to the same text.
    static func strictCivil(_ text: String) -> Date? {
        guard let date = try? Date(text, strategy: civil), date.formatted(civil) == text else { return nil }
        return date
    }

    /// `yyyy-MM-dd HH:mm:ss Etc/GMT`.
    static func gmtString(_ date: Date) -> String {
        wholeSeconds(date).formatted(civil) + " Etc/GMT"
    }

    /// The same instant in Apple's `_pst` form, `yyyy-MM-dd HH:mm:ss America/Los_Angeles`, with the
    /// offset the tz database gives for that instant (PST or PDT).
    static func pacificString(_ date: Date) -> String {
        let pacific = TimeZone(identifier: "America/Los_Angeles") ?? TimeZone(secondsFromGMT: -8 * 3600) ?? .gmt
        let local = wholeSeconds(date).addingTimeInterval(TimeInterval(pacific.secondsFromGMT(for: date)))
        return local.formatted(civil) + " America/Los_Angeles"
    }

    /// `date` truncated to the whole second (Apple's strings carry no fraction).
    private static func wholeSeconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }
}
