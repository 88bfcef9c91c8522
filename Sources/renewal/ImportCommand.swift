import ArgumentParser
import Foundation
import RenewalCore
import RenewalImport

#if canImport(Glibc)
    import Glibc
#endif
import RenewalCore
import RenewalStorage

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load stored receipts from JSON Lines; each becomes due now.",
        discussion: """
            One JSON object per line: {"user_id": "...", "latest_receipt": "<base64>", "product_id": "..."} \
            (product_id optional). StoreKit 2 apps give "original_transaction_id" (Transaction.originalID) or \
            "signed_transaction" (Transaction.jwsRepresentation, verified here) instead of the receipt, and \
            optionally "app_account_token". Upserts by user_id: a new receipt or id replaces the stored one, \
            the same just becomes due now. A bad line is reported with its line number and skipped; the rest \
            is imported. A line that claims a purchase the change feed adopted (a registered app_account_token, or \
            its original_transaction_id) queues a purchase.claimed webhook when a webhook URL is set, delivered \
            by the next run or `renewal deliver`. Exit 0 when every line was imported, 3 when some were skipped.
            """ + EnvironmentHelp.text(.database, .webhook))

    @Argument(help: ArgumentHelp("JSON Lines file, or - for standard input.", valueName: "file"))
    var file: String

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var webhook: WebhookOptions
    @OptionGroup var logging: LoggingOptions

    @Option(name: .long, help: "Lines written per transaction.")
    var batchSize: Int = 500

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            The app's bundle id: a signed_transaction for another bundle is a bad line. Env: APPSTORE_BUNDLE_ID. \
            Default: any bundle.
            """,
            valueName: "id"))
    var bundleID: String?

    func validate() throws {
        guard batchSize >= 1 else { throw ValidationError("--batch-size must be at least 1.") }
        var isDirectory: ObjCBool = false
        if file != "-", FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ValidationError("\(file) is a directory; give a JSON Lines file or -")
        }
        if file != "-", !FileManager.default.isReadableFile(atPath: file) {
            throw ValidationError("Cannot read \(file). Give a readable JSON Lines file, or - for standard input.")
        }
    }

    func run() async throws {
        try await ExitMapping.run {
            _ = logging.makeLogger()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            let handle = file == "-" ? FileHandle.standardInput : FileHandle(forReadingAtPath: file)
            guard let handle else { throw ValidationError("Cannot read \(file).") }
            let bundleID = bundleID ?? Environment.value("APPSTORE_BUNDLE_ID")
            // A claim a line makes is queued as purchase.claimed when webhooks are set (docs/design.md §7).
            let importer = ReceiptImporter(batchSize: batchSize, queueClaimWebhooks: webhook.resolvedURL != nil) {
                SignedTransactionImport(roots: try ServerAPIOptions.trustedRoots(), bundleID: bundleID)
            }
            // Refused (exit 75) before the first line is written while copy-database copies the database.
            let summary = try await store.withWriterLock {
                try await importer.run(handle, into: store, now: Date()) { line, problem in
                    FileHandle.standardError.write(Data("renewal import: line \(line): \(problem)\n".utf8))
                }
            }
            print(
                """
                Imported: \(summary.inserted) new, \(summary.replaced) replaced, \(summary.unchanged) unchanged, \
                \(summary.rejected) rejected.
                """
            )
            if summary.tokens > 0 || summary.claimed > 0 {
                // Token-only lines and lines naming an adopted purchase (docs/design.md §7).
                print("Tokens registered: \(summary.tokens); adopted purchases claimed: \(summary.claimed).")
            }
            if summary.rejected > 0 { throw ExitCode(ExitStatus.someFailed.rawValue) }
        }
    }
}
