/// JSON string literals, escaped exactly as Foundation's `JSONEncoder` writes them with
/// `.withoutEscapingSlashes`: `"` and `\` escaped, `\n` `\r` `\t` `\b` `\f` as short escapes, the other
/// control characters below U+0020 as `\u00XX` (lower-case hex), everything else (DEL, non-ASCII,
/// U+2028) as its UTF-8 bytes.
///
/// The one home for hand-written JSON text: the validation report, the simulator's state journal,
/// report comparisons and values. Output is byte-identical to `JSONEncoder`'s, so a document built by
/// hand and one encoded by Foundation agree.
package enum JSONString {
    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// `s` as a quoted JSON string literal.
    package static func quoted(_ s: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count + 2)
        append(s, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `s` as a quoted JSON string literal to `out`.
    package static func append(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            // Most strings need no escaping: copy them whole.
            guard utf8.contains(where: needsEscape) else {
                out.append(contentsOf: utf8)
                return
            }
            for b in utf8 {
                switch b {
                case UInt8(ascii: "\""): out.append(0x5C); out.append(b)
                case 0x5C: out.append(0x5C); out.append(0x5C)
                case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
                case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
                case 0x08: out.append(0x5C); out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(0x5C); out.append(UInt8(ascii: "f"))
                case 0..<0x20:
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    out.append(hex[Int(b >> 4)])
                    out.append(hex[Int(b & 0xF)])
                default: out.append(b)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// True for a UTF-8 byte that cannot stand in a JSON string as it is.
    @inline(__always)
    private static func needsEscape(_ b: UInt8) -> Bool {
        b < 0x20 || b == UInt8(ascii: "\"") || b == 0x5C
    }
}
