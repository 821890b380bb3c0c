// swift-tools-version: 6.1
//
// ObjectGraph: an embedded, Core Data-style object graph for Swift on Linux,
// persisted in an append-only LZ4-compressed journal.

import CompilerPluginSupport
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// The `@Entity` macros run only while the package compiles, so how they are optimized changes
// no figure the demo prints; but a release build compiles them, and swift-syntax with them, in
// release: minutes on two cores. `make demo` therefore sets OBJECTGRAPH_MACRO_PLUGIN to the macro
// executable that `make test`'s debug build already made; the library and the demo then load
// that executable (`-load-plugin-executable`) instead of depending on the macro target, and
// swift-syntax is not built again. Without the variable, the package builds as usual.
let prebuiltMacroPlugin = Context.environment["OBJECTGRAPH_MACRO_PLUGIN"].flatMap { $0.isEmpty ? nil : $0 }
let macroDependency: [Target.Dependency] = prebuiltMacroPlugin == nil ? ["ObjectGraphMacros"] : []
let macroSettings: [SwiftSetting] =
    prebuiltMacroPlugin.map {
        [.unsafeFlags(["-load-plugin-executable", "\($0)#ObjectGraphMacros"])]
    } ?? []

let package = Package(
    name: "ObjectGraph",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ObjectGraph", targets: ["ObjectGraph"]),
        // Journal shipping to NATS JetStream: followers and point-in-time restore. A separate
        // product so that the core library links no NATS client.
        .library(name: "ObjectGraphReplication", targets: ["ObjectGraphReplication"]),
        // `AsyncStore` as a swift-service-lifecycle `Service`. A separate product so that the
        // core library does not link ServiceLifecycle and what it depends on.
        .library(name: "ObjectGraphLifecycle", targets: ["ObjectGraphLifecycle"]),
        .executable(name: "objectgraph-demo", targets: ["objectgraph-demo"]),
        .executable(name: "debian-fixture", targets: ["debian-fixture"]),
        .executable(name: "graph-journal", targets: ["graph-journal"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swiftlang/swift-syntax.git", from: "603.0.1"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        // The server ecosystem's metrics and tracing APIs: packages of protocols with no-op
        // defaults, which a library reports through and an application bootstraps.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // AES-GCM and HKDF for the journal's encryption at rest: Apple's CryptoKit API, backed by
        // BoringSSL on Linux. Versions 3 and 4 have the same API for what the journal uses.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        // liblz4 from Debian's liblz4-dev; only GraphJournal's codec includes it.
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        // The official NATS C client (JetStream included) from Debian's libnats-dev.
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // SQLite's C library from Debian's libsqlite3-dev; only the graph-journal tool links it
        // (`export --format sqlite`), so the library's dependency graph does not include it.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // CRC32C with the SSE4.2 instruction; GraphJournal falls back to its Swift tables on
        // CPUs without it and on other architectures.
        .target(name: "CCRC32C"),
        // A prefetch hint for the bulk import's hash-table and row accesses (header-only).
        .target(name: "CPrefetch"),
        // simdjson's DOM parser from Debian's libsimdjson-dev, behind a C header (og_simdjson.h).
        .target(name: "CSimdJSON", linkerSettings: [.linkedLibrary("simdjson")]),
        .target(
            name: "GraphJournal",
            dependencies: ["CLZ4", "CCRC32C", .product(name: "Crypto", package: "swift-crypto")],
            // Fault injection (JournalIO+FaultInjection.swift) exists in debug builds only, for
            // the package's tests; release builds of the library and the tool carry none.
            swiftSettings: strictSettings + macroSettings + [
                .define("OBJECTGRAPH_FAULT_INJECTION", .when(configuration: .debug))
            ]
        ),
        .macro(
            name: "ObjectGraphMacros",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ObjectGraph",
            dependencies: macroDependency + [
                "GraphJournal", "CPrefetch", "CSimdJSON", .product(name: "Logging", package: "swift-log"),
                .product(name: "HashTreeCollections", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSettings + macroSettings
        ),
        // A Swift face over libnats's JetStream calls: connect, streams, publish with
        // deduplication and expected-last-sequence, direct gets, ordered reads, purge.
        .target(
            name: "NATSJetStream",
            dependencies: ["CNATS"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ObjectGraphReplication",
            dependencies: [
                "ObjectGraph", "GraphJournal", "NATSJetStream",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings + macroSettings
        ),
        .target(
            name: "ObjectGraphLifecycle",
            dependencies: [
                "ObjectGraph",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "objectgraph-demo",
            dependencies: ["ObjectGraph", "GraphJournal"],
            path: "Tools/Demo",
            swiftSettings: strictSettings + macroSettings
        ),
        .executableTarget(
            name: "debian-fixture",
            dependencies: ["GraphJournal"],
            path: "Tools/DebianFixture",
            swiftSettings: strictSettings
        ),
        // The child process of the crash tests: saves in a loop until killed.
        .executableTarget(
            name: "objectgraph-crash-writer",
            dependencies: [
                "ObjectGraph", "ObjectGraphLifecycle", "GraphJournal",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/CrashWriter",
            swiftSettings: strictSettings
        ),
        // The child process of the replication kill tests: a shipping writer or a follower.
        .executableTarget(
            name: "objectgraph-replication-child",
            dependencies: ["ObjectGraph", "ObjectGraphReplication"],
            path: "Tools/ReplicationChild",
            swiftSettings: strictSettings + macroSettings
        ),
        // The processes of the fault checker (Tests/ReplicationTests/Faults): a writer that logs
        // each acknowledged key, a follower.
        .executableTarget(
            name: "objectgraph-fault-child",
            dependencies: ["ObjectGraph", "ObjectGraphReplication"],
            path: "Tools/FaultChild",
            swiftSettings: strictSettings + macroSettings
        ),
        // The libFuzzer target over hostile payloads behind valid checksums, through open, point
        // in time and a follower (Tools/Fuzz/build.sh builds it with the fuzzer; a plain build
        // makes a program that says so).
        .executableTarget(
            name: "objectgraph-payload-fuzz",
            dependencies: ["ObjectGraph", "GraphJournal"],
            path: "Tools/Fuzz/Payload",
            swiftSettings: strictSettings + macroSettings
        ),
        // The tool's progress bar, a library so that its tests import it (a test target that
        // imports an executable's module may be compiled before that module exists).
        .target(
            name: "GraphJournalProgress",
            dependencies: [
                "ObjectGraph", "GraphJournal", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/GraphJournalProgress",
            swiftSettings: strictSettings
        ),
        // The operators' tool: stats, verify, dump, export, repair and compact a store without app code.
        .executableTarget(
            name: "graph-journal",
            dependencies: [
                "ObjectGraph",
                "GraphJournal",
                "GraphJournalProgress",
                "ObjectGraphReplication",
                "CSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/GraphJournal",
            swiftSettings: strictSettings
        ),
        // Helpers shared by the test targets: a seeded, repeatable generator.
        .target(
            name: "ObjectGraphTestSupport",
            path: "Tests/ObjectGraphTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ObjectGraphTests",
            dependencies: [
                "ObjectGraph",
                "ObjectGraphTestSupport",
                "objectgraph-crash-writer",
                "GraphJournal",
                "ObjectGraphLifecycle",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSettings
        ),
        // Replication against real nats-server processes on loopback (Tests/ReplicationTests/Support).
        .testTarget(
            name: "ReplicationTests",
            dependencies: [
                "ObjectGraphReplication", "NATSJetStream", "ObjectGraph", "GraphJournal", "ObjectGraphTestSupport",
                "graph-journal",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                "objectgraph-replication-child",
                "objectgraph-fault-child",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "GraphJournalTests",
            dependencies: ["GraphJournal", "ObjectGraphTestSupport"],
            swiftSettings: strictSettings
        ),
        // Runs the built graph-journal binary (a dependency, so it is built first) on fixtures.
        .testTarget(
            name: "GraphJournalToolTests",
            dependencies: [
                "graph-journal", "GraphJournalProgress", "ObjectGraph", "GraphJournal", "ObjectGraphTestSupport",
            ],
            exclude: ["Expected"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ObjectGraphMacrosTests",
            dependencies: [
                "ObjectGraphMacros",
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6],
    cxxLanguageStandard: .cxx17
)
