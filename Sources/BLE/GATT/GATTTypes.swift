/// A primary service as discovered: its UUID and handle range (Vol 3 Part G 4.4).
public struct GATTService: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var startHandle: UInt16
    public var endHandle: UInt16
    public init(uuid: BluetoothUUID, startHandle: UInt16, endHandle: UInt16) {
        self.uuid = uuid
        self.startHandle = startHandle
        self.endHandle = endHandle
    }
}

/// A characteristic as discovered (Vol 3 Part G 3.3.1): declaration, value handle, properties, and the
/// last handle of its definition (where its descriptors end).
public struct GATTCharacteristic: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var declarationHandle: UInt16
    public var valueHandle: UInt16
    public var properties: GATTProperties
    public var endHandle: UInt16
    public init(uuid: BluetoothUUID, declarationHandle: UInt16, valueHandle: UInt16, properties: GATTProperties, endHandle: UInt16) {
        self.uuid = uuid
        self.declarationHandle = declarationHandle
        self.valueHandle = valueHandle
        self.properties = properties
        self.endHandle = endHandle
    }
}

/// A characteristic descriptor as discovered (Vol 3 Part G 4.7.1).
public struct GATTDescriptor: Sendable, Hashable {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    public init(handle: UInt16, uuid: BluetoothUUID) {
        self.handle = handle
        self.uuid = uuid
    }
}

/// How services are discovered.
public enum DiscoveryMode: Sendable, Hashable {
    /// Only the services an operation names, one Find By Type Value per service, cached (the default).
    case targeted
    /// Every primary service at once (Read By Group Type), for firmware that needs full discovery.
    case all
}

/// A characteristic found by UUID, with what a session needs to use it.
public struct ResolvedCharacteristic: Sendable, Hashable {
    public var service: GATTService
    public var characteristic: GATTCharacteristic
    /// The Client Characteristic Configuration descriptor, if the characteristic has one.
    public var cccdHandle: UInt16?
}

/// A characteristic named the way workflows and sessions name it: its service's UUID and its own.
public struct CharacteristicPath: Sendable, Hashable, CustomStringConvertible {
    public var service: BluetoothUUID
    public var characteristic: BluetoothUUID
    public init(service: BluetoothUUID, characteristic: BluetoothUUID) {
        self.service = service
        self.characteristic = characteristic
    }
    public var description: String { "\(service)/\(characteristic)" }
}
