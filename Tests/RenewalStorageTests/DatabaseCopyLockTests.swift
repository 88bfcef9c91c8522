import Foundation
import Logging
import RenewalPostgres
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

/// The lock that keeps `renewal copy-database` and the commands that write apart, on a real SQLite file
/// and a real PostgreSQL schema, each database opened twice as two processes would: writers share it,
/// a copy takes it alone, and neither waits for the other.
@Suite(
    "DatabaseCopy: writers and a copy exclude each other",
    .enabled(if: PostgresTestSchema.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct DatabaseCopyLockTests {
    static let quiet = Logger(label: "copy", factory: { _ in SwiftLogNoOpLogHandler() })

    static func store<Database: SQLDatabase>(_ database: Database) -> any SubscriptionStore {
        SQLSubscriptionStore(database: database)
    }

    /// Two openings of one migrated database of `kind`, and a fresh SQLite target, for `body`.
    static func withDatabase(
        _ kind: String,
        _ body: (_ first: any SQLDatabase, _ second: any SQLDatabase, _ target: SQLiteDatabase) async throws -> Void
    ) async throws {
        let directory = NSTemporaryDirectory() + "renewal-copy-lock-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try SQLiteDatabase(path: directory + "/target.sqlite", create: true)
        if kind == "sqlite" {
            let path = directory + "/source.sqlite"
            let first = try SQLiteDatabase(path: path, create: true)
            _ = try await SQLSubscriptionStore(database: first).migrate()
            try await body(first, try SQLiteDatabase(path: path, create: false), target)
            return
        }
        try await PostgresTestSchema.with { schema in
            let first = try PostgresDatabase(url: schema.url)
            _ = try await SQLSubscriptionStore(database: first).migrate()
            try await body(first, try PostgresDatabase(url: schema.url), target)
        }
    }

    @Test(
        "a copy is refused (locked) while a writer works, and writers are refused (copying) while a copy works",
        arguments: ["sqlite", "postgres"])
    func writersAndCopiesExcludeEachOther(kind: String) async throws {
        try await Self.withDatabase(kind) { first, second, target in
            // Writers share the lock: a run (the run lock holds it too) and an import at once.
            let shared = try await first.withWriterLock {
                try await Self.store(second).withRunLock(owner: "run-1") { "both" }
            }
            #expect(shared == "both")

            // A writer at work: the copy is refused at once, and nothing is written to the target.
            try await first.withWriterLock {
                let copy = DatabaseCopy(source: second, target: target, logger: Self.quiet)
                await #expect(throws: SubscriptionStoreError.self) {
                    do {
                        _ = try await copy.run()
                    } catch let error as SubscriptionStoreError {
                        guard case .locked(let detail) = error else { throw error }
                        #expect(detail.contains("a renewal command that writes"), "\(detail)")
                        throw error
                    }
                }
            }
            let tables = try await target.withConnection { connection in
                try connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'", []).count
            }
            #expect(tables == 0, "the refused copy migrated the target")

            // A copy at work: writers on either opening are refused and their body never runs.
            try await first.withCopyLock(owner: "copy-1") {
                let store = Self.store(second)
                await #expect(throws: SubscriptionStoreError.self) {
                    try await store.withWriterLock { Issue.record("an import ran during a copy") }
                }
                await #expect(throws: SubscriptionStoreError.self) {
                    try await store.withRunLock(owner: "run-2") { Issue.record("a run ran during a copy") }
                }
                do {
                    try await second.withWriterLock {}
                    Issue.record("a writer was let in during a copy")
                } catch SubscriptionStoreError.copying(let detail) {
                    #expect(detail.contains("pid"), "the refusal names the copy's process: \(detail)")
                }
            }

            // Both gone: the copy goes through.
            let outcome = try await DatabaseCopy(source: second, target: target, logger: Self.quiet).run()
            #expect(outcome.rows.contains { $0.table == "receipts" })
            try await first.withWriterLock {}
        }
    }
}
