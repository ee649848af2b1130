import BLE
import Digests
import Foundation
import MCUboot

/// The device side of a simulated run: what every virtual device received and where it ended.
/// JSON with sorted keys (`json()`), so two runs with the same seed give byte-identical dumps.
public struct SimulatorDump: Codable, Sendable, Equatable {
    public var seed: UInt64
    /// Every device of the fleet, by id.
    public var devices: [Device]

    public struct Device: Codable, Sendable, Equatable {
        public var id: String
        public var address: String
        public var model: String
        /// Links established.
        public var connections: Int
        /// Connection attempts (established or failed).
        public var connectAttempts: Int
        /// The configuration received (`set_config`), hex.
        public var config: String?
        public var blob: Blob?
        /// The state value, hex (e.g. `02`).
        public var state: String
        public var commits: Int
        /// Every control command received, in order.
        public var commands: [Command]
        /// Faults injected, by name (`connect_fail`, `connect_timeout`, `drop`, `ack_loss`, `busy_ack`).
        public var faults: [String: Int]
        /// Blob bytes that arrived with no blob begun (or after it ended), dropped.
        public var blobBytesDropped: Int
        /// The device's side of pairing and bonding; nil for a device without a Security Manager.
        public var security: Security?
        /// The values written to stored characteristics (`store` behaviour), hex, by `SERVICE/CHARACTERISTIC`.
        public var stored: [String: String] = [:]
        /// The MCUmgr/MCUboot side (`mcumgr:` models): images, uploads, resets, settings, files.
        public var mcumgr: McuMgr?
        /// An ESP unit's provisioning (`esp_prov:` models); absent for other devices.
        public var esp: ESP?

        enum CodingKeys: String, CodingKey {
            case id, address, model, connections, config, blob, state, commits, commands, faults, security, stored, mcumgr, esp
            case connectAttempts = "connect_attempts"
            case blobBytesDropped = "blob_bytes_dropped"
        }

        /// Every key is always present (`null` for no config or no blob), so readers see one schema.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(address, forKey: .address)
            try c.encode(model, forKey: .model)
            try c.encode(connections, forKey: .connections)
            try c.encode(connectAttempts, forKey: .connectAttempts)
            try c.encode(config, forKey: .config)
            try c.encode(blob, forKey: .blob)
            try c.encode(blobBytesDropped, forKey: .blobBytesDropped)
            try c.encode(state, forKey: .state)
            try c.encode(commits, forKey: .commits)
            try c.encode(commands, forKey: .commands)
            try c.encode(faults, forKey: .faults)
            try c.encode(security, forKey: .security)
            try c.encode(stored, forKey: .stored)
            try c.encodeIfPresent(mcumgr, forKey: .mcumgr)
            try c.encodeIfPresent(esp, forKey: .esp)
        }

        public init(id: String, address: String, model: String, connections: Int, connectAttempts: Int, config: String?, blob: Blob?,
                    state: String, commits: Int, commands: [Command], faults: [String: Int], blobBytesDropped: Int,
                    security: Security? = nil, stored: [String: String] = [:], mcumgr: McuMgr? = nil, esp: ESP? = nil) {
            self.id = id
            self.address = address
            self.model = model
            self.connections = connections
            self.connectAttempts = connectAttempts
            self.config = config
            self.blob = blob
            self.state = state
            self.commits = commits
            self.commands = commands
            self.faults = faults
            self.blobBytesDropped = blobBytesDropped
            self.security = security
            self.stored = stored
            self.mcumgr = mcumgr
            self.esp = esp
        }

        /// Reads a dump written by this or an earlier version (which had no `security` or no `stored`).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            address = try c.decode(String.self, forKey: .address)
            model = try c.decode(String.self, forKey: .model)
            connections = try c.decode(Int.self, forKey: .connections)
            connectAttempts = try c.decode(Int.self, forKey: .connectAttempts)
            config = try c.decodeIfPresent(String.self, forKey: .config)
            blob = try c.decodeIfPresent(Blob.self, forKey: .blob)
            state = try c.decode(String.self, forKey: .state)
            commits = try c.decode(Int.self, forKey: .commits)
            commands = try c.decode([Command].self, forKey: .commands)
            faults = try c.decode([String: Int].self, forKey: .faults)
            blobBytesDropped = try c.decode(Int.self, forKey: .blobBytesDropped)
            security = try c.decodeIfPresent(Security.self, forKey: .security)
            stored = try c.decodeIfPresent([String: String].self, forKey: .stored) ?? [:]
            esp = try c.decodeIfPresent(ESP.self, forKey: .esp)
            mcumgr = try c.decodeIfPresent(McuMgr.self, forKey: .mcumgr)
        }
    }

    /// A simulated MCUmgr device's side of a run.
    public struct McuMgr: Codable, Sendable, Equatable {
        public struct Image: Codable, Sendable, Equatable {
            public var version: String
            /// The image's SHA-256 TLV, hex.
            public var hash: String
        }

        /// The running image (slot 0) and whether it is confirmed.
        public var running: Image
        public var confirmed: Bool
        /// Slot 1, when it holds an image, and what it is marked for the next boot (`test`, `permanent`).
        public var secondary: Image?
        public var pending: String?
        /// An upload in the device's RAM: bytes so far of its length.
        public var upload: [Int]?
        public var uploadsStarted: Int
        public var uploadsCompleted: Int
        /// Upload bytes written to flash (resent ones the device took twice included).
        public var uploadBytes: Int
        public var tests: Int
        public var confirms: Int
        public var resets: Int
        public var swaps: Int
        public var reverts: Int
        public var swapFailures: Int
        /// The versions the device booted, in order (the factory image first).
        public var booted: [String]
        /// Settings in RAM, hex, by name.
        public var settings: [String: String]
        /// Files: SHA-256 (hex) by path.
        public var files: [String: String]

        enum CodingKeys: String, CodingKey {
            case running, confirmed, secondary, pending, upload, tests, confirms, resets, swaps, reverts, booted, settings, files
            case uploadsStarted = "uploads_started"
            case uploadsCompleted = "uploads_completed"
            case uploadBytes = "upload_bytes"
            case swapFailures = "swap_failures"
        }
    }


    /// An ESP unit's side of provisioning: the SSID it was given and only the SHA-256 of the passphrase.
    public struct ESP: Codable, Sendable, Equatable {
        public var ssid: String?
        public var passphraseSHA256: String?
        /// Apply commands received.
        public var applies: Int
        /// Sessions secured; handshakes refused for a wrong proof of possession.
        public var sessions: Int
        public var failedProofs: Int
        /// The station: `idle`, `connecting`, `connected`, `connection_failed`.
        public var station: String
        /// What custom endpoints received, `endpoint: text`, in order.
        public var custom: [String]

        enum CodingKeys: String, CodingKey {
            case ssid, applies, sessions, station, custom
            case passphraseSHA256 = "passphrase_sha256"
            case failedProofs = "failed_proofs"
        }
    }

    /// A device's pairings and bonds. No key, no passkey: only who paired, how, and how often.
    public struct Security: Codable, Sendable, Equatable {
        public struct Pairing: Codable, Sendable, Equatable {
            /// The central's address and type.
            public var central: String
            /// `just_works`, `passkey_entry`, `oob`, `numeric_comparison`.
            public var method: String
            /// `encrypted` or `authenticated`.
            public var level: String
            public var secureConnections: Bool
            /// The device kept a bond from it.
            public var bonded: Bool

            enum CodingKeys: String, CodingKey {
                case central, method, level, bonded
                case secureConnections = "secure_connections"
            }
        }

        public var pairings: [Pairing]
        /// Why pairings failed, in order.
        public var pairingFailures: [String]
        /// Links encrypted with a bond the device kept (no pairing).
        public var encryptions: Int
        /// The centrals the device keeps a bond with now.
        public var bonds: [String]

        enum CodingKeys: String, CodingKey {
            case pairings, encryptions, bonds
            case pairingFailures = "pairing_failures"
        }
    }

    public struct Blob: Codable, Sendable, Equatable {
        /// Length announced by the begin-blob command.
        public var expected: Int
        public var received: Int
        /// Whether the end-blob command accepted it.
        public var ended: Bool
        /// SHA-256 of the bytes received, hex.
        public var sha256: String
    }

    public struct Command: Codable, Sendable, Equatable {
        /// Opcode, hex; nil for an empty write.
        public var opcode: String?
        /// Ack status, hex: `00` ok, `01` invalid, `02` busy (not executed), `ff` unknown command.
        public var status: String?
        /// How the link was protected when it arrived: `none`, `encrypted` or `authenticated`.
        public var link: String
        /// Why the device refused it before executing it (its CRC did not match); absent otherwise.
        public var reason: String?

        public init(opcode: String?, status: String?, link: String = "none", reason: String? = nil) {
            self.opcode = opcode
            self.status = status
            self.link = link
            self.reason = reason
        }

        enum CodingKeys: String, CodingKey { case opcode, status, link, reason }

        /// Reads a command of this or an earlier version's dump (which had no `link`: `none`).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            opcode = try c.decodeIfPresent(String.self, forKey: .opcode)
            status = try c.decodeIfPresent(String.self, forKey: .status)
            link = try c.decodeIfPresent(String.self, forKey: .link) ?? "none"
            reason = try c.decodeIfPresent(String.self, forKey: .reason)
        }
    }

    /// The device with this id.
    public func device(_ id: String) -> Device? { devices.first { $0.id == id } }

    /// Pretty JSON with sorted keys.
    public func json() -> String {
        let e = JSONEncoder()
        e.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? e.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    static func device(_ d: VirtualDevice) -> Device {
        let s = d.snapshot
        var blob: Blob?
        if let expected = s.blobExpected {
            var digest = s.blobDigest
            blob = Blob(expected: expected, received: s.blobReceived, ended: s.blobEnded, sha256: digest.finalize().hexString)
        }
        return Device(
            id: d.id, address: d.address.description, model: d.model.name, connections: s.connections,
            connectAttempts: s.connectAttempts, config: s.config?.hexString, blob: blob, state: [s.state].hexString,
            commits: s.commits,
            commands: s.commands.map { Command(opcode: $0.opcode.map { [$0].hexString }, status: $0.status.map { [$0].hexString },
                                               link: $0.link.name, reason: $0.reason) },
            faults: s.faults, blobBytesDropped: s.blobDropped,
            security: d.model.security == nil && s.pairings.isEmpty && s.pairingFailures.isEmpty ? nil : Security(
                pairings: s.pairings.map { Security.Pairing(central: $0.central, method: $0.method.rawValue, level: $0.level.name,
                                                            secureConnections: $0.secureConnections, bonded: $0.keyDigest != nil) },
                pairingFailures: s.pairingFailures, encryptions: s.encryptions, bonds: s.bonds.keys.sorted()),
            stored: Dictionary(uniqueKeysWithValues: s.stored.map { ($0.key.key, $0.value.hexString) }),
            mcumgr: d.smpState.map(mcumgr), esp: d.esp?.summary)
    }

    static func mcumgr(_ m: McuMgrState) -> McuMgr {
        McuMgr(running: McuMgr.Image(version: m.primary.version, hash: m.primary.hash.hexString), confirmed: m.primaryConfirmed,
               secondary: m.secondary.map { McuMgr.Image(version: $0.version, hash: $0.hash.hexString) }, pending: m.pending?.rawValue,
               upload: m.upload.map { [$0.bytes.count, $0.length] }, uploadsStarted: m.uploadsStarted, uploadsCompleted: m.uploadsCompleted,
               uploadBytes: m.uploadBytes, tests: m.tests, confirms: m.confirms, resets: m.resets, swaps: m.swaps, reverts: m.reverts,
               swapFailures: m.swapFailures, booted: m.bootedVersions,
               settings: m.settings.mapValues(\.hexString),
               files: m.files.mapValues { SHA256.hexDigest($0) })
    }
}
