// swift-tools-version: 6.1
//
// package-service: a Hummingbird 2 daemon serving the Debian package fixture from an embedded
// ObjectGraph store (`AsyncStore`), or from SQLite through GRDB for comparison. A separate
// package, so that the library never resolves Hummingbird or GRDB.
//
//     cd Tools/PackageService && swift run package-service --store /tmp/pkgd
//
// (`make example` from the repository root builds it, runs its tests and starts it once.)

import PackageDescription

// As in the library's manifest: with OBJECTGRAPH_MACRO_PLUGIN naming an already built `@Entity`
// macro executable (this package's own debug build makes one), the target that declares
// entities loads it instead of the library building its macro target, and swift-syntax with
// it, again in release. The macro runs only at compile time.
let macroSettings: [SwiftSetting] =
    Context.environment["OBJECTGRAPH_MACRO_PLUGIN"].flatMap { $0.isEmpty ? nil : $0 }.map {
        [.unsafeFlags(["-load-plugin-executable", "\($0)#ObjectGraphMacros"])]
    } ?? []

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "PackageService",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "package-service", targets: ["package-service"])
    ],
    dependencies: [
        // The library, by path, referenced through its manifest's package name ("ObjectGraph")
        // rather than the directory-derived identity, as Tools/Benchmarks does.
        .package(name: "ObjectGraph", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        // SQLite through GRDB: the same endpoints on a `DatabasePool`, for `bench.sh`. Links the
        // system SQLite (libsqlite3-dev).
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Operators' endpoints: swift-metrics as the API (the library records its `objectgraph_*`
        // metrics through it), swift-prometheus's registry rendering them for `GET /metrics`.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // The application: entities, fixture loading, both backends, the routes. The tests
        // start it on a loopback port.
        .target(
            name: "PackageServiceKit",
            dependencies: [
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "ObjectGraphReplication", package: "ObjectGraph"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings + macroSettings
        ),
        .executableTarget(
            name: "package-service",
            dependencies: [
                "PackageServiceKit",
                .product(name: "ObjectGraphReplication", package: "ObjectGraph"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings
        ),
        // Starts the service on a free loopback port and sends it real HTTP requests (Foundation's
        // HTTP client); the replication suite also starts a nats-server with JetStream.
        .testTarget(
            name: "PackageServiceTests",
            dependencies: [
                "PackageServiceKit",
                .product(name: "ObjectGraphReplication", package: "ObjectGraph"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
