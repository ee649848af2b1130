import BLE
import Support
import YAML

/// Reading values (`ValueSpec`): a part is a one-key mapping naming its encoding, with the options that
/// encoding takes beside it; a list joins parts. Every problem is a diagnostic at its node.
extension NodeReader {
    static let valueKeys = ["hex", "utf8", "base64", "bytes", "file"] + IntegerFormat.allCases.map(\.rawValue)
    /// The options an encoding takes beside its key.
    static let valueOptions: [String: [String]] = ["utf8": ["length", "pad"], "file": ["allow_empty"]]

    /// A value: one part, or a list of parts joined in order. `advice` gives, for a `${name}`, the part
    /// that writes it (from its type), for the hint of a value written without an encoding.
    mutating func valueSpec(_ node: YAMLNode, _ what: String, advice: (String) -> String? = { _ in nil }) -> ValueSpec? {
        if let items = node.sequence {
            if items.isEmpty {
                error("\(what) is an empty list", at: node.mark, hint: "a list of values is joined; give at least one")
                return nil
            }
            var parts: [ValueSpec] = []
            var ok = true
            for item in items {
                if item.sequence != nil {
                    error("a value list cannot contain another list", at: item.mark)
                    ok = false
                } else if let p = valueSpec(item, "a part of \(what)", advice: advice) {
                    parts.append(p)
                } else {
                    ok = false
                }
            }
            return ok ? .concat(parts) : nil
        }
        guard let pairs = node.mapping else {
            if let text = node.scalar, !node.isNull {
                error("\(what) must say how it is encoded", at: node.mark, hint: Self.encodingHint(for: text, advice: advice))
            } else {
                error("\(what) must be a mapping like `{ hex: \"0102\" }`, not \(describe(node))", at: node.mark)
            }
            return nil
        }
        let encodings = pairs.filter { Self.valueKeys.contains($0.key.scalar ?? "") }
        guard encodings.count == 1, let key = encodings[0].key.scalar else {
            if encodings.count > 1 {
                let names = encodings.compactMap(\.key.scalar)
                error("\(what) has \(names.count) encodings (\(names.map { "`\($0)`" }.joined(separator: ", "))); a part has one", at: encodings[1].key.mark,
                      hint: "join parts with a list: `[{ \(names[0]): … }, { \(names[1]): … }]`")
            } else if let crc = pairs.first(where: { $0.key.scalar == "crc" }) {
                let width = (crc.value.scalar.flatMap(CRCAlgorithm.init(name:))?.width).map { "uint\($0)" } ?? "uint16"
                error("a CRC is a number: say how its bytes are written", at: crc.key.mark,
                      hint: "for example `{ \(width)le: { crc: \(crc.value.scalar ?? "CRC-16/CCITT-FALSE"), of: … } }` (or `\(width)be` for the high byte first)")
            } else if pairs.count == 1, let key = pairs[0].key.scalar {
                error("unknown value encoding `\(key)`", at: pairs[0].key.mark,
                      hint: Suggestions.hint(for: key, in: Self.valueKeys) ?? "use one of \(Self.valueKeys.joined(separator: ", "))")
            } else {
                error("\(what) must have exactly one encoding key (\(Self.valueKeys.joined(separator: ", "))), found \(pairs.count)", at: node.mark)
            }
            return nil
        }
        let value = encodings[0].value
        let options = Self.valueOptions[key] ?? []
        var ok = true
        for pair in pairs {
            guard let k = pair.key.scalar, k != key, !options.contains(k) else { continue }
            error("unknown key `\(k)` in a `\(key)` value", at: pair.key.mark,
                  hint: Suggestions.hint(for: k, in: options)
                    ?? (options.isEmpty ? "`\(key):` takes no options; join parts with a list: `[{ \(key): … }, { … }]`"
                                        : "`\(key):` takes \(options.map { "`\($0)`" }.joined(separator: ", "))"))
            ok = false
        }
        guard ok else { return nil }
        switch key {
        case "hex":
            guard let t = template(value, "a hex value") else { return nil }
            for part in t.parts {
                if case .literal(let lit) = part, lit.contains(where: { !($0.isHexDigit || $0 == " " || $0 == ":") }) {
                    error("`\(t.source)` is not valid hex", at: value.mark, hint: "hex is pairs of the digits 0-9 and a-f, like `0a0b`")
                    return nil
                }
            }
            if t.isLiteral, [UInt8](hex: t.source) == nil {
                error("`\(t.source)` is not valid hex (odd number of digits)", at: value.mark,
                      hint: "every byte takes two digits: write `0\(t.source)` or check for a missing digit")
                return nil
            }
            return .hex(t)
        case "utf8":
            return utf8(value, in: node)
        case "base64":
            guard let t = template(value, "a base64 value") else { return nil }
            if t.isLiteral, (try? ValueSpec.base64(t).bytes(variables: { _ in nil }, baseDirectory: "")) == nil {
                error("`\(t.source)` is not valid base64", at: value.mark)
                return nil
            }
            return .base64(t)
        case "bytes":
            guard let t = template(value, "`bytes`") else { return nil }
            guard t.loneReference != nil else {
                error("`bytes:` takes one value captured or declared as bytes, written `\"${name}\"`", at: value.mark,
                      hint: t.isLiteral ? "for bytes written out, use `{ hex: \"\(t.source)\" }`" : "to mix text and values, use `{ hex: … }` or join parts in a list")
                return nil
            }
            return .bytes(t)
        case "file":
            var allowEmpty = false
            if let flag = node["allow_empty"] {
                guard let allow = bool(flag, "`allow_empty`") else { return nil }
                allowEmpty = allow
            }
            return template(value, "a file path").map { .file($0, allowEmpty: allowEmpty) }
        default:
            guard let format = IntegerFormat(rawValue: key) else { return nil }
            return integer(format, value, advice: advice)
        }
    }

    /// `{ utf8: T }`, or a fixed field: `{ utf8: T, length: N, pad: B }`.
    private mutating func utf8(_ value: YAMLNode, in node: YAMLNode) -> ValueSpec? {
        guard let t = template(value, "a utf8 value") else { return nil }
        guard node["length"] != nil || node["pad"] != nil else { return .utf8(t) }
        guard let lengthNode = node["length"] else {
            error("`pad` fills a field of fixed `length`, but this value has none", at: node["pad"]?.mark ?? node.mark,
                  hint: "add `length:` (the field's size in bytes), or remove `pad`")
            return nil
        }
        guard let length = integer(lengthNode, "`length`", in: 1...512) else { return nil }
        var pad: UInt8 = 0
        if let p = node["pad"] {
            guard let byte = integer(p, "`pad` (the byte that fills the field)", in: 0...255) else { return nil }
            pad = UInt8(byte)
        }
        if t.isLiteral, t.source.utf8.count > length {
            error("`\(t.source)` is \(t.source.utf8.count) bytes of UTF-8, longer than its field of \(length)", at: value.mark,
                  hint: "shorten the text or widen the field; text is never cut")
            return nil
        }
        return .utf8Field(t, length: length, pad: pad)
    }

    /// An integer part's value: a number, `{ length_of: FILE }` or `{ crc: ALGORITHM, of: VALUE }`.
    private mutating func integer(_ format: IntegerFormat, _ value: YAMLNode, advice: (String) -> String?) -> ValueSpec? {
        let key = format.rawValue
        if let inner = value.mapping {
            if value["crc"] != nil {
                checkKeys(inner, allowed: ["crc", "of"], in: "`\(key)`")
                guard inner.allSatisfy({ ["crc", "of"].contains($0.key.scalar ?? "") }), let crcNode = value["crc"],
                      let algorithm = crcAlgorithm(crcNode) else { return nil }
                guard ValueSpec.fits(algorithm, in: format) else {
                    let wide = format.unsigned(bits: algorithm.width)
                    error("\(algorithm) gives \(algorithm.width) bits, which do not fit in \(key)", at: crcNode.mark,
                          hint: "write `{ \(wide.rawValue): { crc: \(algorithm), of: … } }`")
                    return nil
                }
                guard let of = value["of"] else {
                    error("`crc` needs `of`: the value to checksum", at: value.mark, hint: "for example `of: [{ uint32le: \"${interval_s}\" }, { utf8: \"${room}\" }]`")
                    return nil
                }
                return valueSpec(of, "`of`", advice: advice).map { .integer(format, .crc(algorithm, $0)) }
            }
            checkKeys(inner, allowed: ["length_of"], in: "`\(key)`")
            guard let source = value["length_of"] else {
                error("`\(key)` takes a number, `{ length_of: FILE }` or `{ crc: ALGORITHM, of: VALUE }`", at: value.mark)
                return nil
            }
            return template(source, "a file path").map { .integer(format, .lengthOf($0)) }
        }
        guard let t = template(value, "an integer") else { return nil }
        if t.isLiteral {
            guard let v = YAMLReader.integer(t.source) else {
                error("`\(t.source)` is not an integer", at: value.mark)
                return nil
            }
            if format.encode(v) == nil {
                error("\(v) does not fit in \(key) (\(format.range.lowerBound)...\(format.range.upperBound))", at: value.mark)
                return nil
            }
        }
        return .integer(format, .literal(t))
    }

    /// A CRC by its catalogue name, with a "did you mean".
    mutating func crcAlgorithm(_ node: YAMLNode) -> CRCAlgorithm? {
        guard let name = string(node, "`crc`") else { return nil }
        if let algorithm = CRCAlgorithm(name: name) { return algorithm }
        let names = CRCAlgorithm.allCases.map(\.rawValue)
        error("unknown CRC `\(name)`", at: node.mark, hint: Suggestions.hint(for: name, in: names) ?? "use one of \(names.joined(separator: ", "))")
        return nil
    }

    /// The hint for a value written without an encoding: the part that writes a lone `${name}` as its
    /// type says (never a part that would refuse it), else hex or text by the look of it.
    static func encodingHint(for text: String, advice: (String) -> String?) -> String {
        if let t = try? Template(parsing: text), let name = t.loneReference, let part = advice(name) {
            return "write `\(part)`"
        }
        return [UInt8](hex: text) != nil ? "write `{ hex: \"\(text)\" }` (or `{ utf8: \"\(text)\" }` for text)"
            : "write `{ utf8: \"\(text)\" }` or `{ hex: \"...\" }`"
    }
}
