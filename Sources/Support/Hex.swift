extension Array where Element == UInt8 {
    /// Lower-case hex without separators ("0a0b").
    public var hexString: String {
        let digits = Swift.Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for b in self {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses hex digits (spaces, colons, dashes, underscores between bytes and a leading 0x tolerated);
    /// nil when malformed or odd-length.
    public init?(hex: String) {
        // Byte by byte over the UTF-8 (a `Substring` and its `hasPrefix` cost a hundred times more).
        var text = hex
        let parsed: [UInt8]? = text.withUTF8 { utf8 in
            var start = 0
            if utf8.count >= 2, utf8[0] == UInt8(ascii: "0"), utf8[1] == UInt8(ascii: "x") || utf8[1] == UInt8(ascii: "X") { start = 2 }
            var out: [UInt8] = []
            out.reserveCapacity((utf8.count - start) / 2)
            var high: UInt8?
            for c in utf8[start...] {
                let v: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
                case UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    if high != nil { return nil }
                    continue
                default: return nil
                }
                if let h = high {
                    out.append(h << 4 | v)
                    high = nil
                } else {
                    high = v
                }
            }
            return high == nil ? out : nil
        }
        guard let parsed else { return nil }
        self = parsed
    }
}
