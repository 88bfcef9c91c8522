// swift-tools-version:6.1
import PackageDescription

/// Settings applied to every target.
let swiftSettings: [SwiftSetting] = [
    // SE-0335: `any` spelled out for existential types.
    .enableUpcomingFeature("ExistentialAny"),
    // SE-0444: imports are only visible in the file that declares them.
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "renewal",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "renewal", targets: ["renewal"]),
        .executable(name: "appstore-simulator", targets: ["appstore-simulator"]),
        .library(name: "AppStoreSimulator", targets: ["AppStoreSimulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        // Core
        .target(name: "RenewalCore"),

        // Adapters
        // What every Apple API client shares: the verifier protocols, the HTTP transport, the retry
        // policy, the one error type and the observer.
        .target(
            name: "RenewalAppleAPI",
            dependencies: [
                "RenewalCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "RenewalAppStore",
            dependencies: [
                "RenewalCore",
                "RenewalAppleAPI",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .target(
            name: "RenewalServerAPI",
            dependencies: [
                "RenewalCore",
                "RenewalAppleAPI",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Storage ports: what the job reads and writes, as protocols and values.
        .target(
            name: "RenewalStorage",
            dependencies: ["RenewalCore"]
        ),
        // The one SQL implementation of the ports, its migrations and the dashboard summaries, on
        // either driver below.
        .target(
            name: "RenewalSQL",
            dependencies: [
                "RenewalCore",
                "RenewalStorage",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .systemLibrary(
            name: "CSQLite",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(name: "RenewalSQLite", dependencies: ["RenewalStorage", "RenewalSQL", "CSQLite"]),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(
            name: "RenewalPostgres",
            dependencies: [
                "RenewalStorage", "RenewalSQL", "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Metrics, progress and logs: what a run tells the people watching it.
        .target(
            name: "RenewalObservability",
            dependencies: [
                "RenewalCore",
                "RenewalAppleAPI",
                "RenewalStorage",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // Webhooks: the outbox delivered to the app's server, signed.
        .target(
            name: "RenewalDelivery",
            dependencies: [
                "RenewalCore",
                "RenewalStorage",
                "RenewalObservability",
                "RenewalReports",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Reports: the run's JSON report as it goes, and text, JSON lines, CSV and HTML from the history.
        .target(
            name: "RenewalReports",
            dependencies: ["RenewalCore", "RenewalStorage"]
        ),
        // The import engine: JSON Lines checked line by line, signed transactions verified, batched writes.
        .target(
            name: "RenewalImport",
            dependencies: [
                "RenewalCore",
                "RenewalStorage",
                "RenewalServerAPI",
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // The run: claims, Apple, decisions, writes, the change feed's read, graceful shutdown.
        .target(
            name: "RenewalJob",
            dependencies: [
                "RenewalCore",
                "RenewalAppleAPI",
                "RenewalStorage",
                "RenewalObservability",
                "RenewalDelivery",
                "RenewalReports",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "RenewalCore",
                "RenewalServerAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // Executables
        .executableTarget(
            name: "renewal",
            dependencies: [
                "RenewalCore",
                "RenewalAppleAPI",
                "RenewalAppStore",
                "RenewalStorage",
                "RenewalSQL",
                "RenewalSQLite",
                "RenewalPostgres",
                "RenewalJob",
                "RenewalObservability",
                "RenewalDelivery",
                "RenewalReports",
                "RenewalImport",
                "AppStoreSimulator",
                "RenewalServerAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "appstore-simulator",
            dependencies: [
                "AppStoreSimulator",
                "RenewalCore",
                "RenewalServerAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The benchmarks (Scripts/bench.sh month and webhooks), apart from the shipped sources.
        .executableTarget(
            name: "renewal-bench",
            dependencies: [
                "AppStoreSimulator",
                .product(name: "Hummingbird", package: "hummingbird"),
                "RenewalAppStore",
                "RenewalAppleAPI",
                "RenewalCore",
                "RenewalJob",
                "RenewalDelivery",
                "RenewalObservability",
                "RenewalPostgres",
                "RenewalSQLite",
                "RenewalServerAPI",
                "RenewalStorage",
                "RenewalSQL",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/renewal-bench"
        ),

        // Test support
        .target(
            name: "RenewalTesting",
            dependencies: [
                "RenewalCore",
                "RenewalStorage",
                "RenewalSQL",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Tests
        .testTarget(
            name: "RenewalCoreTests",
            dependencies: [
                "RenewalCore", "RenewalTesting",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "RenewalAppStoreTests",
            dependencies: [
                "RenewalAppStore", "RenewalAppleAPI", "RenewalCore", "AppStoreSimulator", "RenewalTesting",
                "RenewalServerAPI",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "RenewalAppleAPITests",
            dependencies: [
                "RenewalAppleAPI", "RenewalCore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RenewalServerAPITests",
            dependencies: [
                "RenewalServerAPI", "RenewalCore",
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "RenewalStorageTests",
            dependencies: [
                "RenewalCore", "RenewalStorage", "RenewalSQL", "RenewalSQLite", "RenewalPostgres", "RenewalTesting",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RenewalJobTests",
            dependencies: [
                "RenewalCore", "RenewalStorage", "RenewalJob", "RenewalDelivery", "RenewalReports",
                "RenewalObservability",
                "RenewalSQL",
                "RenewalSQLite",
                "RenewalPostgres", "RenewalAppStore", "RenewalAppleAPI",
                "AppStoreSimulator",
                "RenewalTesting",
                "RenewalServerAPI",
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "RenewalCLITests",
            dependencies: [
                "renewal", "appstore-simulator", "AppStoreSimulator", "RenewalCore", "RenewalSQLite", "RenewalPostgres",
                "RenewalStorage", "RenewalSQL",
                "RenewalTesting",
                "RenewalServerAPI",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // Golden report files, read through #filePath, not bundled.
            exclude: ["Golden"]
        ),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
