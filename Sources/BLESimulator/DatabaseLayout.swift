import BLE
import BLESecurity

/// A model's GATT database laid out once (per model and per combination of the faults that change the
/// layout), for every connection of every device of that model to start from.
///
/// Laying out a database — handles, declarations, the Database Hash over them, values rendered from
/// their templates — cost more than everything else the simulator does for a provisioning. Only the
/// values that depend on the device (templates with `${variables}`) and the state value are filled in
/// per connection; the layout, the hash and the constant values are shared (copy on write).
final class DatabaseLayout: Sendable {
    /// The model it was made from (shared by its devices: a device keeps no copy of its own).
    let model: DeviceModel
    /// The layout with every constant value in place and the device-dependent ones empty.
    let database: GATTDatabase
    /// Characteristics whose value depends on the device, with their value handles.
    private let perDevice: [(handle: UInt16, characteristic: DeviceModel.Characteristic)]
    /// The state characteristic's value handle (its value is the device's current state).
    private let stateHandle: UInt16?
    /// The stored characteristics (`store` behaviour) with their value handles: a value the device has
    /// stored replaces the model's.
    private let stored: [(handle: UInt16, path: CommandBehaviour.Path)]

    /// What decides a layout: the model and the faults that change declarations.
    struct Key: Hashable {
        var model: String
        var notifyUndeclared: Bool
        var longUUIDs: Bool
    }

    init(model: DeviceModel, notifyUndeclared: Bool, longUUIDs: Bool) {
        self.model = model
        let behaviour = model.behaviour
        var services: [GATTDatabase.ServiceSpec] = []
        var characteristics: [DeviceModel.Characteristic] = []
        var constant: [[UInt8]?] = []
        var statePosition: Int?
        for s in model.services {
            var chars: [GATTDatabase.CharacteristicSpec] = []
            for c in s.characteristics {
                let path = CommandBehaviour.Path(service: s.uuid, characteristic: c.uuid)
                // A value is constant when its template names no variable.
                var usesVariables = false
                let resolved = c.value.resolve { _ in
                    usesVariables = true
                    return nil
                }
                let value: [UInt8]? = usesVariables ? nil : (try? resolved.get()) ?? []
                if path == behaviour?.state { statePosition = characteristics.count }
                characteristics.append(c)
                constant.append(value)
                if notifyUndeclared, path == behaviour?.ack {
                    chars.append(.init(uuid: c.uuid, properties: c.properties.subtracting([.notify, .indicate]), value: value ?? [],
                                       hasCCCD: false, security: c.security))
                } else {
                    chars.append(.init(uuid: c.uuid, properties: c.properties, value: value ?? [], security: c.security))
                }
            }
            services.append(.init(uuid: s.uuid, characteristics: chars))
        }
        let db = GATTDatabase(services: services, longUUIDs: longUUIDs, hash: SMPCrypto.databaseHash)
        // Value attributes come in the order their characteristics were laid out.
        let valueHandles = db.attributes.filter(\.isValue).map(\.handle)
        var perDevice: [(handle: UInt16, characteristic: DeviceModel.Characteristic)] = []
        for (i, c) in characteristics.enumerated() where constant[i] == nil && i != statePosition && i < valueHandles.count {
            perDevice.append((valueHandles[i], c))
        }
        database = db
        self.perDevice = perDevice
        stateHandle = statePosition.flatMap { $0 < valueHandles.count ? valueHandles[$0] : nil }
        stored = (model.store?.characteristics ?? []).compactMap { path in
            db.valueHandle(service: path.service, characteristic: path.characteristic).map { ($0, path) }
        }
    }

    /// The database for a connection of `device`: its values resolved, the current state value, the
    /// values it has stored, fresh CCCDs, the Database Hash of the layout (values never change it).
    func database(for device: VirtualDevice) -> GATTDatabase {
        var db = database
        for (handle, c) in perDevice {
            db.setValue((try? device.value(c).get()) ?? [], at: handle)
        }
        if let stateHandle { db.setValue([device.stateValue], at: stateHandle) }
        for (handle, path) in stored {
            if let value = device.storedValue(path) { db.setValue(value, at: handle) }
        }
        return db
    }
}
