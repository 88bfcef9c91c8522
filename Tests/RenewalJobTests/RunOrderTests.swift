import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

/// Runs that start at the same instant (a clock that stands still, as the demo's does, or several runs
/// within one second) are listed in the order they really began, on both databases.
@Suite("Run order: runs sharing a start time are listed as they began")
struct RunOrderTests {
    @Test(
        "runs started at the same instant come back oldest first from runs(), in pages, and lastRun() is the latest",
        arguments: Backend.available)
    func sameInstant(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // The harness's clock stands still: every run starts at the same millisecond.
            var began: [String] = []
            for _ in 0..<6 { began.append(try await h.run().runID) }
            let store = try #require(h.store as? any RunHistoryStore)
            let listed = try await store.runs(startedFrom: nil, before: nil, after: nil, limit: 100)
            #expect(Set(listed.map(\.startedAt)).count == 1, "one start time: \(listed.map(\.startedAt))")
            #expect(listed.map(\.id) == began, "listed \(listed.map(\.id)), began \(began)")
            // Keyset paging walks the same order a run at a time.
            var paged: [String] = []
            var cursor: RunRecord?
            while let next = try await store.runs(startedFrom: nil, before: nil, after: cursor, limit: 1).first {
                paged.append(next.id)
                cursor = next
            }
            #expect(paged == began)
            #expect(try await store.lastRun()?.id == began.last)
            let recent = try await store.recentRuns(upTo: h.state.now, limit: 3)
            #expect(recent.map(\.id) == Array(began.reversed().prefix(3)))
        }
    }

    @Test("run ids are version 7 UUIDs that sort in the order they were made, even when the clock stands still")
    func identifiers() throws {
        let instant = Date(timeIntervalSince1970: 1_790_000_000.25)
        let ids = (0..<50).map { _ in RunIdentifier.next(wallClock: instant) }
        #expect(ids == ids.sorted() && Set(ids).count == ids.count)
        for id in ids {
            let uuid = try #require(UUID(uuidString: id), "\(id)")
            #expect(uuid.uuidString.lowercased() == id)
            #expect(Array(id)[14] == "7", "version 7: \(id)")
        }
        // The first 48 bits are the wall clock's milliseconds (or just past them, never before).
        let before = UInt64(Date().timeIntervalSince1970 * 1000)
        let now = RunIdentifier.next()
        let milliseconds = try #require(UInt64(now.replacingOccurrences(of: "-", with: "").prefix(12), radix: 16))
        #expect(milliseconds >= before && milliseconds < before + 60_000, "\(now)")
    }
}
