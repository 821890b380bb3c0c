// swift-tools-version: 6.1
//
// The ObjectGraph benchmarks: a separate package outside the library's dependency graph
// (STYLE item 12), so library users never resolve benchmark-only packages.
//
//     cd Tools/Benchmarks && swift package --allow-writing-to-directory .benchmarkBaselines benchmark
//
// (`make bench` from the repository root runs exactly that.)

import PackageDescription

let package = Package(
    name: "ObjectGraphBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The library, by path. Its product is referenced through the root manifest's package
        // name ("ObjectGraph"), not the path-derived identity (the checkout directory's name),
        // so this works whatever the clone is called.
        .package(name: "ObjectGraph", path: "../.."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The Person entity and the workload, shared by the benchmarks and the profiling tool.
        .target(
            name: "PeopleWorkload",
            dependencies: [.product(name: "ObjectGraph", package: "ObjectGraph")]
        ),
        .executableTarget(
            name: "ObjectGraphBenchmarks",
            dependencies: [
                "PeopleWorkload",
                .product(name: "ObjectGraph", package: "ObjectGraph"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ObjectGraphBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark"),
            ]
        ),
        // The same workload as a plain executable, for callgrind/perf and an RSS figure without
        // the benchmark harness: `swift run -c release objectgraph-profile [phase] [count]`.
        .executableTarget(
            name: "objectgraph-profile",
            dependencies: ["PeopleWorkload", .product(name: "ObjectGraph", package: "ObjectGraph")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
