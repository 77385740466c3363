// swift-tools-version:6.1
import PackageDescription
#if canImport(Glibc)
import Glibc
#endif

/// Our functions each in a section of its own, for the linker to order (scripts/link-order).
let functionSections: [SwiftSetting] = [.unsafeFlags(["-Xfrontend", "-function-sections"])]
let linkOrder = String(#filePath.dropLast("Package.swift".count)) + "scripts/link-order.txt"
/// Packed relative relocations (17 KB where the table the loader reads at every start is 2.2 MB)
/// need glibc 2.36 to start: used where the building machine has it.
let packedRelocations: [String] = {
    #if canImport(Glibc)
    var name = [CChar](repeating: 0, count: 64)  // "glibc 2.36"
    _ = confstr(Int32(_CS_GNU_LIBC_VERSION), &name, name.count)
    let version = String(cString: name).split(separator: " ").last?.split(separator: ".").compactMap { Int($0) } ?? []
    if version.count >= 2, (version[0], version[1]) >= (2, 36) {
        return ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
    }
    #endif
    return []
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
        // SQLite's process-wide settings, through its variadic sqlite3_config.
        .target(name: "CSQLiteSupport", linkerSettings: [.linkedLibrary("sqlite3")]),
        // libxml2 loaded when XML is first read (its layout checked against its headers if installed).
        .target(
            name: "CXMLReading", cSettings: [.unsafeFlags(["-I/usr/include/libxml2"])],
            linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "XMLReading", dependencies: ["CXMLReading"]),
        .target(
            name: "StashCrypto", dependencies: ["COpenSSL"], exclude: ["FORMAT.md"], swiftSettings: functionSections),
        // The terminal under `mystash browse`: raw mode, keys, resizes, width-aware drawing.
        .target(name: "TerminalUI", swiftSettings: functionSections),
        .target(
            name: "ObjectGraph",
            dependencies: ["CZlib", "CSQLiteSupport", "XMLReading", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: functionSections),
        .executableTarget(name: "embed-config", dependencies: ["XMLReading"]),
        .plugin(name: "EmbedConfig", capability: .buildTool(), dependencies: ["embed-config"]),
        // What the vault and its command line need from the machine: child processes, the
        // clipboard, the kernel keyring.
        .target(
            name: "StashPlatform", dependencies: ["StashCrypto", "CLinuxSupport"], swiftSettings: functionSections),
        .target(
            name: "MyStashKit",
            dependencies: ["ObjectGraph", "StashCrypto", "StashPlatform", "CLinuxSupport", "XMLReading"],
            swiftSettings: functionSections,
            plugins: ["EmbedConfig"]
        ),
        .executableTarget(
            name: "mystash",
            dependencies: ["MyStashKit", "StashCrypto", "StashPlatform", "CLinuxSupport", "TerminalUI", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            // The Swift runtime and Foundation linked in (see FoundationBridging.swift), in debug
            // builds too so that the tests run what ships. The toolchain's lld puts the functions
            // everyday commands run together (scripts/link-order), packs the relocations where it
            // may, and leaves out the static link's export of our symbols, which nothing looks up
            // at run time.
            swiftSettings: [.unsafeFlags(["-static-stdlib", "-Xfrontend", "-function-sections"])],
            linkerSettings: [.unsafeFlags([
                "-static-stdlib", "-use-ld=lld", "-Xlinker", "--no-export-dynamic",
                "-Xlinker", "--symbol-ordering-file=" + linkOrder, "-Xlinker", "--no-warn-symbol-ordering",
            ] + packedRelocations)]
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
        .testTarget(name: "ObjectGraphTests", dependencies: ["ObjectGraph", "XMLReading", "TestSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "StashCryptoTests", dependencies: ["StashCrypto"], resources: [.copy("Vectors")]),
        .testTarget(name: "MyStashKitTests", dependencies: ["MyStashKit", "StashCrypto", "StashPlatform", "ObjectGraph", "TestSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "MyStashCLITests", dependencies: ["MyStashKit", "StashPlatform", "ObjectGraph", "TestSupport"]),
        .testTarget(name: "TerminalUITests", dependencies: ["TerminalUI"]),
    ],
    swiftLanguageModes: [.v6]
)
