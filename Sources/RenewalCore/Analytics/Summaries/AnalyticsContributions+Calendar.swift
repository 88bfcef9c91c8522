import Foundation

/// `BillingPeriod.advance` of one start by arithmetic on days: retention rows move a start on by 12
/// periods of each of six lengths for every subscription, and the calendar's `date(byAdding:)` was most
/// of their cost. Equal to the calendar (UTC Gregorian: a month from January 31 is February 28, the time
/// of day kept) for every date from 1900 to 2999 (`ContributionFastPathTests` compares them); other
/// dates ask the calendar.
struct PeriodArithmetic {
    /// 1900-01-01 and 3000-01-01 (UTC), the range the arithmetic is used in.
    static let arithmeticRange: Range<TimeInterval> = -2_208_988_800..<32_503_680_000

    let start: Date
    /// The start's day (since 1970-01-01) and its civil date; nil outside `arithmeticRange`.
    private let civil: (days: Int, year: Int, month: Int, day: Int)?

    init(_ start: Date) {
        self.start = start
        guard Self.arithmeticRange.contains(start.timeIntervalSince1970) else {
            civil = nil
            return
        }
        let days = Int((start.timeIntervalSince1970 / 86_400).rounded(.down))
        let (year, month, day) = AnalyticsContributions.civil(fromDays: days)
        civil = (days, year, month, day)
    }

    /// `period.advance(start, by: count)`.
    func advance(by count: Int, _ period: BillingPeriod) -> Date {
        let months: Int
        switch period {
        case .week: return period.advance(start, by: count)
        case .month: months = count
        case .twoMonths: months = 2 * count
        case .threeMonths: months = 3 * count
        case .sixMonths: months = 6 * count
        case .year: months = 12 * count
        }
        guard let civil, abs(months) <= 12_000 else { return period.advance(start, by: count) }
        let total = civil.year * 12 + (civil.month - 1) + months
        let year = total >= 0 ? total / 12 : (total - 11) / 12
        let month = total - year * 12 + 1
        let monthStart = AnalyticsContributions.days(fromYear: year, month: month, day: 1)
        let length = month == 2 ? (Self.isLeap(year) ? 29 : 28) : Self.lengths[month - 1]
        let day = min(civil.day, length)
        return start.addingTimeInterval(Double(monthStart + day - 1 - civil.days) * 86_400)
    }

    private static let lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

    private static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }
}

extension AnalyticsContributions {
    /// `period.advance(date, by: count)` (`PeriodArithmetic`).
    static func advance(_ date: Date, by count: Int, _ period: BillingPeriod) -> Date {
        PeriodArithmetic(date).advance(by: count, period)
    }

    /// The (year, month 1–12, day 1–31) of a count of days since 1970-01-01 (Hinnant's civil-from-days).
    static func civil(fromDays count: Int) -> (year: Int, month: Int, day: Int) {
        let z = count + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days since 1970-01-01 of a civil date (Hinnant's days-from-civil).
    static func days(fromYear civilYear: Int, month: Int, day: Int) -> Int {
        let year = civilYear - (month <= 2 ? 1 : 0)
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
