import Foundation

/// An element of a document read whole: its attributes, its text and the elements inside it.
public final class XMLTreeElement {
    public let name: String
    public let attributes: [String: String]
    /// The line of its start tag (1-based).
    public let line: Int
    public fileprivate(set) var children: [XMLTreeElement] = []
    /// Its own text, joined (whitespace between its children included); nil when it has none.
    public fileprivate(set) var text: String?

    init(name: String, attributes: [String: String], line: Int) {
        self.name = name
        self.attributes = attributes
        self.line = line
    }

    /// The first element inside this one named `name`.
    public func child(_ name: String) -> XMLTreeElement? { children.first { $0.name == name } }

    public func children(named name: String) -> [XMLTreeElement] { children.filter { $0.name == name } }

    /// Reads a whole document into its root element, refusing elements nested deeper than
    /// `maximumDepth`: the tree and what walks it recurse, so a deeper one would overflow the stack.
    public static func read(_ data: Data, maximumDepth: Int = 256) throws -> XMLTreeElement {
        let builder = Builder(maximumDepth: maximumDepth, handingOver: nil)
        return try builder.root(reading: data, asUTF8: false)
    }

    /// Reads a document as ``read(_:maximumDepth:)`` does, but hands each element named
    /// `handedOver` to `receive` as soon as it ends, with the elements it is in (outermost first,
    /// each holding what came before it), and leaves it out of the tree: a document of many such
    /// elements is never held whole. One inside another stays in that one's tree. `asUTF8` as for
    /// ``XMLReader/read(_:asUTF8:into:)``.
    public static func read(
        _ data: Data, maximumDepth: Int = 256, asUTF8: Bool = false, handingOver handedOver: String,
        to receive: (XMLTreeElement, [XMLTreeElement]) throws -> Void
    ) throws -> XMLTreeElement {
        try withoutActuallyEscaping(receive) { receive in
            let builder = Builder(maximumDepth: maximumDepth, handingOver: (handedOver, receive))
            return try builder.root(reading: data, asUTF8: asUTF8)
        }
    }

    /// Hands the element and all inside it to `handler` as a reading would, its text first.
    public func replay(into handler: XMLEventHandler) throws {
        try handler.startElement(name, attributes: attributes, line: line)
        if let text { try handler.text(text) }
        for child in children { try child.replay(into: handler) }
        try handler.endElement(name)
    }

    private final class Builder: XMLEventHandler {
        typealias Receiver = (XMLTreeElement, [XMLTreeElement]) throws -> Void
        let maximumDepth: Int
        let handingOver: (name: String, receive: Receiver)?
        var root: XMLTreeElement?
        /// The open elements, each with its text so far in pieces (joined when it ends: added
        /// up as it came, the text of an element with many children was copied once per child).
        var stack: [(element: XMLTreeElement, text: [String])] = []
        /// How many of the open elements are handed over when they end.
        var openHandedOver = 0

        init(maximumDepth: Int, handingOver: (name: String, receive: Receiver)?) {
            self.maximumDepth = maximumDepth
            self.handingOver = handingOver
        }

        /// Reads `data` into the tree; its root element.
        func root(reading data: Data, asUTF8: Bool) throws -> XMLTreeElement {
            try XMLReader.read(data, asUTF8: asUTF8, into: self)
            guard let root else {
                throw XMLReadingError(
                    reason: .notWellFormed(code: 4, column: 0, message: "no element in the document"), line: 1)
            }
            return root
        }

        func startElement(_ name: String, attributes: [String: String], line: Int) throws {
            guard stack.count < maximumDepth else {
                throw XMLReadingError(reason: .nestedTooDeep(limit: maximumDepth), line: line)
            }
            let element = XMLTreeElement(name: name, attributes: attributes, line: line)
            if let parent = stack.last { parent.element.children.append(element) } else { root = element }
            stack.append((element, []))
            if name == handingOver?.name { openHandedOver += 1 }
        }

        func endElement(_ name: String) throws {
            guard let (element, text) = stack.popLast() else { return }
            if !text.isEmpty { element.text = text.count == 1 ? text[0] : text.joined() }
            guard let handingOver, name == handingOver.name else { return }
            openHandedOver -= 1
            guard openHandedOver == 0, let parent = stack.last?.element else { return }
            parent.children.removeLast()
            try handingOver.receive(element, stack.map(\.element))
        }

        func text(_ text: String) throws {
            guard !stack.isEmpty else { return }
            stack[stack.count - 1].text.append(text)
        }
    }
}

// MARK: - A compiled form

/// A tree kept in a compact binary form, for a document that a program reads at every start
/// (the model a build embeds): read back without libxml2 and without parsing text.
extension XMLTreeElement {
    private static let magic = Array("XMLTREE\u{1}".utf8)

    public static func isCompiled(_ data: Data) -> Bool { data.starts(with: magic) }

    /// The element and all inside it, for ``init(compiled:maximumDepth:)``.
    public func compiled() -> Data {
        var bytes = Self.magic
        write(to: &bytes)
        return Data(bytes)
    }

    private func write(to bytes: inout [UInt8]) {
        func number(_ value: Int) {
            var rest = UInt64(value)
            repeat {
                bytes.append(UInt8(rest & 0x7F) | (rest >= 0x80 ? 0x80 : 0))
                rest >>= 7
            } while rest != 0
        }
        func string(_ value: String) {
            number(value.utf8.count)
            bytes.append(contentsOf: value.utf8)
        }
        string(name)
        number(line)
        number(attributes.count)
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
            string(key)
            string(value)
        }
        number(text == nil ? 0 : 1)
        if let text { string(text) }
        number(children.count)
        for child in children { child.write(to: &bytes) }
    }

    /// Reads what ``compiled()`` wrote; anything else is refused, never trusted.
    public convenience init(compiled data: Data, maximumDepth: Int = 256) throws {
        var reader = CompiledReader(bytes: [UInt8](data), offset: Self.magic.count)
        guard Self.isCompiled(data) else { throw reader.damaged() }
        try self.init(reading: &reader, depth: 1, maximumDepth: maximumDepth)
        guard reader.offset == reader.bytes.count else { throw reader.damaged() }
    }

    private convenience init(reading reader: inout CompiledReader, depth: Int, maximumDepth: Int) throws {
        guard depth <= maximumDepth else { throw reader.damaged() }
        let name = try reader.string()
        let line = try reader.number()
        var attributes: [String: String] = [:]
        for _ in 0..<(try reader.number(atMost: reader.remaining)) {
            attributes[try reader.string()] = try reader.string()
        }
        self.init(name: name, attributes: attributes, line: line)
        if try reader.number(atMost: 1) == 1 { text = try reader.string() }
        for _ in 0..<(try reader.number(atMost: reader.remaining)) {
            children.append(try XMLTreeElement(reading: &reader, depth: depth + 1, maximumDepth: maximumDepth))
        }
    }

    private struct CompiledReader {
        let bytes: [UInt8]
        var offset: Int
        var remaining: Int { bytes.count - offset }

        func damaged() -> XMLReadingError {
            XMLReadingError(
                reason: .notWellFormed(code: 0, column: 0, message: "a compiled tree damaged at byte \(offset)"),
                line: 0)
        }

        mutating func number(atMost limit: Int = Int(Int32.max)) throws -> Int {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while offset < bytes.count, shift < 35 {
                let byte = bytes[offset]
                offset += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 {
                    guard value <= UInt64(limit) else { throw damaged() }
                    return Int(value)
                }
                shift += 7
            }
            throw damaged()
        }

        mutating func string() throws -> String {
            let count = try number()
            guard count <= remaining else { throw damaged() }
            defer { offset += count }
            return String(decoding: bytes[offset..<offset + count], as: UTF8.self)
        }
    }
}
