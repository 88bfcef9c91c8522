import Foundation
import Synchronization

/// A run's id: a time-ordered UUID (version 7), lowercased. Its first 48 bits are the wall clock's
/// milliseconds when the run began, never the run's own clock (which `--now` or the demo's simulated days
/// may stand still), and one process never hands out the same millisecond twice. Runs that share a start
/// time therefore sort by id in the order they really began, which is how `renewal report` breaks ties.
public enum RunIdentifier {
    private static let last = Mutex<UInt64>(0)

    /// A new id, later (as text) than every id this process made before.
    public static func next(wallClock: Date = Date()) -> String {
        let now = UInt64(max(0, (wallClock.timeIntervalSince1970 * 1000).rounded(.down)))
        let milliseconds = last.withLock { last in
            last = max(now, last + 1)
            return last
        }
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index))) }
        var random = SystemRandomNumberGenerator()
        for index in 6..<16 { bytes[index] = random.next() }
        bytes[6] = 0x70 | (bytes[6] & 0x0F)  // version 7
        bytes[8] = 0x80 | (bytes[8] & 0x3F)  // RFC 9562 variant
        let hex = Array(bytes.map { String(format: "%02x", $0) }.joined())
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(hex[$0]) }.joined(separator: "-")
    }
}
