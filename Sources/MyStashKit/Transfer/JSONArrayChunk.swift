import Foundation

/// Pretty-printed JSON arrays written a chunk of elements at a time: `JSONEncoder` builds a tree
/// of everything it is given before it writes a byte, which for a whole vault is several times
/// the vault's size.
public enum JSONArrayChunk {
    /// The elements of `values` as `encoder` writes them inside an array nested `depth` levels
    /// deep (two spaces a level, as `.prettyPrinted` indents), without the array's brackets or a
    /// comma after the last: the bytes the same encoder would give them inside the whole
    /// document. `values` must not be empty.
    public static func elements<T: Encodable>(_ values: [T], encoder: JSONEncoder, depth: Int) throws -> [UInt8] {
        let array = try encoder.encode(values)
        // "[\n" and "\n]" around the elements, which are indented one level.
        let inner = array.dropFirst(2).dropLast(2)
        guard depth > 0 else { return Array(inner) }
        let indent = [UInt8](repeating: UInt8(ascii: " "), count: 2 * depth)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(inner.count + inner.count / 8)
        var atLineStart = true
        for byte in inner {
            // A newline only ever ends a line of structure (strings escape theirs); an empty
            // line (an empty array's) stays empty, as the encoder writes it.
            if atLineStart, byte != UInt8(ascii: "\n") { bytes += indent }
            bytes.append(byte)
            atLineStart = byte == UInt8(ascii: "\n")
        }
        return bytes
    }
}

/// One pretty-printed JSON array at a time, member of an object nested `depth` levels deep,
/// written as its elements come: "[", the elements a chunk at a time, then "]" at ``close(to:)``.
struct JSONArrayWriter {
    let encoder: JSONEncoder
    let depth: Int
    private var isOpen = false
    private var isEmpty = true

    init(encoder: JSONEncoder, depth: Int) {
        self.encoder = encoder
        self.depth = depth
    }

    mutating func write<Element: Encodable>(_ elements: [Element], to output: ([UInt8]) throws -> Void) throws {
        if !isOpen {
            try output(Array("[".utf8))
            isOpen = true
        }
        guard !elements.isEmpty else { return }
        let elements = try JSONArrayChunk.elements(elements, encoder: encoder, depth: depth)
        try output(Array((isEmpty ? "\n" : ",\n").utf8) + elements)
        isEmpty = false
    }

    /// Ends the array as the encoder ends one: an empty array keeps an empty line.
    mutating func close(to output: ([UInt8]) throws -> Void) throws {
        let indent = String(repeating: "  ", count: depth)
        try output(Array(((isOpen ? "" : "[") + (isEmpty ? "\n\n" : "\n") + indent + "]").utf8))
        isOpen = false
        isEmpty = true
    }
}
