import Dispatch
import Foundation

@testable import RenewalSQLite
@testable import RenewalSQL
@testable import RenewalStorage
import RenewalTesting
import Synchronization
import Testing

@Suite("SQLiteSubscriptionStore")
struct SQLiteSubscriptionStoreTests {
    @Test("conforms to SubscriptionStore", arguments: SubscriptionStoreConformance.checks)
    func conformance(_ check: SubscriptionStoreConformance.Check) async throws {
        try await withTemporaryDatabase { path in
            try await check.run(try SQLiteSubscriptionStore.open(path: path, create: true))
        }
    }

    @Test("a second store on the same file finds the run lock held, and free again afterwards")
    func runLockExcludesSecondStore() async throws {
        try await withTemporaryDatabase { path in
            let first = try SQLiteSubscriptionStore.open(path: path, create: true)
            let second = try SQLiteSubscriptionStore.open(path: path, create: false)
            let detail = try await first.withRunLock(owner: "run-1") { () async throws -> String in
                do {
                    try await second.withRunLock(owner: "run-2") {}
                    return "not locked"
                } catch SubscriptionStoreError.locked(let detail) {
                    return detail
                }
            }
            #expect(detail.hasPrefix("held by pid \(ProcessInfo.processInfo.processIdentifier) on "))
            #expect(detail.contains(" since "))
            #expect(try await second.withRunLock(owner: "run-2") { true })
        }
    }

    @Test("the connection runs in WAL mode with synchronous=NORMAL and foreign keys on")
    func connectionSettings() async throws {
        try await withTemporaryDatabase { path in
            let store = try SQLiteSubscriptionStore.open(path: path, create: true)
            let settings = try await store.database.withConnection { connection in
                [
                    try connection.execute("PRAGMA journal_mode", []).first?["journal_mode"],
                    try connection.execute("PRAGMA synchronous", []).first?["synchronous"],
                    try connection.execute("PRAGMA foreign_keys", []).first?["foreign_keys"],
                ]
            }
            #expect(settings == [.text("wal"), .int64(1), .int64(1)])
        }
    }

    @Test("opening a missing file without create tells the operator to run renewal migrate")
    func missingFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("missing-\(UUID().uuidString).sqlite")
            .path
        do {
            _ = try SQLiteSubscriptionStore.open(path: path, create: false)
            Issue.record("opened a missing file")
        } catch let error as SubscriptionStoreError {
            #expect("\(error)".contains("Database file not found at \(path). Run `renewal migrate` first."))
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test(
        "the due query is an index range scan on next_check_at, with or without cursor and lease",
        arguments: [
            (false, false), (true, false), (false, true), (true, true),
        ])
    func dueQueryPlan(withCursor: Bool, withLease: Bool) async throws {
        try await withTemporaryDatabase { path in
            let store = try SQLiteSubscriptionStore.open(path: path, create: true)
            _ = try await store.migrate()
            let now = Date(timeIntervalSince1970: 1_700_000_000)
            let statement = try #require(
                SQLiteSubscriptionStore.batchStatement(
                    .due(asOf: now), after: withCursor ? ReceiptCursor(nextCheckAt: now, id: 7) : nil, limit: 40,
                    lease: withLease ? Lease(owner: "w", until: now, now: now) : nil, dialect: .sqlite
                ))
            let plan = try await store.database.withConnection { connection in
                try connection.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.binds).map { row in
                    if case .text(let detail)? = row["detail"] { return detail }
                    return ""
                }
            }
            let rangeScan = plan.contains {
                $0.contains("USING INDEX receipts_next_check_at_idx (next_check_at") && $0.hasSuffix("next_check_at<?)")
            }
            #expect(rangeScan, "\(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(plan)")
            #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
        }
    }

    @Test("two stores leasing the same file concurrently never take the same receipt")
    func concurrentLeasesDoNotOverlap() async throws {
        try await withTemporaryDatabase { path in
            let setup = try SQLiteSubscriptionStore.open(path: path, create: true)
            _ = try await setup.migrate()
            let now = Date(timeIntervalSince1970: 1_700_000_000)
            let items = (0..<200).map { ReceiptImport(userID: "user-\($0)", latestReceipt: "r") }
            _ = try await setup.importReceipts(items, now: now)
            let stores: [any SubscriptionStore] = try (0..<3).map { _ in
                try SQLiteSubscriptionStore.open(path: path, create: false)
            }
            let taken = try await SubscriptionStoreConformance.claimConcurrently(stores, now: now)
            #expect(taken.count == 200)
            #expect(Set(taken).count == 200)
        }
    }

    @Test("$n placeholders become ?n outside quoted text")
    func placeholderRewrite() {
        let sql = "SELECT '$1', \"$2\" FROM t WHERE a = $1 AND b IN ($2, $10) AND c = '$'"
        #expect(
            SQLiteConnection.sqliteParameters(sql)
                == "SELECT '$1', \"$2\" FROM t WHERE a = ?1 AND b IN (?2, ?10) AND c = '$'")
    }

    @Test("statements waiting out another connection's write lock wait on the database's thread, not the executor's")
    func busyWaitLeavesTheExecutorFree() async throws {
        try await withTemporaryDatabase { path in
            let store = try SQLiteSubscriptionStore.open(path: path, create: true)
            try await store.database.withConnection { _ = try $0.execute("CREATE TABLE probe (x INTEGER)", []) }
            // Given another connection holding the write lock, released from a Dispatch thread as soon as the
            // probe task below has run, or after 4 s (inside busy_timeout) if it never gets a thread: on a
            // loaded machine the probe may start late, and a fixed delay then failed for the wrong reason
            let locker = try SQLiteConnection(path: path, create: false)
            _ = try locker.execute("BEGIN IMMEDIATE", [])
            let releasedAt = Mutex<ContinuousClock.Instant?>(nil)
            let probeRan = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                _ = probeRan.wait(timeout: .now() + 4)
                _ = try? locker.execute("ROLLBACK", [])
                releasedAt.withLock { $0 = .now }
            }
            // When more writes than the executor has threads wait for it (busy_timeout is 5 s)
            let writers = (0..<(ProcessInfo.processInfo.activeProcessorCount + 2)).map { value in
                Task {
                    try await store.database.withConnection {
                        _ = try $0.execute("INSERT INTO probe VALUES ($1)", [.int64(Int64(value))])
                    }
                }
            }
            // Then a task started after them still runs while the lock is held
            let tickedAt = await Task {
                let now = ContinuousClock.now
                probeRan.signal()
                return now
            }.value
            for writer in writers { try await writer.value }
            let released = try #require(releasedAt.withLock { $0 })
            #expect(
                tickedAt < released,
                "the executor waited for the lock: the task ran \(tickedAt - released) after the release")
            let rows = try await store.database.withConnection {
                try $0.execute("SELECT COUNT(*) AS n FROM probe", []).first?.int64("n")
            }
            #expect(rows == Int64(writers.count))
        }
    }

    @Test("errors name the problem without the bound values")
    func errorsDoNotLeakValues() async throws {
        try await withTemporaryDatabase { path in
            let store = try SQLiteSubscriptionStore.open(path: path, create: true)
            _ = try await store.migrate()
            let secret = "MIIT-secret-receipt-data"
            await #expect {
                try await store.database.withConnection { connection in
                    _ = try connection.execute(
                        "INSERT INTO receipts (user_id, latest_receipt) VALUES ($1, $2)", [.text("u"), .text(secret)])
                }
            } throws: { error in
                guard let error = error as? SubscriptionStoreError, case .query(let detail) = error else {
                    return false
                }
                return !detail.contains(secret) && detail.contains("NOT NULL")
            }
        }
    }
}

/// Runs `body` with the path of a database file in a fresh temporary directory, removed afterwards.
func withTemporaryDatabase(_ body: (String) async throws -> Void) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "renewal-storage-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    try await body(directory.appendingPathComponent("renewal.sqlite").path)
}
