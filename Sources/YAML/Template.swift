/// A string with `${name}` references, parsed once: the one template language of workflow values,
/// inventory paths and simulator models. `$${` writes a literal `${`.
///
/// Names are letters, digits, `_`, `-` and `.`, starting with a letter or `_`. In a workflow, references
/// resolve, in order, to a value captured by an earlier `read` step, a built-in (`id`, `name`, `address`)
/// or an inventory variable, and validation proves every reference resolves before anything runs; in a
/// simulator model, to the model's `defaults:` and the device's variables.
public struct Template: Sendable, Equatable, CustomStringConvertible {
    /// One piece of a template.
    public enum Part: Sendable, Equatable {
        case literal(String)
        case reference(String, SourceMark)
    }

    /// Why a template could not be parsed or rendered.
    public struct TemplateError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var mark: SourceMark
        public var description: String { message }
    }

    /// What a reference without a value means, said in the words of where the template comes from.
    public enum MissingName: Sendable, Equatable {
        /// A workflow's value: "`${x}` has no value" (a capture that was not made, a variable a device
        /// lacks).
        case noValue
        /// A simulator model's: the variable is not defined ("define it under `defaults:` or per device").
        case undefinedVariable

        func message(_ name: String) -> String {
            switch self {
            case .noValue: return "`${\(name)}` has no value"
            case .undefinedVariable: return "unknown variable `${\(name)}`; define it under `defaults:` or per device"
            }
        }
    }

    public let source: String
    public let parts: [Part]

    /// Built-in names every device has (when the inventory gives them).
    public static let builtins: Set<String> = ["id", "name", "address"]

    /// A template holding only literal text (no references).
    public init(literal text: String) {
        source = text
        parts = text.isEmpty ? [] : [.literal(text)]
    }

    /// A template that is one reference (`${name}`), for a default.
    public init(reference name: String) {
        source = "${\(name)}"
        parts = [.reference(name, SourceMark(line: 1, column: 1))]
    }

    /// Parses `text`. `mark` is where the text starts in its file; references get marks offset from it
    /// when the text sits on one line.
    public init(parsing text: String, at mark: SourceMark = SourceMark(line: 1, column: 1)) throws(TemplateError) {
        source = text
        var parts: [Part] = []
        var literal = ""
        let chars = Array(text.unicodeScalars)
        var i = 0
        let singleLine = !text.contains("\n")
        func markAt(_ offset: Int) -> SourceMark {
            singleLine ? SourceMark(line: mark.line, column: mark.column + offset) : mark
        }
        while i < chars.count {
            let c = chars[i]
            if c == "$", i + 1 < chars.count {
                if chars[i + 1] == "$", i + 2 < chars.count, chars[i + 2] == "{" {
                    literal += "${"
                    i += 3
                    continue
                }
                if chars[i + 1] == "{" {
                    guard let close = chars[(i + 2)...].firstIndex(of: "}") else {
                        throw TemplateError(message: "unterminated `${` in \"\(text)\"", mark: markAt(i))
                    }
                    let name = String(String.UnicodeScalarView(chars[(i + 2)..<close]))
                    guard Self.isValidName(name) else {
                        throw TemplateError(
                            message: name.isEmpty ? "empty reference `${}`" : "`${\(name)}` is not a valid variable name",
                            mark: markAt(i + 2))
                    }
                    if !literal.isEmpty { parts.append(.literal(literal)) }
                    literal = ""
                    parts.append(.reference(name, markAt(i)))
                    i = close + 1
                    continue
                }
            }
            literal.unicodeScalars.append(c)
            i += 1
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
    }

    /// True when `name` can be a variable name.
    public static func isValidName(_ name: String) -> Bool {
        func letter(_ c: Unicode.Scalar) -> Bool { c.isASCII && c.properties.isAlphabetic }
        guard let first = name.unicodeScalars.first, letter(first) || first == "_" else { return false }
        return name.unicodeScalars.allSatisfy { letter($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" || $0 == "." }
    }

    /// The referenced names with where each appears, in order (duplicates kept).
    public var references: [(name: String, mark: SourceMark)] {
        parts.compactMap {
            if case .reference(let name, let mark) = $0 { return (name, mark) }
            return nil
        }
    }

    /// The referenced names.
    public var referencedNames: [String] { references.map(\.name) }

    /// True when the template has no references.
    public var isLiteral: Bool { references.isEmpty }

    /// Substitutes every reference; throws when `lookup` has no value for one (saying so as `missing`
    /// says).
    public func render(_ lookup: (String) -> String?, missing: MissingName = .noValue) throws(TemplateError) -> String {
        if case .literal(let text)? = parts.first, parts.count == 1 { return text }
        var out = ""
        for part in parts {
            switch part {
            case .literal(let text): out += text
            case .reference(let name, let mark):
                guard let value = lookup(name) else {
                    throw TemplateError(message: missing.message(name), mark: mark)
                }
                out += value
            }
        }
        return out
    }

    public var description: String { source }
}
