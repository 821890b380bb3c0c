// swift-tools-version: 6.1
//
// The ObjectGraph benchmarks: a separate package outside the library's dependency graph,
// so library users never resolve benchmark-only packages.
//
//     cd Tools/Benchmarks && swift package --allow-writing-to-directory .benchmarkBaselines benchmark
//
// (`make bench` from the repository root runs exactly that.)

import PackageDescription

// The library checkout to benchmark: this repository by default; OBJECTGRAPH_PATH=/some/copy
// measures another checkout (e.g. a snapshot of HEAD while the working tree is mid-edit)
// with this package's own build directory.
let libraryPath = Context.environment["OBJECTGRAPH_PATH"] ?? "../.."

// As in the library's manifest: with OBJECTGRAPH_MACRO_PLUGIN naming an already built
// `@Entity` macro executable, the targets that declare entities load it instead of the library
// building its macro target (and swift-syntax) in release; the macro runs only at compile time.
let macroSettings: [SwiftSetting] =
    Context.environment["OBJECTGRAPH_MACRO_PLUGIN"].flatMap { $0.isEmpty ? nil : $0 }.map {
        [.unsafeFlags(["-load-plugin-executable", "\($0)#ObjectGraphMacros"])]
    } ?? []

let package = Package(
    name: "ObjectGraphBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The library, by path. Its product is referenced through the root manifest's package
        // name ("ObjectGraph"), not the path-derived identity (the checkout directory's name),
        // so this works whatever the clone is called.
        .package(name: "ObjectGraph", path: libraryPath),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // SQLite through GRDB, the peer of `peer-comparison`. Links the system SQLite
        // (libsqlite3-dev; `install-peers.sh` installs it when missing).
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        // The Person entity and the workload, shared by the benchmarks and the profiling tool.
        .target(
            name: "PeopleWorkload",
            dependencies: [.product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        .executableTarget(
            name: "ObjectGraphBenchmarks",
            dependencies: [
                "PeopleWorkload",
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ObjectGraphBenchmarks",
            swiftSettings: macroSettings,
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
        // Debian-like package documents (packages, maintainers by e-mail, `depends` by names)
        // and their entities and mappings, shared by mapping-comparison and realjob-comparison.
        .target(
            name: "DebianShape",
            dependencies: ["PeopleWorkload", .product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        // The same workload as a plain executable, for callgrind/perf and an RSS figure without
        // the benchmark harness: `swift run -c release objectgraph-profile [phase] [count]`.
        .executableTarget(
            name: "objectgraph-profile",
            dependencies: ["PeopleWorkload", .product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        // Mapping a JSON document into a store, ObjectGraph next to JSONDecoder + GRDB:
        // `swift run -c release mapping-comparison` writes Results/mapping.md.
        // `make bench-mapping` from the repository root.
        // A no-op resync of a Debian-shaped mirror (connections by attribute and by a list of
        // names, a modification attribute): `swift run -c release resync-profile [packages]`.
        .executableTarget(
            name: "resync-profile",
            dependencies: [.product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        .executableTarget(
            name: "mapping-comparison",
            dependencies: [
                "PeopleWorkload",
                "DebianShape",
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: macroSettings
        ),
        // The job a Debian mirror does, ObjectGraph next to JSONDecoder + GRDB: a first sync, a
        // second sync of the index with an overlay applied (with the sweep), a no-op resync,
        // reopen and read, peak memory. `make bench-realjob` writes Results/realjob.md.
        .executableTarget(
            name: "realjob-comparison",
            dependencies: [
                "DebianShape",
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: macroSettings
        ),
        // ObjectGraph next to SQLite (GRDB) and Redis's AOF on the same data:
        // `swift run -c release peer-comparison` writes Results/peers.md, peers.json and the
        // charts bulk-upsert.svg, cold-start.svg and memory.svg. `make bench-peers` from the
        // repository root.
        .executableTarget(
            name: "commit-comparison",
            dependencies: [
                "PeopleWorkload",
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: macroSettings
        ),
        // A custom migration stage over 1M objects against a bulk import of the new model, and
        // a lightweight stage's open. `make bench-migration` writes Results/migration.md.
        .executableTarget(
            name: "migration-comparison",
            dependencies: [.product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        // Encryption at rest against none: the 1M bulk load and the cold open, each in a fresh
        // process, alternating. `make bench-encryption` writes Results/encryption.md.
        .executableTarget(
            name: "encryption-comparison",
            dependencies: ["PeopleWorkload", .product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        .executableTarget(
            name: "concurrency-comparison",
            dependencies: ["PeopleWorkload", .product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        // Journal shipping to NATS JetStream: the writer's cost, a follower's lag, a restore
        // against a cold start. `make bench-replication` writes Results/replication.md.
        .executableTarget(
            name: "replication-comparison",
            dependencies: [
                "PeopleWorkload",
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "ObjectGraphReplication", package: "ObjectGraph"),
            ],
            swiftSettings: macroSettings
        ),
        // A writer SIGKILLed and its standby taking the stream over, 20 times on a 3-server
        // loopback cluster: the time to the standby's first acknowledged save against the lease.
        // `make bench-failover` writes Results/failover.md.
        .executableTarget(
            name: "failover-comparison",
            dependencies: [
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "ObjectGraphReplication", package: "ObjectGraph"),
            ],
            swiftSettings: macroSettings
        ),
        // Many-to-many and ordered to-many relationships (links) against to-one slots: build and
        // save, open, memory, removal. `make bench-links` writes Results/links.md.
        .executableTarget(
            name: "links-comparison",
            dependencies: ["PeopleWorkload", .product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        // Secondary indexes (`#Index`) against SQLite's CREATE INDEX: indexed fetches and bulk
        // import with 0, 1, 2 indexes. `make bench-indexes` writes Results/indexes.md.
        .executableTarget(
            name: "indexes-comparison",
            dependencies: [
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: macroSettings
        ),
        // Structs converted one call at a time, identified by an attribute without a unique
        // constraint: time per struct at 10k, 50k and 100k objects, which must stay flat.
        // `make bench-struct-conversion` from the repository root.
        .executableTarget(
            name: "struct-conversion",
            dependencies: [.product(name: "ObjectGraph", package: "ObjectGraph")],
            swiftSettings: macroSettings
        ),
        .executableTarget(
            name: "peer-comparison",
            dependencies: [
                "PeopleWorkload",
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: macroSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
