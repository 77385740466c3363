import Foundation

extension ImportFormat {
    /// The format `file`'s content says it is in: a ZIP archive (Bitwarden's export with
    /// attachments), a KeePass XML document, a CSV whose header
    /// has KeePassXC's columns, a JSON object marked `"format": "mystash-json"`, or one with
    /// Bitwarden's `items` (or `encrypted`) member.
    ///
    /// - throws: ``VaultError`` `.usage` naming what was seen when the content fits no format,
    ///   or fits more than one.
    public static func detect(in file: Data) throws -> ImportFormat {
        if ZipArchive.looksLikeArchive(file) { return .bitwardenZIP }
        var data = file[file.startIndex...]
        if data.starts(with: [0xEF, 0xBB, 0xBF]) { data = data.dropFirst(3) }
        let first = data.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        func unknown(_ seen: String) -> VaultError {
            VaultError.unknownFormat(seen: seen)

        }
        switch first {
        case UInt8(ascii: "{"):
            if let error = JSONSyntax.error(in: file) {
                // Cut short or damaged: refused as the format its first member shows (each writes its
                // own first: mystash's sorted "categories", Bitwarden's "encrypted"), naming the place.
                let head = String(decoding: data.prefix(4096), as: UTF8.self)
                let first = head.firstMatch(of: /^\s*\{\s*"([a-z]+)"\s*:/).map { String($0.1) }
                if first == "categories" || first == "format" && head.contains(#""mystash-json""#) {
                    throw VaultError.invalidFile(.mystashJSON, reason: error)
                }
                if first == "encrypted" || first == "folders" || first == "items" && head.contains(#""type""#) {
                    throw VaultError.invalidFile(.bitwardenJSON, reason: error)
                }
                throw unknown("it starts as JSON but is \(error)")
            }
            let members = JSONSyntax.rootMembers(of: file) ?? []
            let names = Set(members.map(\.name))
            let marked = members.first { $0.name == "format" }.map {
                String(decoding: file[$0.value], as: UTF8.self)
            }
            let bitwarden = names.contains("items") || names.contains("encrypted")
            switch (marked, bitwarden) {
            case ("\"mystash-json\""?, false): return .mystashJSON
            case (nil, true): return .bitwardenJSON
            case (_?, true): throw unknown("a JSON object with both a \"format\" and Bitwarden's \"items\"")
            case (let format?, false): throw unknown("a JSON object whose \"format\" is \(format)")
            case (nil, false): throw unknown("a JSON object with neither \"format\" nor \"items\"")
            }
        case UInt8(ascii: "["):
            throw unknown("JSON whose top level is an array; every format's is an object")
        case UInt8(ascii: "<"):
            // The root element comes within the first lines, after the declaration and comments.
            let head = String(decoding: data.prefix(4096), as: UTF8.self)
            guard head.contains("<KeePassFile") else { throw unknown("XML, but not a KeePass file") }
            return .keepassxcXML
        case nil:
            throw unknown("it is empty")
        default:
            let header = String(decoding: data.prefix(while: { $0 != 0x0A }).prefix(4096), as: UTF8.self)
            let names = CSV.parse(header).first ?? []
            let columns = Set(names.map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
            guard columns.isSuperset(of: ["title", "password"]) else {
                throw unknown("neither JSON, XML nor a CSV with \"Title\" and \"Password\" columns")
            }
            return .keepassxcCSV
        }
    }
}
