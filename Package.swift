// swift-tools-version:6.1
import PackageDescription

/// Linking Foundation's archives as usual leaves out the object files that only a dynamic cast
/// reaches (Array's bridging: a property list holding an array failed with "Not A Type"), so they
/// are linked whole (their members already pulled in count once), then what they need.
let staticRuntimeLinking: [String] = {
    let whole = ["Foundation", "FoundationEssentials", "FoundationInternationalization"]
    let needed = [
        "CoreFoundation", "_FoundationICU", "_FoundationCShims", "_FoundationCollections", "swiftCore",
        "swift_Concurrency", "swift_StringProcessing", "swift_RegexParser", "swiftSynchronization", "swiftGlibc",
        "swiftDispatch", "dispatch", "BlocksRuntime", "swiftObservation",
    ]
    func linker(_ flags: [String]) -> [String] { flags.flatMap { ["-Xlinker", $0] } }
    return ["-static-stdlib"] + linker(["-z", "muldefs", "--whole-archive"] + whole.map { "-l" + $0 })
        + linker(["--no-whole-archive", "--start-group"] + needed.map { "-l" + $0 } + ["--end-group"])
}()

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
        .target(
            name: "MyStashKit",
            dependencies: ["ObjectGraph", "StashCrypto", "CLinuxSupport"],
            plugins: ["EmbedConfig"]
        ),
        .executableTarget(
            name: "mystash",
            dependencies: ["MyStashKit", "StashCrypto", "CLinuxSupport", "TerminalUI", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            // The Swift runtime and Foundation linked in: loading them as shared libraries was most
            // of a command's start (22 ms of `mystash --version`). Release only, to keep debug links quick.
            // (compiled against the static runtime too, so it names every library Foundation needs).
            swiftSettings: [.unsafeFlags(["-static-stdlib"], .when(configuration: .release))],
            linkerSettings: [.unsafeFlags(staticRuntimeLinking, .when(configuration: .release))]
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
        .testTarget(name: "MyStashKitTests", dependencies: ["MyStashKit", "StashCrypto", "ObjectGraph", "TestSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "MyStashCLITests", dependencies: ["MyStashKit", "ObjectGraph", "TestSupport"]),
        .testTarget(name: "TerminalUITests", dependencies: ["TerminalUI"]),
    ],
    swiftLanguageModes: [.v6]
)
