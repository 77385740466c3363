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

    /// Loads the model; each call gives a new instance (contexts register classes on it).
    static func model() throws -> ManagedObjectModel {
        let model = try ManagedObjectModel(xcdatamodeldFiles: folder("MyStash.xcdatamodeld"), modelName: "MyStash.xcdatamodeld")
        model.setClass(Note.self, forEntityName: Note.entityName)
        model.setClass(PasswordEntry.self, forEntityName: PasswordEntry.entityName)
        model.setClass(Category.self, forEntityName: Category.entityName)
        model.setClass(SeedList.self, forEntityName: SeedList.entityName)
        return model
    }

    static var wordList: [String] {
        String(decoding: file("Wordlists/eff-large.txt") ?? Data(), as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
    }
}
