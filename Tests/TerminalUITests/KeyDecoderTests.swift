import TerminalUI
import XCTest

final class KeyDecoderTests: XCTestCase {
    func decode(_ bytes: [UInt8]) -> [Key] {
        var decoder = KeyDecoder()
        return decoder.feed(bytes)
    }

    func testArrowsFromXtermTheLinuxConsoleAndApplicationMode() {
        XCTAssertEqual(decode(Array("\u{1B}[A\u{1B}[B\u{1B}OC\u{1B}OD".utf8)), [.up, .down, .right, .left])
        XCTAssertEqual(decode(Array("\u{1B}[1~\u{1B}[4~\u{1B}[H\u{1B}OF\u{1B}[5~\u{1B}[6~\u{1B}[3~\u{1B}[Z".utf8)),
                       [.home, .end, .home, .end, .pageUp, .pageDown, .delete, .backTab])
        XCTAssertEqual(decode(Array("\u{1B}[1;5A".utf8)), [.up], "modifiers are read past")
    }

    func testControlKeysAndUTF8Characters() {
        XCTAssertEqual(decode([0x03, 0x0D, 0x7F, 0x09, 0x15]), [.control("c"), .enter, .backspace, .tab, .control("u")])
        XCTAssertEqual(decode(Array("é漢🙂a".utf8)),
                       [.character("é"), .character("漢"), .character("🙂"), .character("a")])
        XCTAssertEqual(decode(Array("\u{1B}x".utf8)), [.alt("x")])
    }

    func testSequencesSplitAcrossReadsWaitForTheirRest() {
        var decoder = KeyDecoder()
        XCTAssertEqual(decoder.feed([0x1B]), [])
        XCTAssertTrue(decoder.hasPendingEscape)
        XCTAssertEqual(decoder.feed([UInt8(ascii: "[")]), [])
        XCTAssertEqual(decoder.feed([UInt8(ascii: "A")]), [.up])
        let snowman = Array("漢".utf8)
        XCTAssertEqual(decoder.feed(Array(snowman.prefix(2))), [])
        XCTAssertEqual(decoder.feed(Array(snowman.suffix(1))), [.character("漢")])
    }

    func testALoneEscapeIsTheEscapeKeyOnlyWhenFlushed() {
        var decoder = KeyDecoder()
        XCTAssertEqual(decoder.feed([0x1B]), [])
        XCTAssertEqual(decoder.flushEscape(), [.escape])
        XCTAssertEqual(decoder.feed([0x1B, 0x1B]), [.escape])
    }

    func testInvalidBytesAreSkippedNotTrapped() {
        XCTAssertEqual(decode([0xFF, 0x80, UInt8(ascii: "a"), 0xC3, UInt8(ascii: "b")]),
                       [.character("a"), .character("b")])
        // Random bytes never crash the decoder.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var decoder = KeyDecoder()
            let count = Int.random(in: 1...24, using: &generator)
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = decoder.feed(bytes)
            _ = decoder.flushEscape()
        }
    }
}

final class TextWidthTests: XCTestCase {
    func testWideCombiningAndControlCharacters() {
        XCTAssertEqual(TextWidth.columns(of: "abc"), 3)
        XCTAssertEqual(TextWidth.columns(of: "a\r\nb"), 3, "CR LF is one character, not two columns")
        XCTAssertEqual(TextWidth.columns(of: "漢字"), 4)
        XCTAssertEqual(TextWidth.columns(of: "e\u{301}"), 1, "a combining accent takes no column")
        XCTAssertEqual(TextWidth.columns(of: "🙂"), 2)
        XCTAssertEqual(TextWidth.sanitized("a\u{1B}[2Jb\u{9B}c\nd"), "a\u{FFFD}[2Jb\u{FFFD}c d",
                       "escape sequences in data cannot reach the terminal")
    }

    func testTruncationNeverExceedsTheWidth() {
        XCTAssertEqual(TextWidth.truncated("abcdef", to: 4), "abc…")
        XCTAssertEqual(TextWidth.truncated("漢字漢字", to: 5), "漢字…")
        XCTAssertEqual(TextWidth.fitted("漢", to: 3), "漢 ")
        for text in ["漢字漢字", "a🙂b🙂c", "e\u{301}e\u{301}e\u{301}", "plain text"] {
            for width in 1...10 {
                let cut = TextWidth.truncated(text, to: width)
                XCTAssertLessThanOrEqual(TextWidth.columns(of: cut), width, "\(text) at \(width)")
                XCTAssertEqual(TextWidth.columns(of: TextWidth.fitted(text, to: width)), width, "\(text) at \(width)")
            }
        }
    }
}

final class RendererTests: XCTestCase {
    func testOnlyChangedRowsAreRedrawnAndNoColorKeepsAttributes() {
        var renderer = Renderer(environment: ["NO_COLOR": "1"])
        XCTAssertFalse(renderer.colors)
        var canvas = Canvas(rows: 3, columns: 10)
        canvas.draw("one", row: 0)
        canvas.draw("two", row: 1, style: Style(reverse: true, foreground: .red))
        let first = renderer.update(to: canvas)
        XCTAssertTrue(first.contains("\u{1B}[2;1H\u{1B}[0;7mtwo"), first.debugDescription)
        XCTAssertFalse(first.contains(";31m"), "no colour under NO_COLOR")
        canvas = Canvas(rows: 3, columns: 10)
        canvas.draw("one", row: 0)
        canvas.draw("TWO", row: 1, style: Style(reverse: true))
        let second = renderer.update(to: canvas)
        XCTAssertFalse(second.contains("\u{1B}[1;1H"), "an unchanged row is not sent again")
        XCTAssertTrue(second.contains("TWO"))
        XCTAssertTrue(Renderer(environment: [:]).colors)
    }

    func testDrawingStaysInsideTheCanvas() {
        var canvas = Canvas(rows: 2, columns: 5)
        canvas.draw("a long line of text", row: 0)
        canvas.draw("漢字漢字", row: 1, column: 2)
        canvas.draw("outside", row: 5)
        XCTAssertEqual(canvas.text(ofRow: 0), "a lo…")
        XCTAssertLessThanOrEqual(TextWidth.columns(of: canvas.text(ofRow: 1)), 5)
    }
}
