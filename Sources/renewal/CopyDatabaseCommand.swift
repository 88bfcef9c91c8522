import ArgumentParser
import Foundation
import Logging
import RenewalCore
import RenewalSQL
import RenewalStorage

/// `renewal copy-database FROM TO`: moves a database to the other kind (SQLite to PostgreSQL when a
/// deployment outgrows one file, or back), every table with its state and history.
struct CopyDatabaseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy-database",
        abstract: "Copy every table of one database into a new, empty one (SQLite to PostgreSQL or back).",
        discussion: """
            FROM and TO are each a SQLite file path or a postgres:// URL. FROM must be at this build's schema \
            (run `renewal migrate` on it first); TO is migrated to it (a missing SQLite file is created) and must \
            hold no receipts. Receipts, subscriptions, changes, runs, failures, conflicts, the change feed's \
            cursors and notifications, the webhook outbox and the request budget are copied as they are, so the \
            next run on TO continues where FROM stopped; PostgreSQL's dashboard summaries are rebuilt. Rows are \
            read and written a batch at a time, in one transaction on TO: a copy that fails leaves TO without \
            receipts, to be run again. Stop the cron job or workers first: the copy exits 75 while a command writes \
            to FROM or TO, and while it copies, run, import, extend and deliver on either exit 75 and write nothing. \
            Give passwords through PGPASSWORD or ~/.pgpass.
            """ + EnvironmentHelp.text(.database))

    @Argument(help: ArgumentHelp("The database to copy: a SQLite file path or a postgres:// URL.", valueName: "from"))
    var from: String

    @Argument(
        help: ArgumentHelp("The empty database to copy into: a SQLite file path or a postgres:// URL.", valueName: "to")
    )
    var to: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Rows read and written at a time (memory stays flat whatever the table size).", valueName: "rows"))
    var batchSize: Int = DatabaseCopy.defaultBatchSize

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard batchSize >= 1 else { throw ValidationError("--batch-size must be at least 1.") }
        guard from != to else {
            throw ValidationError("FROM and TO name the same database; give a new database as TO.")
        }
    }

    func run() async throws {
        try await ExitMapping.run {
            let logger = logging.makeLogger()
            let source = StoreFactory.displayName(from)
            let target = StoreFactory.displayName(to)
            if !from.contains("://"), !FileManager.default.fileExists(atPath: from) {
                throw ConfigurationError("copy-database: the source database \(source) does not exist.")
            }
            let outcome: DatabaseCopy.Outcome
            let sourceDatabase: any SQLDatabase
            let targetDatabase: any SQLDatabase
            do {
                sourceDatabase = try StoreFactory.openDatabase(from, create: false, setting: "copy-database FROM")
                try await DatabaseCopy.checkSource(sourceDatabase)
                targetDatabase = try StoreFactory.openDatabase(to, create: true, setting: "copy-database TO")
                let copy = DatabaseCopy(
                    source: sourceDatabase, target: targetDatabase, batchSize: batchSize, logger: logger)
                outcome = try await copy.run()
            } catch let error as DatabaseCopyError {
                let message = "copy-database from \(source) to \(target): \(error.description)"
                if error.isConfiguration { throw ConfigurationError(message) }
                throw CopyFailure(message: message)
            }
            logger.info(
                "Database copied",
                metadata: [
                    LogKey.dbFrom: "\(sourceDatabase.backendName)", LogKey.dbTo: "\(targetDatabase.backendName)",
                    LogKey.dbApplied: "\(outcome.migrated)",
                ])
            if !outcome.migrated.isEmpty {
                print(
                    "Migrated \(target) (\(targetDatabase.backendName)): applied "
                        + outcome.migrated.map(String.init).joined(separator: ", ") + ".")
            }
            let rows = outcome.rows.map { "\($0.table) \($0.count)" }.joined(separator: ", ")
            print(
                "Copied \(source) (\(sourceDatabase.backendName)) to \(target) (\(targetDatabase.backendName)): \(rows)."
            )
        }
    }
}

/// A copy that failed on the way (exit 1): nothing was committed to the target.
struct CopyFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
