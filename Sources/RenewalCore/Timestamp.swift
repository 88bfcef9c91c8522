import Foundation

/// RFC 3339 timestamps in UTC, as the contract's JSON uses them (`2024-05-01T12:00:00Z`, with
/// milliseconds only when there are some), through Foundation's ISO 8601 format styles.
public enum Timestamp {
    private static let whole = Date.ISO8601FormatStyle(timeZone: .gmt)
    private static let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)

    public static func string(_ date: Date) -> String {
        let milliseconds = AppleDateFormat.milliseconds(date)
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = Int(milliseconds - seconds * 1000)
        let base = Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(whole)
        guard fraction != 0 else { return base }
        // The fraction is written from the integer milliseconds, so binary rounding cannot show.
        return base.dropLast() + "." + String(String(1000 + fraction).dropFirst()) + "Z"
    }

    /// Parses RFC 3339 (`Z` or `±hh:mm` offsets, optional fraction, either case of `T` and `Z`).
    public static func date(_ text: String) -> Date? {
        let text = text.trimmingCharacters(in: .whitespaces).uppercased()
        // The shape first (Foundation's parser also takes `+0200`), then every field in range.
        guard text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})/) != nil,
            AppleDateFormat.strictCivil(text.prefix(19).replacingOccurrences(of: "T", with: " ")) != nil
        else { return nil }
        return (try? Date(text, strategy: whole)) ?? (try? Date(text, strategy: fractional))
    }
}
