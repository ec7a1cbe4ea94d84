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
        .executable(name: "canvasd", targets: ["canvasd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // Pure model: drawing, canvas and pencil state machines. No I/O, clocks, threads or C.
        .target(name: "CanvasCore", swiftSettings: swiftSettings),
        // A deliberately naive reference model of a canvas session, the oracle for
        // model-based tests and for the wire fuzzer.
        .target(name: "CanvasModel", dependencies: ["CanvasCore"], swiftSettings: swiftSettings),
        .executableTarget(name: "canvasd", swiftSettings: swiftSettings),
        .testTarget(
            name: "CanvasCoreTests",
            dependencies: [
                "CanvasCore",
                "CanvasModel",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
