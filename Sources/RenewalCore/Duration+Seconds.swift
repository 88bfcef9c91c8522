/// `Duration` in the units logs, metrics and timeouts use.
extension Duration {
    /// The duration in seconds, as a floating-point number.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The duration in whole milliseconds.
    package var milliseconds: Int64 {
        Int64((seconds * 1000).rounded())
    }

    /// The duration in whole nanoseconds (saturating).
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : product &+ attoseconds / 1_000_000_000
    }
}
