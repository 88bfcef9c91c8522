import ArgumentParser
import Foundation
import RenewalAppStore
import RenewalCore
import RenewalStorage

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate the configuration and test the database and Apple connections; changes nothing.",
        discussion: "Sends Apple one deliberately invalid receipt (answered 21002) to prove the endpoint answers JSON. Exit 0 when all is well, 78 on a configuration problem, 4 when Apple cannot be reached.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        try await ExitMapping.run {
            let logger = logging.makeLogger()
            let secret = try SharedSecret.load()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            print("database: ok (\(store.backendName), schema current)")
            print("shared secret: set (\(secret.count) characters)")
            let configuration = AppStoreClient.Configuration(
                productionURL: appStore.resolvedProductionURL, sandboxURL: appStore.resolvedSandboxURL,
                sharedSecret: secret, requestTimeout: .milliseconds(Int64(appStore.timeout * 1000)), maxAttempts: 1)
            let probe = Data("renewal-check".utf8).base64EncodedString()
            let verification = try await AppStoreClient.withAppStoreClient(configuration: configuration) { client in
                await client.verify(receipt: probe, logger: logger)
            }
            switch verification {
            case .malformed, .rejected, .valid:
                print("apple: ok (\(appStore.resolvedProductionURL) answers)")
            case .sharedSecretRejected:
                throw ConfigurationError("Apple rejected the shared secret (21004). Set APPSTORE_SHARED_SECRET to the app's shared secret.")
            case .failed(let error):
                FileHandle.standardError.write(Data("renewal: apple: \(error)\n".utf8))
                throw ExitCode(4)
            }
        }
    }
}
