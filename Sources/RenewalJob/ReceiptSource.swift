import Foundation
import RenewalCore
import RenewalStorage

/// Hands out the receipts a run works on, page by page (flat memory), claiming each page with a
/// lease unless the run is a dry run. Remembers claimed receipts it has not handed out yet so they
/// can be released untouched when the run stops early.
struct ReceiptSource {
    let store: any SubscriptionStore
    let selection: ReceiptSelection
    let pageSize: Int
    let leaseOwner: String?
    let leaseDuration: TimeInterval
    let now: @Sendable () -> Date
    private var remaining: Int
    private var cursor: ReceiptCursor?
    private var buffer: [StoredReceipt] = []
    private var bufferIndex = 0
    private(set) var exhausted = false

    init(
        store: any SubscriptionStore, selection: ReceiptSelection, pageSize: Int, limit: Int?,
        leaseOwner: String?, leaseDuration: TimeInterval, now: @escaping @Sendable () -> Date
    ) {
        self.store = store
        self.selection = selection
        self.pageSize = max(1, pageSize)
        self.limit = limit
        self.remaining = limit ?? Int.max
        self.leaseOwner = leaseOwner
        self.leaseDuration = leaseDuration
        self.now = now
    }

    let limit: Int?

    /// The next receipt, or nil when the selection (or the limit) is exhausted.
    mutating func next() async throws -> StoredReceipt? {
        if bufferIndex == buffer.count {
            guard !exhausted, remaining > 0 else {
                exhausted = true
                return nil
            }
            let instant = now()
            let lease = leaseOwner.map {
                Lease(owner: $0, until: instant.addingTimeInterval(leaseDuration), now: instant)
            }
            buffer = try await store.nextBatch(selection, after: cursor, limit: min(pageSize, remaining), lease: lease)
            bufferIndex = 0
            remaining -= buffer.count
            guard let last = buffer.last else {
                exhausted = true
                return nil
            }
            cursor = last.cursor
        }
        defer { bufferIndex += 1 }
        return buffer[bufferIndex]
    }

    /// Releases the leases of receipts claimed but never handed out.
    mutating func releaseUnstarted() async throws -> Int {
        let unstarted = buffer[bufferIndex...].map(\.id)
        buffer = []
        bufferIndex = 0
        if let leaseOwner, !unstarted.isEmpty {
            try await store.releaseLeases(receiptIDs: unstarted, owner: leaseOwner)
        }
        return unstarted.count
    }
}
