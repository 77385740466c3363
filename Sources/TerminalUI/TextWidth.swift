/// How many terminal columns text takes, and text cut or padded to a width, the way
/// terminals lay it out (wcwidth): East Asian wide and emoji characters take two columns,
/// combining marks none. Control characters are never passed through: a name holding an
/// escape sequence must not be able to drive the terminal, so they show as `�`.
public enum TextWidth {
    /// The columns one grapheme cluster takes (0, 1 or 2), after ``sanitized(_:)``.
    public static func columns(of character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if first.value < 0x7F { return 1 }
        if isZeroWidth(first) { return 0 }
        if character.unicodeScalars.contains(where: { $0.value == 0xFE0F }) { return 2 }
        return isWide(first) ? 2 : 1
    }

    /// Whether every byte is printable ASCII (space to `~`): nearly every cell of a list, which
    /// needs neither grapheme breaking nor neutralising.
    public static func isPrintableASCII(_ text: String) -> Bool {
        // Over the contiguous bytes: a list asks this of every cell, and the UTF-8 view's
        // iterator was most of that cost.
        var text = text
        return text.withUTF8 { bytes in bytes.allSatisfy { $0 &- 0x20 < 0x5F } }
    }

    /// The columns a string takes.
    public static func columns(of text: String) -> Int {
        if isPrintableASCII(text) { return text.utf8.count }
        var total = 0
        for character in text { total += columns(of: character) }
        return total
    }

    /// Replaces control characters (C0, DEL, C1) and line breaks with `�` or a space.
    public static func sanitized(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "\n" || scalar == "\t" || scalar == "\r" {
                result.append(" ")
            } else if isControl(scalar) {
                result.append("\u{FFFD}")
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// `text` cut to at most `width` columns, ending in `…` when cut.
    public static func truncated(_ text: String, to width: Int) -> String {
        guard width > 0 else { return "" }
        let clean = sanitized(text)
        if clean.utf8.count <= width, !clean.utf8.contains(where: { $0 >= 0x80 }) {
            return clean
        }
        guard columns(of: clean) > width else { return clean }
        var result = ""
        var used = 0
        for character in clean {
            let size = columns(of: character)
            if used + size > width - 1 { break }
            result.append(character)
            used += size
        }
        return result + "…"
    }

    /// `text` cut or padded with spaces to exactly `width` columns.
    public static func fitted(_ text: String, to width: Int) -> String {
        let cut = truncated(text, to: width)
        let used = columns(of: cut)
        return used < width ? cut + String(repeating: " ", count: width - used) : cut
    }

    /// `text` broken into lines of at most `width` columns, at its own line breaks and
    /// wherever a line runs out of room.
    public static func wrapped(_ text: String, to width: Int) -> [String] {
        guard width > 0 else { return [] }
        var lines: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            var used = 0
            for character in sanitized(String(paragraph)) {
                let size = columns(of: character)
                if used + size > width {
                    lines.append(line)
                    line = ""
                    used = 0
                }
                line.append(character)
                used += size
            }
            lines.append(line)
        }
        return lines
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    static func isZeroWidth(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return true
        default: return scalar.value == 0x200B || (0x1160...0x11FF).contains(scalar.value)
        }
    }

    /// East Asian Wide and Fullwidth ranges, and pictographs shown as emoji.
    static func isWide(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        switch value {
        case 0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0, 0x23F3,
             0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F, 0x2693, 0x26A1, 0x26AA...0x26AB,
             0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE, 0x26D4, 0x26EA, 0x26F2...0x26F3, 0x26F5, 0x26FA,
             0x26FD, 0x2705, 0x270A...0x270B, 0x2728, 0x274C, 0x274E, 0x2753...0x2755, 0x2757,
             0x2795...0x2797, 0x27B0, 0x27BF, 0x2B1B...0x2B1C, 0x2B50, 0x2B55,
             0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F,
             0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x18CFF, 0x1B000...0x1B2FF, 0x1F004, 0x1F0CF,
             0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F251, 0x1F300...0x1F64F, 0x1F680...0x1F6FF,
             0x1F7E0...0x1F7EB, 0x1F90C...0x1F9FF, 0x1FA70...0x1FAFF, 0x20000...0x3FFFD:
            return true
        default:
            return false
        }
    }
}
