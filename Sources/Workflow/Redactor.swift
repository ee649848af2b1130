import BLE
import Foundation

/// Hides the values of secret variables in text: every rendering of a secret, not only its text.
///
/// A secret is known by its value, and a value can be shown in many forms: the text as written; its
/// bytes (the text read as hex when it is hex, else its UTF-8, or what base64 text decodes to) as hex in
/// either case, with or without `:`, `-`, `_` or space between bytes; as base64 (standard or URL-safe,
/// on its own or inside a longer value at any alignment); the UTF-8 text hex bytes spell; and the bytes
/// actually written to a device from a value that used a secret (`add(bytes:)`), in the same forms.
/// Each form is replaced by `***` wherever it appears, so `01${config}` sent as hex, a secret read back
/// in lower case, or a message quoting the bytes written all show `***`.
///
/// The one place a secret leaves text: `Inventory.redact(_:for:)` and the engine's records go through
/// here. Renderings shorter than 2 characters (4 for base64) are not matched (they would hide
/// everything); validation keeps secrets from being that short in practice.
public struct Redactor: Sendable, Equatable {
    /// One form to hide. `foldCase`: ASCII letters match either case (hex).
    struct Pattern: Sendable, Hashable {
        var bytes: [UInt8]
        var foldCase: Bool
    }

    private var patterns: Set<Pattern> = []
    /// The patterns, longest first: a longer form is hidden whole before a shorter one inside it.
    private var longestFirst: [Pattern] = []

    /// What a secret is shown as.
    public static let mask = "***"

    /// A redactor for these secret values (the text of each secret variable of one device).
    public init(secrets: some Sequence<String>) {
        for s in secrets { addSecret(s) }
    }

    /// True when there is nothing to hide.
    public var isEmpty: Bool { patterns.isEmpty }

    /// Adds a secret's text and the bytes it stands for.
    public mutating func addSecret(_ text: String) {
        add(text: Array(text.utf8))
        var bytes: [[UInt8]] = [Array(text.utf8)]
        if let hex = [UInt8](hex: text) { bytes.append(hex) }
        if text.count >= 4, let data = Data(base64Encoded: text) { bytes.append([UInt8](data)) }
        for b in bytes { add(bytes: b) }
    }

    /// Adds bytes that carry a secret (a value written to a device that was made from one), in every form.
    public mutating func add(bytes b: [UInt8]) {
        guard b.count >= 2 else { return }
        let hex = Array(b.hexString.utf8)
        add(hex, foldCase: true)
        for separator in [" ", ":", "-", "_"] {
            add(Array(b.map { [$0].hexString }.joined(separator: separator).utf8), foldCase: true)
        }
        // UTF-8 text those bytes spell (a hex secret read back `as: utf8`).
        if let text = String(validating: b, as: UTF8.self) { add(text: Array(text.utf8)) }
        // base64: the whole encoding, and the characters fixed by the bytes at each alignment inside a
        // longer value.
        let full = Array(Data(b).base64EncodedString().utf8)
        var forms = [full, Array(full.prefix { $0 != UInt8(ascii: "=") })]
        for offset in 0..<3 { forms.append(Self.base64Core(b, offset: offset)) }
        for form in forms where form.count >= 4 {
            add(form, foldCase: false)
            add(form.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }, foldCase: false)
        }
    }

    private mutating func add(text: [UInt8]) {
        guard text.count >= 2 else { return }
        add(text, foldCase: false)
    }

    private mutating func add(_ bytes: [UInt8], foldCase: Bool) {
        let p = Pattern(bytes: foldCase ? bytes.map(Self.lower) : bytes, foldCase: foldCase)
        guard patterns.insert(p).inserted else { return }
        longestFirst = patterns.sorted { $0.bytes.count > $1.bytes.count }
    }

    /// `text` with every rendering of a secret replaced by `***`.
    public func redact(_ text: String) -> String {
        guard !patterns.isEmpty else { return text }
        let hay = Array(text.utf8)
        let folded = hay.map(Self.lower)
        var hidden = [Bool](repeating: false, count: hay.count)
        var found = false
        for p in longestFirst where p.bytes.count <= hay.count {
            let source = p.foldCase ? folded : hay
            let first = p.bytes[0]
            var i = 0
            while i + p.bytes.count <= source.count {
                if source[i] == first, source[i..<(i + p.bytes.count)].elementsEqual(p.bytes) {
                    for k in i..<(i + p.bytes.count) { hidden[k] = true }
                    found = true
                    i += p.bytes.count
                } else {
                    i += 1
                }
            }
        }
        guard found else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(hay.count)
        var i = 0
        while i < hay.count {
            if hidden[i] {
                out.append(contentsOf: Self.mask.utf8)
                while i < hay.count && hidden[i] { i += 1 }
            } else {
                out.append(hay[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func lower(_ b: UInt8) -> UInt8 {
        b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b + 32 : b
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The base64 characters that depend on `b` alone when it starts `offset` bytes into a 3-byte group
    /// of a longer value: what any base64 text containing those bytes at that alignment contains.
    static func base64Core(_ b: [UInt8], offset: Int) -> [UInt8] {
        let start = 8 * offset, end = 8 * (offset + b.count)
        var out: [UInt8] = []
        var i = (start + 5) / 6
        while 6 * i + 6 <= end {
            var v = 0
            for j in 0..<6 {
                let p = 6 * i + j - start
                v = v << 1 | Int((b[p / 8] >> (7 - UInt8(p % 8))) & 1)
            }
            out.append(alphabet[v])
            i += 1
        }
        return out
    }
}
