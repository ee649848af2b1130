import BLE
import YAML

extension Step {
    /// The security options of `connect` and `pair` (docs/workflow.md, "Security"): the level the link
    /// must reach, what this side brings to a pairing (the device's passkey or OOB data, from the
    /// inventory, as secrets), and what to do when the device lost its bond or refuses a request.
    public struct Security: Sendable, Equatable {
        /// How much protection the link gets.
        public enum Level: String, Sendable, Equatable, CaseIterable {
            /// Never secured: no pairing, no encryption (a request the device refuses fails).
            case none
            /// Encrypted (a stored bond, else pairing: Just Works unless a passkey or OOB data is given).
            case encrypted
            /// Encrypted with MITM protection (Passkey Entry or OOB; a bond made that way).
            case authenticated
            /// Not secured at connect; a request the device refuses for insufficient security secures the
            /// link once (as the refusal asks) and is repeated (`connect` only).
            case auto

            /// The level a link gets at connect.
            public var securityLevel: SecurityLevel {
                switch self {
                case .none, .auto: return .none
                case .encrypted: return .encrypted
                case .authenticated: return .authenticated
                }
            }
        }

        /// What to do when encryption with the stored bond fails because the device no longer has it.
        public enum BondLostPolicy: String, Sendable, Equatable, CaseIterable {
            /// The device fails with `bond_lost` (it is not paired again).
            case fail
            /// Pair again at once, and keep the new bond.
            case pair
        }

        /// The device's OOB data: templates of 32 hex digits each (inventory secrets).
        public struct OOB: Sendable, Equatable {
            public var confirm: Template
            public var random: Template
            public var mark: SourceMark
            public init(confirm: Template, random: Template, mark: SourceMark) {
                self.confirm = confirm
                self.random = random
                self.mark = mark
            }
        }

        public var level: Level
        /// The device's passkey (six digits, an inventory secret).
        public var passkey: Template?
        public var passkeyMark: SourceMark?
        public var oob: OOB?
        /// Allow LE legacy pairing (devices without LE Secure Connections).
        public var legacy: Bool
        /// Ask the device to bond (kept with `--bonds`).
        public var bond: Bool
        public var onBondLost: BondLostPolicy
        /// A request refused for insufficient security secures the link once and is repeated.
        public var upgrade: Bool

        public init(level: Level = .none, passkey: Template? = nil, passkeyMark: SourceMark? = nil, oob: OOB? = nil,
                    legacy: Bool = false, bond: Bool = true, onBondLost: BondLostPolicy = .fail, upgrade: Bool = false) {
            self.level = level
            self.passkey = passkey
            self.passkeyMark = passkeyMark
            self.oob = oob
            self.legacy = legacy
            self.bond = bond
            self.onBondLost = onBondLost
            self.upgrade = upgrade
        }

        /// No security at all (the default of `connect`).
        public static let none = Security()

        /// The templates of the secrets it uses.
        public var templates: [Template] {
            [passkey].compactMap { $0 } + (oob.map { [$0.confirm, $0.random] } ?? [])
        }

        /// The request for a device, its secrets rendered with `lookup`; `level` is the level asked.
        /// Throws (a `ValueError`) when a passkey is not six digits or OOB data is not 16 bytes.
        public func request(level: SecurityLevel, lookup: (String) -> String?) throws -> SecurityRequest {
            var passkeyValue: Passkey?
            if let passkey {
                let digits = try passkey.render(lookup)
                guard let p = Self.passkey(digits) else { throw ValueError("the passkey is not six digits") }
                passkeyValue = p
            }
            var oobValue: OOBData?
            if let oob {
                guard let confirm = Self.oobValue(try oob.confirm.render(lookup)) else { throw ValueError("the OOB `confirm` value is not 16 bytes (32 hex digits)") }
                guard let random = Self.oobValue(try oob.random.render(lookup)) else { throw ValueError("the OOB `random` value is not 16 bytes (32 hex digits)") }
                oobValue = OOBData(random: random, confirm: confirm)
            }
            return SecurityRequest(level: level, passkey: passkeyValue, oob: oobValue, allowLegacy: legacy, bond: bond,
                                   pairIfBondLost: onBondLost == .pair)
        }

        /// Six decimal digits, leading zeros kept ("004217"); nil for anything else.
        public static func passkey(_ text: String) -> Passkey? {
            guard text.utf8.count == 6 else { return nil }
            return Passkey(text)
        }

        /// 16 bytes written as 32 hex digits, most significant first (as an NFC tag or a database prints
        /// them); nil for anything else.
        public static func oobValue(_ text: String) -> UInt128? {
            guard let bytes = [UInt8](hex: text), bytes.count == 16 else { return nil }
            return UInt128(bigEndianBytes: bytes)
        }
    }

    /// `pair`: secure the link at this point (encrypt with a stored bond, else pair).
    public struct Pair: Sendable, Equatable {
        public var security: Security
        public init(security: Security) { self.security = security }
    }
}
