import Foundation

/// RFC 3339 timestamps in UTC, as the contract's JSON uses them (`2024-05-01T12:00:00Z`, with
/// milliseconds only when there are some).
public enum Timestamp {
    public static func string(_ date: Date) -> String {
        let milliseconds = AppleDateFormat.milliseconds(date)
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = Int(milliseconds - seconds * 1000)
        let civil = AppleDateFormat.gmtString(Date(timeIntervalSince1970: TimeInterval(seconds)))
        let base = String(civil.prefix(19)).replacingOccurrences(of: " ", with: "T")
        if fraction == 0 { return base + "Z" }
        let padded = String(1000 + fraction).dropFirst()
        return base + "." + padded + "Z"
    }

    /// Parses RFC 3339 (`Z` or `±hh:mm` offsets, optional fraction).
    public static func date(_ text: String) -> Date? {
        var text = Substring(text.trimmingCharacters(in: .whitespaces))
        guard text.count >= 20 else { return nil }
        var offsetSeconds = 0
        if text.hasSuffix("Z") || text.hasSuffix("z") {
            text = text.dropLast()
        } else {
            let zone = text.suffix(6)
            let sign = zone.first
            let hm = zone.dropFirst().split(separator: ":").compactMap { Int($0) }
            guard sign == "+" || sign == "-", hm.count == 2 else { return nil }
            offsetSeconds = (hm[0] * 3600 + hm[1] * 60) * (sign == "-" ? -1 : 1)
            text = text.dropLast(6)
        }
        let halves = text.split(maxSplits: 1, whereSeparator: { $0 == "T" || $0 == "t" })
        guard halves.count == 2 else { return nil }
        var clock = halves[1]
        var fraction = 0.0
        if let dot = clock.firstIndex(of: ".") {
            guard let value = Double("0" + clock[dot...]) else { return nil }
            fraction = value
            clock = clock[..<dot]
        }
        guard let base = AppleDateFormat.date(gmt: "\(halves[0]) \(clock)") else { return nil }
        return base.addingTimeInterval(fraction - TimeInterval(offsetSeconds))
    }
}
