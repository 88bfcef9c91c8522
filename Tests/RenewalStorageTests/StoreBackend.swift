import Foundation
import RenewalPostgres
import RenewalSQLite

@testable import RenewalSQL
@testable import RenewalStorage

/// A database the store suites run on: SQLite always, PostgreSQL when `RENEWAL_TEST_POSTGRES_URL` names a
/// server (CI starts one), so every storage rule is held on both.
enum StoreBackend: String, CaseIterable, CustomStringConvertible {
    case sqlite, postgres

    var description: String { rawValue }

    /// SQLite, and PostgreSQL when a server is named.
    static var available: [StoreBackend] { PostgresTestSchema.baseURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// Runs `body` on a new store of this backend migrated to the current schema (a SQLite file in a
    /// directory of its own, or a PostgreSQL schema of its own), removed afterwards.
    func withMigratedStore(
        _ body: (any SQLStoreChecks & RunHistoryStore & AnalyticsSummaryStore) async throws -> Void
    ) async throws {
        switch self {
        case .sqlite:
            let directory = NSTemporaryDirectory() + "renewal-store-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let store = try SQLiteSubscriptionStore.open(path: directory + "/renewal.sqlite", create: true)
            _ = try await store.migrate()
            try await body(store)
        case .postgres:
            try await PostgresTestSchema.with { schema in
                let store = try PostgresSubscriptionStore.open(url: schema.url)
                _ = try await store.migrate()
                try await body(store)
            }
        }
    }
}
