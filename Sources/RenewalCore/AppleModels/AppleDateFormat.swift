import Foundation

/// Date conversions for Apple's wire formats, written out by hand so they are exact and thread-safe.
public enum AppleDateFormat {
    /// Milliseconds since 1970, as Apple counts them.
    public static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    public static func date(milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Parses a decimal millisecond string ("1700000000000"; Xcode sends fractions).
    static func date(milliseconds text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let value = Double(trimmed), value.isFinite
        else { return nil }
        return Date(timeIntervalSince1970: value / 1000)
    }

    /// Parses `yyyy-MM-dd HH:mm:ss Etc/GMT` (also accepts `UTC`/`GMT` and no zone, all meaning UTC).
    static func date(gmt text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count >= 2 else { return nil }
        if parts.count > 2, !["Etc/GMT", "GMT", "UTC", "Etc/UTC"].contains(String(parts[2])) { return nil }
        let day = parts[0].split(separator: "-").compactMap { Int($0) }
        let time = parts[1].split(separator: ":").compactMap { Int($0) }
        guard day.count == 3, time.count == 3,
            (1...12).contains(day[1]), (1...31).contains(day[2]),
            (0...23).contains(time[0]), (0...59).contains(time[1]), (0...60).contains(time[2])
        else { return nil }
        let days = daysFromCivil(year: day[0], month: day[1], day: day[2])
        let seconds = days * 86_400 + time[0] * 3600 + time[1] * 60 + time[2]
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// `yyyy-MM-dd HH:mm:ss Etc/GMT`.
    static func gmtString(_ date: Date) -> String {
        civilString(seconds: Int64(floor(date.timeIntervalSince1970))) + " Etc/GMT"
    }

    /// The same instant in Apple's `_pst` form. Pacific daylight time is approximated by the US rule
    /// (second Sunday of March to first Sunday of November); only the simulator writes this field and
    /// the job never reads it.
    static func pacificString(_ date: Date) -> String {
        let utc = Int64(floor(date.timeIntervalSince1970))
        let (year, _, _) = civil(days: Int(utc / 86_400))
        let dstStart = Int64(daysFromCivil(year: year, month: 3, day: nthSunday(year: year, month: 3, n: 2))) * 86_400 + 10 * 3600
        let dstEnd = Int64(daysFromCivil(year: year, month: 11, day: nthSunday(year: year, month: 11, n: 1))) * 86_400 + 9 * 3600
        let offset: Int64 = (utc >= dstStart && utc < dstEnd) ? -7 * 3600 : -8 * 3600
        return civilString(seconds: utc + offset) + " America/Los_Angeles"
    }

    private static func civilString(seconds: Int64) -> String {
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let rest = Int(seconds - Int64(days) * 86_400)
        let (year, month, day) = civil(days: days)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)-\(two(month))-\(two(day)) \(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60))"
    }

    private static func nthSunday(year: Int, month: Int, n: Int) -> Int {
        let first = daysFromCivil(year: year, month: month, day: 1)
        let weekday = ((first % 7) + 11) % 7  // 0 = Sunday; 1970-01-01 was a Thursday
        return 1 + (7 - weekday) % 7 + (n - 1) * 7
    }

    /// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

