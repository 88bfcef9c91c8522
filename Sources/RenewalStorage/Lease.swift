import Foundation

/// A claim on receipts by one worker, until it expires.
public struct Lease: Sendable, Hashable {
    public var owner: String
    public var until: Date
    /// Leases that ended at or before this instant are free to take.
    public var now: Date

    public init(owner: String, until: Date, now: Date) {
        self.owner = owner
        self.until = until
        self.now = now
    }
}
