/// What a client knows of one server's attribute layout: services found (or known to be absent) by UUID,
/// their characteristics and descriptors, and what the server was found to support. Built by discovery on
/// a link; shared between links only through `GATTCache`, under the server's Database Hash.
public struct GATTLayout: Sendable, Equatable {
    /// Services found, by UUID (the first instance when a server has several).
    public internal(set) var services: [BluetoothUUID: GATTService] = [:]
    /// Services searched for every way and not there.
    public internal(set) var absentServices: Set<BluetoothUUID> = []
    /// Every primary service, once discovered all at once.
    public internal(set) var allServices: [GATTService]?
    /// Characteristics by the start handle of their service.
    public internal(set) var characteristics: [UInt16: [GATTCharacteristic]] = [:]
    /// Descriptors by the value handle of their characteristic.
    public internal(set) var descriptors: [UInt16: [GATTDescriptor]] = [:]
    /// The Server Supported Features value (Vol 3 Part G 7.4), once read (0 when the server has none).
    public internal(set) var serverFeatures: UInt8?
    /// Whether the server answers Read Multiple Variable Length, once known.
    public internal(set) var readMultipleVariable: Bool?

    public init() {}

    /// Nothing known yet.
    public var isEmpty: Bool { self == GATTLayout() }

    /// A characteristic of the Generic Attribute service, once that service's characteristics are known.
    func genericAttribute(_ uuid: BluetoothUUID) -> GATTCharacteristic? {
        guard let s = services[.genericAttribute] else { return nil }
        return characteristics[s.startHandle]?.first { $0.uuid == uuid }
    }

    /// Adds what `other` knows and this one does not. Both describe the same layout (same Database
    /// Hash), so where both know something they agree; a disagreement on Read Multiple Variable Length
    /// support keeps the cautious answer.
    mutating func merge(_ other: GATTLayout) {
        services.merge(other.services) { mine, _ in mine }
        absentServices.formUnion(other.absentServices)
        absentServices.subtract(services.keys)
        if allServices == nil { allServices = other.allServices }
        characteristics.merge(other.characteristics) { mine, _ in mine }
        descriptors.merge(other.descriptors) { mine, _ in mine }
        if serverFeatures == nil { serverFeatures = other.serverFeatures }
        switch (readMultipleVariable, other.readMultipleVariable) {
        case (nil, let theirs): readMultipleVariable = theirs
        case (true, false): readMultipleVariable = false
        default: break
        }
    }
}
