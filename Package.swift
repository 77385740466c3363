// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "MyStash",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "ObjectGraph", targets: ["ObjectGraph"]),
        .library(name: "StashCrypto", targets: ["StashCrypto"]),
        .library(name: "MyStashKit", targets: ["MyStashKit"]),
        .executable(name: "mystash", targets: ["mystash"]),
        .executable(name: "objectgraph", targets: ["objectgraph"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
    ],
    targets: [
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // Raw deflate for the model Core Data keeps compressed in a store (Z_MODELCACHE).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // Linux calls Swift cannot make directly (variadic prctl, raw keyring syscalls).
        .target(name: "CLinuxSupport"),
        .target(name: "StashCrypto", dependencies: ["COpenSSL"], exclude: ["FORMAT.md"]),
        // The terminal under `mystash browse`: raw mode, keys, resizes, width-aware drawing.
        .target(name: "TerminalUI"),
        .target(name: "ObjectGraph", dependencies: ["CZlib", .product(name: "GRDB", package: "GRDB.swift")]),
        .executableTarget(name: "embed-config"),
        .plugin(name: "EmbedConfig", capability: .buildTool(), dependencies: ["embed-config"]),
        // What the vault and its command line need from the machine: child processes, the
        // clipboard, the kernel keyring.
        .target(name: "StashPlatform", dependencies: ["StashCrypto", "CLinuxSupport"]),
        .target(
            name: "MyStashKit",
            dependencies: ["ObjectGraph", "StashCrypto", "StashPlatform", "CLinuxSupport"],
            plugins: ["EmbedConfig"]
        ),
        .executableTarget(
            name: "mystash",
            dependencies: ["MyStashKit", "StashCrypto", "StashPlatform", "CLinuxSupport", "TerminalUI", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            // The Swift runtime and Foundation linked in (see FoundationBridging.swift), in debug
            // builds too so that the tests run what ships.
            swiftSettings: [.unsafeFlags(["-static-stdlib"])],
            linkerSettings: [.unsafeFlags(["-static-stdlib"])]
        ),
        .executableTarget(
            name: "objectgraph",
            dependencies: ["ObjectGraph", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "stash-bench",
            dependencies: [
                "ObjectGraph", "MyStashKit", "StashCrypto", "TestSupport", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ObjectGraphTests", dependencies: ["ObjectGraph", "TestSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "StashCryptoTests", dependencies: ["StashCrypto"], resources: [.copy("Vectors")]),
        .testTarget(name: "MyStashKitTests", dependencies: ["MyStashKit", "StashCrypto", "StashPlatform", "ObjectGraph", "TestSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "MyStashCLITests", dependencies: ["MyStashKit", "StashPlatform", "ObjectGraph", "TestSupport"]),
        .testTarget(name: "TerminalUITests", dependencies: ["TerminalUI"]),
    ],
    swiftLanguageModes: [.v6]
)
