/// Characters that change how a terminal or a viewer shows text instead of being shown: C0 and C1
/// controls (ESC, BEL, CR, LF, TAB, ...) and DEL, the line and paragraph separators (U+2028, U+2029),
/// bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E-U+200F, U+202A-U+202E,
/// U+2066-U+2069), and invisible format characters (U+200B-U+200D, U+2060, U+FEFF).
///
/// Ids, names and addresses in an inventory may not contain them (they are printed on every progress
/// line and in every report); text that comes from a device, a report or a user and is printed for
/// humans goes through `escaped(_:)`, the one escaping function.
public enum ControlCharacters {
    /// Whether `s` is one of these characters.
    public static func contains(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x2028, 0x2029: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        case 0x200B...0x200D, 0x2060, 0xFEFF: return true
        default: return false
        }
    }

    /// The first such character in `text` and its position (1-based, in characters as written).
    public static func first(in text: String) -> (scalar: Unicode.Scalar, position: Int)? {
        for (i, s) in text.unicodeScalars.enumerated() where contains(s) { return (s, i + 1) }
        return nil
    }

    /// `U+001B (ESC)`, `U+202E (RIGHT-TO-LEFT OVERRIDE)`.
    public static func describe(_ s: Unicode.Scalar) -> String {
        let code = "U+" + String(repeating: "0", count: max(0, 4 - String(s.value, radix: 16).count)) + String(s.value, radix: 16, uppercase: true)
        let names: [UInt32: String] = [
            0x00: "NUL", 0x07: "BEL", 0x08: "BACKSPACE", 0x09: "TAB", 0x0A: "LINE FEED", 0x0D: "CARRIAGE RETURN",
            0x1B: "ESC", 0x7F: "DEL", 0x85: "NEXT LINE", 0x9B: "CSI", 0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR",
            0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING", 0x202C: "POP DIRECTIONAL FORMATTING",
            0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE", 0x2066: "LEFT-TO-RIGHT ISOLATE",
            0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE", 0x2069: "POP DIRECTIONAL ISOLATE",
            0x200E: "LEFT-TO-RIGHT MARK", 0x200F: "RIGHT-TO-LEFT MARK", 0x061C: "ARABIC LETTER MARK",
            0x200B: "ZERO WIDTH SPACE", 0x200C: "ZERO WIDTH NON-JOINER", 0x200D: "ZERO WIDTH JOINER", 0x2060: "WORD JOINER",
            0xFEFF: "ZERO WIDTH NO-BREAK SPACE",
        ]
        return names[s.value].map { "\(code) (\($0))" } ?? code
    }

    /// `text` safe to print: each such character written as `\u{1B}` (its code in hex), everything else
    /// as it is.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: contains) else { return text }
        var out = String.UnicodeScalarView()
        for s in text.unicodeScalars {
            if contains(s) {
                out.append(contentsOf: "\\u{\(String(s.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(s)
            }
        }
        return String(out)
    }
}
