import Foundation
import Testing

@testable import RenewalCore

/// `Timestamp` (RFC 3339, the contract's JSON) and `AppleDateFormat` (Apple's wire dates).
@Suite struct DateFormatTests {
    @Test(
        "Timestamps are written in UTC with milliseconds only when there are some",
        arguments: [
            (1_700_000_000.0, "2023-11-14T22:13:20Z"),
            (1_700_000_000.123, "2023-11-14T22:13:20.123Z"),
            (1_700_000_000.5, "2023-11-14T22:13:20.500Z"),
            (1_700_000_000.007, "2023-11-14T22:13:20.007Z"),
            (0, "1970-01-01T00:00:00Z"),
            (-0.5, "1969-12-31T23:59:59.500Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (4_102_444_799, "2099-12-31T23:59:59Z"),
        ] as [(Double, String)]
    )
    func timestampString(seconds: Double, expected: String) {
        #expect(Timestamp.string(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test(
        "A timestamp round-trips through its RFC 3339 string to the millisecond",
        arguments: [
            1_700_000_000.0, 1_700_000_000.123, 1_606_293_062.999, 0, -0.5, -86_400 * 365.25 * 30, 951_782_400,
            4_102_444_799.001,
        ])
    func timestampRoundTrip(seconds: Double) throws {
        let date = Date(timeIntervalSince1970: seconds)

        let parsed = try #require(Timestamp.date(Timestamp.string(date)))

        #expect(AppleDateFormat.milliseconds(parsed) == AppleDateFormat.milliseconds(date))
        #expect(Timestamp.string(parsed) == Timestamp.string(date))
    }

    @Test(
        "RFC 3339 strings with offsets and fractions are read as the same instant",
        arguments: [
            ("2023-11-14T22:13:20Z", 1_700_000_000.0),
            ("2023-11-14t22:13:20z", 1_700_000_000.0),
            ("2023-11-15T00:13:20+02:00", 1_700_000_000.0),
            ("2023-11-14T17:13:20-05:00", 1_700_000_000.0),
            ("2023-11-14T22:13:20.250Z", 1_700_000_000.25),
            ("2023-11-14T22:13:20.5+00:00", 1_700_000_000.5),
            (" 2023-11-14T22:13:20Z ", 1_700_000_000.0),
        ] as [(String, Double)]
    )
    func timestampParsing(text: String, seconds: Double) throws {
        let date = try #require(Timestamp.date(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_5)
    }

    @Test(
        "Text that is not RFC 3339 is not a timestamp",
        arguments: [
            "", "yesterday", "2023-11-14", "2023-11-14 22:13:20", "2023-11-14T22:13:20", "2023-13-14T22:13:20Z",
            "2023-11-14T25:13:20Z", "2023-02-29T22:13:20Z", "2023-11-14T22:60:20Z", "2023-11-14T22:13:20+02",
            "2023-11-14T22:13:20Zjunk", "2023-1-14T22:13:20Z", "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20+0200",
            "2020-10-07 11:06:58 Etc/GMT",
        ])
    func timestampRejects(text: String) {
        #expect(Timestamp.date(text) == nil)
    }

    @Test("Apple's GMT form is parsed exactly")
    func appleGMT() throws {
        let date = try #require(AppleDateFormat.date(gmt: "2020-10-07 11:06:58 Etc/GMT"))

        #expect(date == Date(timeIntervalSince1970: 1_602_068_818))
        #expect(AppleDateFormat.milliseconds(date) == 1_602_068_818_000)
        #expect(AppleDateFormat.gmtString(date) == "2020-10-07 11:06:58 Etc/GMT")
        #expect(AppleDateFormat.pacificString(date) == "2020-10-07 04:06:58 America/Los_Angeles")
        #expect(Timestamp.string(date) == "2020-10-07T11:06:58Z")
    }

    @Test(
        "The GMT form accepts its UTC spellings and rejects other zones and impossible values",
        arguments: [
            ("2020-10-07 11:06:58 Etc/GMT", true), ("2020-10-07 11:06:58 GMT", true), ("2020-10-07 11:06:58 UTC", true),
            ("2020-10-07 11:06:58 Etc/UTC", true), ("2020-10-07 11:06:58", true),
            ("2020-10-07 04:06:58 America/Los_Angeles", false), ("2020-10-07T11:06:58Z", false), ("2020-10-07", false),
            ("2020-00-07 11:06:58 Etc/GMT", false), ("2020-10-32 11:06:58 Etc/GMT", false),
            ("2020-10-07 24:00:00 Etc/GMT", false),
            ("2020-10-07 11:60:00 Etc/GMT", false), ("1602068818000", false), ("2019-02-29 11:06:58 Etc/GMT", false),
            ("2020-10-07 11:06:58 Etc/GMT junk", false), ("2020-10-7 11:06:58 Etc/GMT", false),
        ] as [(String, Bool)])
    func appleGMTForms(text: String, valid: Bool) {
        let date = AppleDateFormat.date(gmt: text)
        #expect((date != nil) == valid)
        if valid { #expect(date == Date(timeIntervalSince1970: 1_602_068_818)) }
    }

    @Test(
        "Millisecond strings are read, with fractions, and nothing else is",
        arguments: [
            ("1602068818000", 1_602_068_818.0 as Double?), ("1697679936049.7297", 1_697_679_936.0497297),
            (" 1602068818000 ", 1_602_068_818),
            ("0", 0), ("", nil), ("-1000", nil), ("1e12", nil), ("12ab", nil), ("2020-10-07 11:06:58 Etc/GMT", nil),
        ] as [(String, Double?)])
    func appleMilliseconds(text: String, seconds: Double?) {
        let date = AppleDateFormat.date(milliseconds: text)
        if let seconds {
            #expect(abs((date?.timeIntervalSince1970 ?? .nan) - seconds) < 0.000_001)
        } else {
            #expect(date == nil)
        }
    }

    @Test(
        "Pacific time follows US daylight saving on both sides of each switch",
        arguments: [
            // 2023-03-12 09:59:59 UTC = 01:59:59 PST; one second later it is 03:00:00 PDT.
            (1_678_615_199.0, "2023-03-12 01:59:59 America/Los_Angeles"),
            (1_678_615_200, "2023-03-12 03:00:00 America/Los_Angeles"),
            // 2023-11-05 08:59:59 UTC = 01:59:59 PDT; one second later it is 01:00:00 PST.
            (1_699_174_799, "2023-11-05 01:59:59 America/Los_Angeles"),
            (1_699_174_800, "2023-11-05 01:00:00 America/Los_Angeles"),
            (1_700_000_000, "2023-11-14 14:13:20 America/Los_Angeles"),
        ] as [(Double, String)])
    func pacific(seconds: Double, expected: String) {
        #expect(AppleDateFormat.pacificString(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test(
        "Pacific time is PDT (-07:00) in summer and PST (-08:00) in winter, switching on 2026's dates",
        arguments: [
            (1_782_907_200.0, "2026-07-01 05:00:00 America/Los_Angeles"),  // 2026-07-01 12:00:00Z, PDT
            (1_796_130_000, "2026-12-01 05:00:00 America/Los_Angeles"),  // 2026-12-01 13:00:00Z, PST
            (1_772_963_999, "2026-03-08 01:59:59 America/Los_Angeles"),  // then 03:00:00 PDT
            (1_772_964_000, "2026-03-08 03:00:00 America/Los_Angeles"),
            (1_793_523_599, "2026-11-01 01:59:59 America/Los_Angeles"),  // then 01:00:00 PST
            (1_793_523_600, "2026-11-01 01:00:00 America/Los_Angeles"),
        ] as [(Double, String)])
    func pacific2026(seconds: Double, expected: String) {
        #expect(AppleDateFormat.pacificString(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test("Apple's GMT strings agree with Foundation's Gregorian calendar and round-trip, from 1600 to 3065")
    func gmtStringsAcrossCenturies() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        for days in stride(from: -135_000, through: 400_000, by: 997) {  // 1600 to 3065
            let date = Date(timeIntervalSince1970: Double(days) * 86_400 + 45_296)  // 12:34:56
            let text = AppleDateFormat.gmtString(date)
            let c = calendar.dateComponents([.year, .month, .day], from: date)
            let expected = String(format: "%04d-%02d-%02d 12:34:56 Etc/GMT", c.year ?? 0, c.month ?? 0, c.day ?? 0)
            #expect(text == expected, "day \(days)")
            #expect(AppleDateFormat.date(gmt: text) == date, "day \(days)")
        }
    }
}
