import Digests

/// Characteristic properties (Vol 3 Part G 3.3.1.1).
public struct GATTProperties: OptionSet, Sendable, Hashable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let broadcast = GATTProperties(rawValue: 0x01)
    public static let read = GATTProperties(rawValue: 0x02)
    public static let writeWithoutResponse = GATTProperties(rawValue: 0x04)
    public static let write = GATTProperties(rawValue: 0x08)
    public static let notify = GATTProperties(rawValue: 0x10)
    public static let indicate = GATTProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = GATTProperties(rawValue: 0x40)
    public static let extendedProperties = GATTProperties(rawValue: 0x80)

    /// Names for diagnostics: "read, notify".
    public var names: [String] {
        var out: [String] = []
        if contains(.broadcast) { out.append("broadcast") }
        if contains(.read) { out.append("read") }
        if contains(.writeWithoutResponse) { out.append("write-without-response") }
        if contains(.write) { out.append("write") }
        if contains(.notify) { out.append("notify") }
        if contains(.indicate) { out.append("indicate") }
        return out
    }
}

/// What reading or writing a characteristic value needs of the link (Vol 3 Part F 3.2.5): a server
/// answers a request on a link below it with Insufficient Encryption (the link is not encrypted and
/// encryption suffices) or Insufficient Authentication (MITM protection is needed).
public struct AttributeSecurity: Sendable, Hashable {
    public var read: SecurityLevel
    public var write: SecurityLevel

    public init(read: SecurityLevel = .none, write: SecurityLevel = .none) {
        self.read = read
        self.write = write
    }

    /// Nothing needed.
    public static let open = AttributeSecurity()

    /// The ATT error for a request that needs `required` on a link with `link`, or nil when it may go on.
    public static func refusal(_ required: SecurityLevel, on link: LinkSecurity) -> ATTErrorCode? {
        guard required > link.level else { return nil }
        return link.level == .none && required == .encrypted ? .insufficientEncryption : .insufficientAuthentication
    }
}

/// A GATT server's attribute table: services, characteristics and descriptors laid out in handle order
/// as a peripheral exposes them (Vol 3 Part G 3).
public struct GATTDatabase: Sendable {
    /// What an attribute is, for the server's access rules.
    public enum Role: Sendable, Hashable {
        case primaryService
        case characteristicDeclaration
        /// A characteristic value; `properties` decide what ATT may do with it.
        case value(GATTProperties)
        /// A Client Characteristic Configuration descriptor for the value at `valueHandle`.
        case cccd(valueHandle: UInt16)
        case descriptor
    }

    /// One attribute.
    public struct Attribute: Sendable, Hashable {
        public var handle: UInt16
        public var type: BluetoothUUID
        public var value: [UInt8]
        public var role: Role
        /// For a service declaration: the last handle of its group.
        public var groupEnd: UInt16
        /// The type is declared in its 128-bit form although it has a 16-bit one (Find Information
        /// then lists it in the 128-bit format).
        public var typeIsLong = false
        /// What a characteristic value needs of the link to be read or written.
        public var security: AttributeSecurity = .open

        /// A characteristic value (not a declaration or descriptor).
        public var isValue: Bool {
            if case .value = role { return true }
            return false
        }
    }

    /// A characteristic to lay out.
    public struct CharacteristicSpec: Sendable {
        public var uuid: BluetoothUUID
        public var properties: GATTProperties
        public var value: [UInt8]
        /// Add a CCCD (defaults to whether it declares notify or indicate).
        public var hasCCCD: Bool
        /// What reading or writing the value needs of the link.
        public var security: AttributeSecurity
        public init(uuid: BluetoothUUID, properties: GATTProperties, value: [UInt8] = [], hasCCCD: Bool? = nil,
                    security: AttributeSecurity = .open) {
            self.uuid = uuid
            self.properties = properties
            self.value = value
            self.hasCCCD = hasCCCD ?? !properties.isDisjoint(with: [.notify, .indicate])
            self.security = security
        }
    }

    /// A primary service to lay out.
    public struct ServiceSpec: Sendable {
        public var uuid: BluetoothUUID
        public var characteristics: [CharacteristicSpec]
        public init(uuid: BluetoothUUID, characteristics: [CharacteristicSpec]) {
            self.uuid = uuid
            self.characteristics = characteristics
        }
    }

    /// The Database Hash function: from the bytes Vol 3 Part G 7.3.1 hashes to the 16-byte value.
    public typealias HashFunction = @Sendable ([UInt8]) -> [UInt8]

    /// Attributes in increasing handle order.
    public private(set) var attributes: [Attribute] = []
    private let hash: HashFunction
    private var index: [UInt16: Int] = [:]
    private var valueHandles: [Key: UInt16] = [:]

    private struct Key: Hashable {
        var service: BluetoothUUID
        var characteristic: BluetoothUUID
    }

    /// Lays out services from handle 1. With `longUUIDs`, every service and characteristic UUID is
    /// declared in its 128-bit form, also those that have a 16-bit one (legal: the spec compares UUIDs in
    /// 128-bit form; some firmware does it). A Database Hash characteristic (2B2A) gets its value here,
    /// from `hash` (see `databaseHash`).
    public init(services: [ServiceSpec], longUUIDs: Bool = false, hash: HashFunction? = nil) {
        self.hash = hash ?? GATTDatabase.standInHash
        func declared(_ uuid: BluetoothUUID) -> [UInt8] { longUUIDs ? uuid.uuid128.reversed() : uuid.wireBytes }
        var handle: UInt16 = 1
        for service in services {
            let serviceIndex = attributes.count
            append(Attribute(handle: handle, type: .primaryService, value: declared(service.uuid),
                             role: .primaryService, groupEnd: handle))
            handle += 1
            for c in service.characteristics {
                let declHandle = handle
                let valueHandle = handle + 1
                var decl = ByteWriter()
                decl.write(c.properties.rawValue)
                decl.writeUInt16LE(valueHandle)
                decl.write(declared(c.uuid))
                append(Attribute(handle: declHandle, type: .characteristic, value: decl.bytes,
                                 role: .characteristicDeclaration, groupEnd: 0))
                append(Attribute(handle: valueHandle, type: c.uuid, value: c.value, role: .value(c.properties), groupEnd: 0,
                                 typeIsLong: longUUIDs, security: c.security))
                valueHandles[Key(service: service.uuid, characteristic: c.uuid)] = valueHandle
                handle += 2
                if c.hasCCCD {
                    append(Attribute(handle: handle, type: .clientCharacteristicConfiguration, value: [0, 0],
                                     role: .cccd(valueHandle: valueHandle), groupEnd: 0))
                    handle += 1
                }
            }
            attributes[serviceIndex].groupEnd = handle - 1
        }
        let hash = databaseHash
        for i in attributes.indices where attributes[i].type == .databaseHash {
            if case .value = attributes[i].role { attributes[i].value = hash }
        }
    }

    /// What Vol 3 Part G 7.3.1 hashes, in handle order: for service, include and characteristic
    /// declarations their handle, 16-bit type and value; for the descriptors it names (CCCD among them)
    /// their handle and type; nothing for characteristic values (so values never change the hash).
    public var databaseHashInput: [UInt8] {
        var w = ByteWriter()
        for a in attributes {
            switch a.role {
            case .primaryService, .characteristicDeclaration:
                w.writeUInt16LE(a.handle)
                w.write(a.type.wireBytes)
                w.write(a.value)
            case .cccd:
                w.writeUInt16LE(a.handle)
                w.write(a.type.wireBytes)
            case .value, .descriptor:
                break
            }
        }
        return w.bytes
    }

    /// The Database Hash (2B2A) value of this layout: 16 bytes that change whenever a declaration does.
    ///
    /// The spec computes AES-CMAC (key 0) over `databaseHashInput`. This target has no AES (crypto comes
    /// from libcrypto, in BLESecurity, which depends on this target), so the function is given: the
    /// simulator passes the real AES-CMAC (`SMPCrypto.databaseHash`); without one, the first 16 bytes
    /// of SHA-256 over the same input stand in (`standInHash`) — a client treats the hash as an opaque
    /// value and only compares it.
    public var databaseHash: [UInt8] { hash(databaseHashInput) }

    /// The stand-in for AES-CMAC where none is given: SHA-256 truncated to 16 bytes.
    public static let standInHash: HashFunction = { Array(SHA256.hash($0).prefix(16)) }
    private mutating func append(_ a: Attribute) {
        index[a.handle] = attributes.count
        attributes.append(a)
    }

    public func attribute(_ handle: UInt16) -> Attribute? {
        index[handle].map { attributes[$0] }
    }

    /// The value handle of a characteristic.
    public func valueHandle(service: BluetoothUUID, characteristic: BluetoothUUID) -> UInt16? {
        valueHandles[Key(service: service, characteristic: characteristic)]
    }

    /// The CCCD handle for a value handle, if the characteristic has one.
    public func cccdHandle(forValue valueHandle: UInt16) -> UInt16? {
        guard let i = index[valueHandle] else { return nil }
        let next = i + 1
        guard next < attributes.count, case .cccd(let v) = attributes[next].role, v == valueHandle else { return nil }
        return attributes[next].handle
    }

    public func value(_ handle: UInt16) -> [UInt8]? { attribute(handle)?.value }

    /// Replaces an attribute's value (the device's own update, not an ATT write).
    public mutating func setValue(_ value: [UInt8], at handle: UInt16) {
        if let i = index[handle] { attributes[i].value = value }
    }

    /// Index of the first attribute with handle >= `handle`.
    func firstIndex(atOrAfter handle: UInt16) -> Int {
        var lo = 0
        var hi = attributes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if attributes[mid].handle < handle { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}
