/// A firmware or software version such as `2.4.1`, `v10.0.0`, `2.0` or `1.9.0-rc1`, compared in semantic
/// order rather than as text (so `10.0.0 > 2.0`).
///
/// Written form: an optional `v`/`V`, one or more dot-separated numeric components (digits only, at most
/// `maximumComponents`), then optionally `-` and a pre-release (dot-separated identifiers of letters,
/// digits and `-`), then optionally `+` and build metadata (the same characters).
///
/// Order (`<`, `==`, `hash`):
/// - numeric components compare as numbers, left to right; a missing component counts as 0, so
///   `2.0 == 2.0.0` and `2 < 2.0.1`; leading zeros do not matter (`2.04 == 2.4`);
/// - a version with a pre-release sorts before the same version without one (`1.9.0-rc1 < 1.9.0`);
///   pre-releases compare identifier by identifier as SemVer 2.0.0 §11 says: numeric identifiers as
///   numbers, others by ASCII order, numeric before alphanumeric, and a shorter list first when all
///   shared identifiers are equal (`alpha < alpha.1 < beta < rc.1`; note `rc10 < rc2`, ASCII);
/// - build metadata (`+…`) is kept for display and ignored by the order.
///
/// `text` is the version exactly as written, which is what a report shows.
public struct SemanticVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// One pre-release identifier.
    public enum Identifier: Sendable, Hashable, Comparable, CustomStringConvertible {
        case numeric(UInt64)
        case alphanumeric(String)

        public static func < (a: Identifier, b: Identifier) -> Bool {
            switch (a, b) {
            case (.numeric(let x), .numeric(let y)): return x < y
            case (.numeric, .alphanumeric): return true
            case (.alphanumeric, .numeric): return false
            case (.alphanumeric(let x), .alphanumeric(let y)): return x.utf8.lexicographicallyPrecedes(y.utf8)
            }
        }

        public var description: String {
            switch self {
            case .numeric(let n): return String(n)
            case .alphanumeric(let s): return s
            }
        }
    }

    /// More components than this is not a version anyone writes; the bound keeps hostile text cheap.
    public static let maximumComponents = 8

    /// The version as written.
    public let text: String
    /// The numeric components, as written (trailing zeros kept).
    public let components: [UInt64]
    /// The pre-release identifiers (empty for a release).
    public let preRelease: [Identifier]
    /// Build metadata after `+`, if any (ignored by the order).
    public let build: String?

    /// Parses `text`; throws a `ValueError` saying what is wrong when it is not a version.
    public init(parsing text: String) throws(ValueError) {
        self.text = text
        var rest = Substring(text)
        if rest.hasPrefix("v") || rest.hasPrefix("V") { rest = rest.dropFirst() }
        var build: String?
        if let plus = rest.firstIndex(of: "+") {
            let metadata = rest[rest.index(after: plus)...]
            try Self.checkIdentifiers(metadata, part: "build metadata", in: text)
            build = String(metadata)
            rest = rest[..<plus]
        }
        var preRelease: [Identifier] = []
        if let dash = rest.firstIndex(of: "-") {
            let pre = rest[rest.index(after: dash)...]
            try Self.checkIdentifiers(pre, part: "pre-release", in: text)
            preRelease = pre.split(separator: ".", omittingEmptySubsequences: false).map { id in
                if id.utf8.allSatisfy(Self.isDigit), let n = UInt64(id) { return .numeric(n) }
                return .alphanumeric(String(id))
            }
            rest = rest[..<dash]
        }
        guard !rest.isEmpty else { throw Self.notAVersion(text, "it has no numeric components") }
        let parts = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= Self.maximumComponents else {
            throw Self.notAVersion(text, "it has more than \(Self.maximumComponents) components")
        }
        var components: [UInt64] = []
        for (i, part) in parts.enumerated() {
            guard !part.isEmpty else { throw Self.notAVersion(text, "component \(i + 1) is empty") }
            guard part.utf8.allSatisfy(Self.isDigit) else {
                throw Self.notAVersion(text, "component \(i + 1) (\"\(Self.bounded(part))\") is not a number")
            }
            guard let n = UInt64(part) else {
                throw Self.notAVersion(text, "component \(i + 1) is too large")
            }
            components.append(n)
        }
        self.components = components
        self.preRelease = preRelease
        self.build = build
    }

    /// Parses `text`, or nil when it is not a version.
    public init?(_ text: String) {
        guard let v = try? SemanticVersion(parsing: text) else { return nil }
        self = v
    }

    /// The components with trailing zeros removed: the form the order and the hash use.
    private var significant: ArraySlice<UInt64> {
        var end = components.count
        while end > 0, components[end - 1] == 0 { end -= 1 }
        return components[..<end]
    }

    public static func == (a: SemanticVersion, b: SemanticVersion) -> Bool {
        a.significant == b.significant && a.preRelease == b.preRelease
    }

    public func hash(into hasher: inout Hasher) {
        for c in significant { hasher.combine(c) }
        hasher.combine(preRelease)
    }

    public static func < (a: SemanticVersion, b: SemanticVersion) -> Bool {
        let count = max(a.components.count, b.components.count)
        for i in 0..<count {
            let x = i < a.components.count ? a.components[i] : 0
            let y = i < b.components.count ? b.components[i] : 0
            if x != y { return x < y }
        }
        switch (a.preRelease.isEmpty, b.preRelease.isEmpty) {
        case (true, true), (true, false): return false
        case (false, true): return true
        case (false, false): return a.preRelease.lexicographicallyPrecedes(b.preRelease)
        }
    }

    public var description: String { text }

    private static func checkIdentifiers(_ part: Substring, part name: String, in text: String) throws(ValueError) {
        for id in part.split(separator: ".", omittingEmptySubsequences: false) {
            guard !id.isEmpty else { throw notAVersion(text, "its \(name) has an empty identifier") }
            guard id.utf8.allSatisfy({ isDigit($0) || isLetter($0) || $0 == UInt8(ascii: "-") }) else {
                throw notAVersion(text, "its \(name) (\"\(bounded(part))\") may hold only letters, digits, `-` and `.`")
            }
        }
    }

    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
    private static func isLetter(_ b: UInt8) -> Bool { (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") }

    private static func notAVersion(_ text: String, _ reason: String) -> ValueError {
        ValueError("\"\(bounded(Substring(text)))\" is not a version (such as 2.4.1 or 1.9.0-rc1): \(reason)")
    }

    /// Quoted input is bounded so that a hostile string cannot make an error message huge.
    private static func bounded(_ text: Substring) -> String {
        text.count > 40 ? String(text.prefix(40)) + "…" : String(text)
    }
}
