// swift-tools-version: 6.1
import PackageDescription

// Every target builds in Swift 6 language mode with the same strictness.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "canvas-bridge",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "CanvasCore", targets: ["CanvasCore"]),
        .library(name: "CanvasClient", targets: ["CanvasClient"]),
        .executable(name: "canvasd", targets: ["canvasd"]),
        .executable(name: "canvasctl", targets: ["canvasctl"]),
        // For the libFuzzer package in Fuzz/, which builds these with -sanitize=fuzzer.
        .library(name: "FuzzTargets", targets: ["FuzzTargets"]),
    ],
    // Exact versions: the ones the package mirror has and the tests ran with. Package.resolved
    // cannot be committed (the mirror's commit ids are not upstream's), so a range would let a
    // fresh machine build versions nobody tested.
    dependencies: [
        .package(url: "https://github.com/x-sheep/swift-property-based", exact: "2.0.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", exact: "1.8.1"),
        // The health endpoint's HTTP server (NIOHTTP1), and its metrics through swift-metrics
        // with swift-prometheus writing the text format. NIO brings swift-atomics and
        // swift-collections, whose only versions in the mirror are the ones tested (1.3.0, 1.6.0).
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-metrics", exact: "2.13.0"),
        // wss:// in canvasd itself (`--web-tls-cert`), for a deployment without a proxy.
        .package(url: "https://github.com/apple/swift-nio-ssl", exact: "2.37.6"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
    ],
    targets: [
        // Pure model: drawing, canvas and pencil state machines. No I/O, clocks, threads or C.
        .target(name: "CanvasCore", swiftSettings: swiftSettings),
        // A deliberately naive reference model of a canvas session, the oracle for
        // model-based tests and for the wire fuzzer.
        .target(name: "CanvasModel", dependencies: ["CanvasCore"], swiftSettings: swiftSettings),
        // libzmq's headers are in /usr/include and its module map links it. Through pkg-config,
        // libzmq.pc would add an -isystem flag (krb5's include) that SwiftPM warns about on
        // every build.
        .systemLibrary(name: "CZeroMQ"),
        .systemLibrary(name: "CCairo", pkgConfig: "cairo", providers: [.apt(["libcairo2-dev"])]),
        // OpenSSL's libcrypto: SHA-256 of document bytes.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // hiredis (Debian's libhiredis-dev), Redis's C client: session snapshots shared by several
        // canvasd instances. Its header is reached as <hiredis/hiredis.h> and the module map links
        // it; hiredis.pc would add -D_FILE_OFFSET_BITS=64, which SwiftPM warns about on every build.
        .systemLibrary(name: "CHiredis"),
        // Session snapshots in Redis with compare-and-set, over hiredis; no raw pointer in its API.
        .target(name: "SessionStore", dependencies: ["CHiredis", .product(name: "Logging", package: "swift-log")],
                swiftSettings: swiftSettings),
        // PDF surgery over libqpdf behind a C API that catches every C++ exception.
        .target(
            name: "CPDFSurgery",
            cxxSettings: [.unsafeFlags(["-std=c++17"]), .define("POINTERHOLDER_TRANSITION", to: "4")],
            linkerSettings: [.linkedLibrary("qpdf"), .linkedLibrary("z")]
        ),
        // copy_file_range, FICLONE and fstatfs, which Glibc's Swift module does not export.
        .target(name: "CFileCopy"),
        .target(name: "PDFSurgery", dependencies: ["CPDFSurgery", .product(name: "SystemPackage", package: "swift-system")],
                swiftSettings: swiftSettings),
        // Documents: .pdf and .yianazip files in one folder, flattening, atomic saves, revisions.
        .target(name: "DocumentStore",
                dependencies: ["CanvasCore", "CanvasProtocol", "CCrypto", "CFileCopy", "InkRendering", "PDFSurgery",
                               .product(name: "Logging", package: "swift-log"),
                               .product(name: "SystemPackage", package: "swift-system")],
                swiftSettings: swiftSettings),
        // A thin, owning layer over libzmq: typed errors, no raw pointers in its API.
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"], swiftSettings: swiftSettings),
        // The ws:// endpoints on SwiftNIO: ZWS 2.0 framing, each connection known by what it
        // showed, the rules connections are held to, back-pressure per connection. Knows
        // nothing of requests: whole messages go to the loop, its answers come back.
        .target(
            name: "WebTransport",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // The wire: envelope, JSON codec, error codes, params. No sockets.
        .target(name: "CanvasProtocol", swiftSettings: swiftSettings),
        // Ink drawn with Cairo: PNG images now, PDF overlays for flattening.
        .target(name: "InkRendering", dependencies: ["CanvasCore", "CCairo"], swiftSettings: swiftSettings),
        // What an operator watches: the HTTP health and metrics endpoint, the metrics themselves,
        // the process's memory and descriptor limits. Knows nothing of requests.
        .target(
            name: "CanvasOperations",
            dependencies: [
                "CanvasProtocol", "SessionStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        // The request path, with no sockets: frames in, replies and events out. Requests/ (the
        // dispatcher, the request machine and its executor), Methods/ (what each method does),
        // Jobs/ (work beside the loop), Sessions/ (sessions and their keeping, local or shared).
        .target(
            name: "CanvasService",
            dependencies: [
                "CanvasCore", "CanvasOperations", "CanvasProtocol", "DocumentStore", "InkRendering", "SessionStore",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The server: the socket loop over libzmq, the ws:// endpoints and their tokens, CurveZMQ
        // keys, subscriptions vetted, saves run beside the loop.
        .target(
            name: "CanvasServing",
            dependencies: [
                "CanvasOperations", "CanvasProtocol", "CanvasService", "DocumentStore", "SessionStore", "WebTransport", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // A blocking Swift client, an event subscriber, and the model-checking wire fuzzer.
        .target(
            name: "CanvasClient",
            dependencies: ["CanvasCore", "CanvasModel", "CanvasProtocol", "ZeroMQ"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "canvasd",
            dependencies: [
                "CanvasOperations", "CanvasService", "CanvasServing", "DocumentStore", "WebTransport", "ZeroMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "canvasctl",
            dependencies: [
                "CanvasClient", "CanvasCore", "CanvasProtocol", "DocumentStore", "ZeroMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // Benchmarks, each against a baseline measured in the same run.
        .executableTarget(
            name: "canvasbench",
            dependencies: [
                "CanvasClient", "CanvasCore", "CFileCopy", "CanvasOperations", "CanvasProtocol", "CanvasService", "CanvasServing", "DocumentStore", "InkRendering", "PDFSurgery", "SessionStore",
                "TestSupport", "ZeroMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // What each libFuzzer target runs on one input, and the invariants it traps on; the
        // regression tests replay saved inputs through the same functions.
        // Small PDFs written byte by byte, and a page of handwriting, for tests, the fuzz
        // targets' document folder and the benchmarks.
        .target(name: "TestSupport", dependencies: ["CanvasCore"], swiftSettings: swiftSettings),
        .target(
            name: "FuzzTargets",
            dependencies: [
                "CanvasCore", "CanvasProtocol", "CanvasService", "DocumentStore", "InkRendering", "SessionStore", "TestSupport",
                .product(name: "Logging", package: "swift-log"), .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: swiftSettings
        ),
        // The saved inputs are read from the source tree (#filePath), not bundled as resources.
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FuzzTargets"], exclude: ["Inputs"],
                    swiftSettings: swiftSettings),
        .testTarget(
            name: "CanvasCoreTests",
            dependencies: [
                "CanvasCore",
                "CanvasModel",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DocumentStoreTests",
            dependencies: ["DocumentStore", "InkRendering", "PDFSurgery", "CanvasCore", "CanvasProtocol", "TestSupport",
                           .product(name: "Logging", package: "swift-log")],
            exclude: ["Fixtures"],   // read by #filePath
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "SessionStoreTests", dependencies: ["SessionStore", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "WebTransportTests", dependencies: ["WebTransport"], swiftSettings: swiftSettings),
        .testTarget(name: "CanvasProtocolTests", dependencies: ["CanvasProtocol"], swiftSettings: swiftSettings),
        .testTarget(
            name: "InkRenderingTests",
            dependencies: ["InkRendering", "CanvasCore", "TestSupport", "CCairo"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CanvasServiceTests",
            dependencies: ["CanvasClient", "CanvasCore", "CanvasOperations", "CanvasProtocol", "CanvasService", "CanvasServing", "SessionStore",
                           "TestSupport", "ZeroMQ", "canvasd"],
            swiftSettings: swiftSettings
        ),
    ]
)

// libFuzzer targets, only when asked for (`make fuzz`): they have no main() of their own, so an
// ordinary build could not link them.
if Context.environment["CANVAS_FUZZ"] != nil {
    for name in ["request", "drawing", "yianazip", "delta"] {
        package.targets.append(.executableTarget(name: "fuzz-\(name)", dependencies: ["FuzzTargets"], swiftSettings: swiftSettings))
    }
}
