/// How well a link is protected, as a session asks for it and as the report states it.
///
/// - `none`: no encryption.
/// - `encrypted`: encrypted with a key from pairing without MITM protection (Just Works) or from such a bond.
/// - `authenticated`: encrypted with a key from pairing with MITM protection (Passkey Entry, OOB,
///   Numeric Comparison) or from such a bond.
public enum SecurityLevel: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    case none = 0
    case encrypted = 1
    case authenticated = 2

    public static func < (a: SecurityLevel, b: SecurityLevel) -> Bool { a.rawValue < b.rawValue }

    /// The word used in workflows, reports and logs: "none", "encrypted", "authenticated".
    public var name: String {
        switch self {
        case .none: return "none"
        case .encrypted: return "encrypted"
        case .authenticated: return "authenticated"
        }
    }

    public var description: String { name }
}

/// The protection a link has right now.
public struct LinkSecurity: Sendable, Hashable, CustomStringConvertible {
    public var level: SecurityLevel
    /// Encryption key size in octets (7...16); 0 when the link is not encrypted.
    public var keySize: Int
    /// The key came from LE Secure Connections (false: LE legacy pairing, or not encrypted).
    public var secureConnections: Bool

    public init(level: SecurityLevel, keySize: Int, secureConnections: Bool) {
        self.level = level
        self.keySize = keySize
        self.secureConnections = secureConnections
    }

    /// An unencrypted link.
    public static let none = LinkSecurity(level: .none, keySize: 0, secureConnections: false)

    public var description: String {
        level == .none ? "none" : "\(level) (\(secureConnections ? "LE Secure Connections" : "LE legacy"), \(keySize)-octet key)"
    }
}
