import CXMLReading
import Foundation

/// Why a document could not be read.
public struct XMLReadingError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// libxml2 found the text not well-formed: its error code (`xmlerror.h`) and message.
        case notWellFormed(code: Int, column: Int, message: String)
        /// Elements nested deeper than the reader was told to accept.
        case nestedTooDeep(limit: Int)
        /// libxml2 (`libxml2.so.2`), loaded when a document is first read, is not installed.
        case libraryMissing(String)
        /// Larger than libxml2 reads in one piece.
        case tooLarge(bytes: Int)
    }

    public let reason: Reason
    /// The line the reader was at (1-based; 0 where none applies).
    public let line: Int
    /// The elements open (started, not ended) where the reading stopped: more than none when a
    /// document ends early.
    public var openElements = 0

    public init(reason: Reason, line: Int) {
        self.reason = reason
        self.line = line
    }

    public var description: String {
        switch reason {
        case .notWellFormed(_, let column, let message):
            return "not well-formed XML at line \(line), column \(column): \(message)"
        case .nestedTooDeep(let limit): return "elements nested more than \(limit) deep at line \(line)"
        case .libraryMissing(let detail): return "reading XML needs libxml2, which could not be loaded (\(detail))"
        case .tooLarge(let bytes): return "\(bytes) bytes of XML is more than can be read at once (2 GiB)"
        }
    }
}

/// Receives a document as it is read. Consecutive text comes as one string; a handler's error
/// stops the reading and is what ``XMLReader/read(_:asUTF8:into:)`` throws.
public protocol XMLEventHandler: AnyObject {
    func startElement(_ name: String, attributes: [String: String], line: Int) throws
    func endElement(_ name: String) throws
    func text(_ text: String) throws
}

/// Reads XML with libxml2, loaded on first use so that a program reading none never loads it
/// (nor ICU, which it brings). No network, no external entities, no entities but XML's own:
/// a document declaring more is refused.
public enum XMLReader {
    /// - parameter asUTF8: read the bytes as UTF-8 whatever encoding the document declares (for
    ///   text known to be UTF-8: a declaration of Latin-1 would turn each of its characters into two).
    public static func read(_ data: Data, asUTF8: Bool = false, into handler: XMLEventHandler) throws {
        guard data.count <= Int(Int32.max) else {
            throw XMLReadingError(reason: .tooLarge(bytes: data.count), line: 0)
        }
        let reading = Reading(handler)
        var error = CXMLReading.XMLReadingError()
        let status = withExtendedLifetime(reading) {
            withUnsafeMutablePointer(to: &error) { errorPointer in
                data.withUnsafeBytes { bytes in
                    var callbacks = XMLReadingCallbacks(
                        context: Unmanaged.passUnretained(reading).toOpaque(),
                        startElement: { context, name, attributes, line in
                            let reading = Unmanaged<Reading>.fromOpaque(context!).takeUnretainedValue()
                            var pairs: [String: String] = [:]
                            var cursor = attributes!
                            while let key = cursor[0], let value = cursor[1] {
                                pairs[String(cString: key)] = String(cString: value)
                                cursor += 2
                            }
                            reading.openElements += 1
                            return reading.deliver {
                                try $0.startElement(String(cString: name!), attributes: pairs, line: Int(line))
                            }
                        },
                        endElement: { context, name in
                            let reading = Unmanaged<Reading>.fromOpaque(context!).takeUnretainedValue()
                            reading.openElements -= 1
                            return reading.deliver { try $0.endElement(String(cString: name!)) }
                        },
                        characters: { context, bytes, length in
                            let reading = Unmanaged<Reading>.fromOpaque(context!).takeUnretainedValue()
                            reading.pendingText.append(
                                contentsOf: UnsafeRawBufferPointer(start: bytes, count: Int(length)))
                            return 0
                        })
                    return xml_reading_read(
                        bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count), asUTF8 ? 1 : 0,
                        &callbacks,
                        errorPointer)
                }
            }
        }
        if let failure = reading.failure { throw failure }
        let message = withUnsafeBytes(of: error.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        switch Int(status) {
        case Int(XMLReadingLibraryMissing):
            throw XMLReadingError(reason: .libraryMissing(message), line: 0)
        case Int(XMLReadingNotWellFormed):
            var failure = XMLReadingError(
                reason: .notWellFormed(code: Int(error.code), column: Int(error.column), message: message),
                line: Int(error.line))
            failure.openElements = reading.openElements
            throw failure
        default:
            try reading.flushText()
        }
    }

    /// The handler, the text not yet delivered, and the first error the handler threw.
    private final class Reading {
        let handler: XMLEventHandler
        var pendingText: [UInt8] = []
        var openElements = 0
        var failure: Error?

        init(_ handler: XMLEventHandler) { self.handler = handler }

        func flushText() throws {
            guard !pendingText.isEmpty else { return }
            let text = String(decoding: pendingText, as: UTF8.self)
            pendingText.removeAll(keepingCapacity: true)
            try handler.text(text)
        }

        /// Delivers an element's start or end after the text before it; nonzero stops the reading.
        func deliver(_ event: (XMLEventHandler) throws -> Void) -> Int32 {
            do {
                try flushText()
                try event(handler)
                return 0
            } catch {
                failure = error
                return 1
            }
        }
    }
}
