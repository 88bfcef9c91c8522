import ArgumentParser
import Foundation
import Logging
import RenewalCore
import RenewalStorage

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or upgrade the database schema (idempotent; safe to run on every deploy).",
        discussion: "A new SQLite file is created readable by its owner only." + EnvironmentHelp.text(.database))

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        try await ExitMapping.run {
            let logger = logging.makeLogger()
            let store = try StoreFactory.open(database.resolved, create: true)
            // A writer like the others (it may change the schema and compacts the summaries): refused
            // (exit 75) before anything is written while copy-database copies the database.
            let applied = try await store.withWriterLock { try await store.migrate() }
            logger.info(
                "Schema migrated", metadata: [LogKey.backend: "\(store.backendName)", LogKey.dbApplied: "\(applied)"])
            print(
                applied.isEmpty
                    ? "Schema already up to date (\(store.backendName))."
                    : "Applied migrations \(applied.map(String.init).joined(separator: ", ")) (\(store.backendName)).")
        }
    }
}
