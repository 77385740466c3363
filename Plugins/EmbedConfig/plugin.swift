import Foundation
import PackagePlugin

/// Embeds every file under the package's `Config/` folder into the target as Swift
/// source, so the built binary runs from anywhere without the source tree.
@main
struct EmbedConfig: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let configDirectory = context.package.directoryURL.appending(path: "Config")
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedConfig.swift")
        var inputs: [URL] = []
        if let walker = FileManager.default.enumerator(at: configDirectory, includingPropertiesForKeys: [.isRegularFileKey]) {
            for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
                inputs.append(url)
            }
        }
        return [.buildCommand(
            displayName: "Embedding Config/ into \(target.name)",
            executable: try context.tool(named: "embed-config").url,
            arguments: [configDirectory.path, output.path],
            inputFiles: inputs,
            outputFiles: [output]
        )]
    }
}
