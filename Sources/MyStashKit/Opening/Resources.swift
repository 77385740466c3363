import Foundation
import ObjectGraph

/// Config/ as embedded in the binary at build time: the model, seed lists, word lists.
enum Resources {
    static func file(_ path: String) -> Data? {
        EmbeddedConfig.base64Files[path].flatMap { Data(base64Encoded: $0) }
    }

    /// The files of `Config/<name>`, keyed by their path inside it.
    static func folder(_ name: String) -> [String: Data] {
        var files: [String: Data] = [:]
        for (path, base64) in EmbeddedConfig.base64Files where path.hasPrefix(name + "/") {
            files[String(path.dropFirst(name.count + 1))] = Data(base64Encoded: base64)
        }
        return files
    }

    /// Loads every version of the model; each call gives new instances (contexts register
    /// classes on the current one).
    static func modelVersions() throws -> ModelVersions {
        let versions = try ModelVersions(
            xcdatamodeldFiles: folder("MyStash.xcdatamodeld"), modelName: "MyStash.xcdatamodeld",
            // The older versions only for a vault that still needs migrating, and the patterns
            // only for a save (ModelKeysTests compiles every one of them).
            parsingOlderVersionsWhenNeeded: true, deferringPatternChecks: true)
        let model = versions.current
        model.setClass(Note.self, forEntityName: Note.entityName)
        model.setClass(PasswordEntry.self, forEntityName: PasswordEntry.entityName)
        model.setClass(Category.self, forEntityName: Category.entityName)
        model.setClass(SeedList.self, forEntityName: SeedList.entityName)
        model.setClass(CustomField.self, forEntityName: CustomField.entityName)
        model.setClass(PasswordHistoryItem.self, forEntityName: PasswordHistoryItem.entityName)
        model.setClass(SyncStateRow.self, forEntityName: SyncStateRow.entityName)
        model.setClass(Attachment.self, forEntityName: Attachment.entityName)
        model.setClass(AttachmentChunk.self, forEntityName: AttachmentChunk.entityName)
        return versions
    }

    static var wordList: [String] {
        String(decoding: file("Wordlists/eff-large.txt") ?? Data(), as: UTF8.self).split(whereSeparator: \.isNewline)
            .map(String.init)
    }
}
