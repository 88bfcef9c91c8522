import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import RenewalCore

@main
struct RenewalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "renewal",
        abstract: "Re-verify stored App Store receipts with Apple and keep subscription state true.",
        discussion: """
            Typical use: `renewal migrate` once, `renewal import receipts.jsonl` to load receipts, then \
            `renewal run` from cron every few minutes. Settings come from flags or environment variables \
            (RENEWAL_DATABASE, APPSTORE_SHARED_SECRET or APPSTORE_SHARED_SECRET_FILE, \
            APPSTORE_VERIFY_RECEIPT_URL, APPSTORE_SANDBOX_VERIFY_RECEIPT_URL, RENEWAL_LOG_LEVEL).
            """ + "\n\n" + ExitCodes.help,
        version: RenewalVersion.text,
        subcommands: [
            DemoCommand.self, MigrateCommand.self, ImportCommand.self, RunCommand.self, BackfillCommand.self,
            StatusCommand.self, ReportCommand.self, AnalyticsCommand.self, CheckCommand.self, DeliverCommand.self,
            CopyDatabaseCommand.self, ExtendCommand.self,
            LookupCommand.self, ClaimCommand.self,
            DiscoverCommand.self,
        ]
    )

    /// Runs Swift concurrency's tasks on NIO's event loops (the ones AsyncHTTPClient uses), so an
    /// answer from Apple resumes its task on the thread that read it instead of hopping to the
    /// cooperative pool: about a fifth less CPU per receipt, most of it futex wake-ups
    /// (BENCHMARKS.md). Blocking calls never run there: both databases have their own thread.
    static func main() async {
        if let refusal = SecretFlags.refusal(CommandLine.arguments.dropFirst()) {
            FileHandle.standardError.write(Data("renewal: \(refusal)\n".utf8))
            Foundation.exit(ExitStatus.usage.rawValue)
        }
        _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await main(nil)
    }
}

/// Maps whole-command failures onto the contract's exit codes, printing one clear line first.
enum ExitMapping {
    static func run(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let exit as ExitCode {
            throw exit
        } catch let error as ValidationError {
            throw error
        } catch {
            let (code, message) = classify(error)
            FileHandle.standardError.write(Data("renewal: \(message)\n".utf8))
            throw ExitCode(code)
        }
    }

    static func classify(_ error: any Error) -> (Int32, String) {
        switch error {
        case let error as ConfigurationError: return (ExitStatus.configuration.rawValue, error.description)
        case let error as any SubscriptionStoreErrorDescribing: return (error.exitCode, error.message)
        default: return (ExitStatus.internalError.rawValue, "\(error)")
        }
    }
}
