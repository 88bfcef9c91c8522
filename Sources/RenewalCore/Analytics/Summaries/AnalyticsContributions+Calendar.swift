import Foundation

/// `BillingPeriod.advance` by arithmetic on days: retention rows move a start on by 12 periods of each
/// of six lengths for every subscription, and the calendar's `date(byAdding:)` was most of their cost.
/// Equal to the calendar (UTC Gregorian: a month from January 31 is February 28, the time of day kept)
/// for every date from 1900 to 2999 (`CalendarArithmeticTests` compares them); other dates ask the calendar.
extension AnalyticsContributions {
    /// 1900-01-01 and 3000-01-01 (UTC), the range the arithmetic is used in.
    static let arithmeticRange: Range<TimeInterval> = -2_208_988_800..<32_503_680_000

    /// `period.advance(date, by: count)`.
    static func advance(_ date: Date, by count: Int, _ period: BillingPeriod) -> Date {
        let months: Int
        switch period {
        case .week: return period.advance(date, by: count)
        case .month: months = count
        case .twoMonths: months = 2 * count
        case .threeMonths: months = 3 * count
        case .sixMonths: months = 6 * count
        case .year: months = 12 * count
        }
        guard arithmeticRange.contains(date.timeIntervalSince1970), abs(months) <= 12_000 else {
            return period.advance(date, by: count)
        }
        let days = Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
        let (year, month, day) = civil(fromDays: days)
        let total = year * 12 + (month - 1) + months
        let newYear = total >= 0 ? total / 12 : (total - 11) / 12
        let newMonth = total - newYear * 12 + 1
        let monthStart = Self.days(fromYear: newYear, month: newMonth, day: 1)
        let nextMonthStart =
            newMonth == 12
            ? Self.days(fromYear: newYear + 1, month: 1, day: 1)
            : Self.days(fromYear: newYear, month: newMonth + 1, day: 1)
        let newDay = min(day, nextMonthStart - monthStart)
        return date.addingTimeInterval(Double(monthStart + newDay - 1 - days) * 86_400)
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
