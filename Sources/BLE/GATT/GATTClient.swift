/// The GATT client procedures (Vol 3 Part G 4) over one `ATTClient`, with a discovery cache that lives
/// as long as the link (a new link gets a new `GATTClient`, which is how the cache is cleared).
///
/// Discovery loops only move forward: a peer whose handles do not increase, or fall outside the range
/// asked for, is a protocol error, so a hostile device cannot make discovery loop forever.
public actor GATTClient {
    public nonisolated let att: ATTClient
    public nonisolated let discovery: DiscoveryMode

    /// Longest attribute value (Vol 3 Part F 3.2.9).
    public static let maximumValueLength = 512

    private var servicesByUUID: [BluetoothUUID: GATTService] = [:]
    private var allServices: [GATTService]?
    private var characteristicsByService: [UInt16: [GATTCharacteristic]] = [:]
    private var descriptorsByValue: [UInt16: [GATTDescriptor]] = [:]

    public init(att: ATTClient, discovery: DiscoveryMode = .targeted) {
        self.att = att
        self.discovery = discovery
    }

    /// Forgets everything discovered.
    public func clearCache() {
        servicesByUUID = [:]
        allServices = nil
        characteristicsByService = [:]
        descriptorsByValue = [:]
    }

    // MARK: - Discovery

    /// Discover All Primary Services (4.4.1): Read By Group Type on 0x2800 over the whole range.
    public func discoverAllPrimaryServices() async throws -> [GATTService] {
        if let all = allServices { return all }
        var out: [GATTService] = []
        var start: UInt16 = 0x0001
        while true {
            let response: ATTPDU
            do {
                response = try await att.request(.readByGroupTypeRequest(ATTReadByTypeRequest(
                    range: ATTHandleRange(start: start, end: 0xFFFF), type: .primaryService)))
            } catch BLEError.att(let e) where e.code == .attributeNotFound {
                break
            }
            guard case .readByGroupTypeResponse(let r) = response else { throw unexpected(response, "Read By Group Type") }
            var last = start
            for e in r.entries {
                guard e.handle >= start, e.endGroupHandle >= e.handle, e.handle >= last else {
                    throw BLEError.protocolError("service discovery: group 0x\(hex(e.handle))-0x\(hex(e.endGroupHandle)) out of order after 0x\(hex(last))")
                }
                guard let uuid = BluetoothUUID(wire: e.value), e.value.count != 4 else {
                    throw BLEError.protocolError("service discovery: a service UUID of \(e.value.count) bytes")
                }
                out.append(GATTService(uuid: uuid, startHandle: e.handle, endHandle: e.endGroupHandle))
                last = e.endGroupHandle
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        allServices = out
        for s in out where servicesByUUID[s.uuid] == nil { servicesByUUID[s.uuid] = s }
        return out
    }

    /// Discover Primary Service by Service UUID (4.4.2): Find By Type Value on 0x2800.
    public func discoverPrimaryServices(uuid: BluetoothUUID) async throws -> [GATTService] {
        var out: [GATTService] = []
        var start: UInt16 = 0x0001
        while true {
            let response: ATTPDU
            do {
                response = try await att.request(.findByTypeValueRequest(ATTFindByTypeValueRequest(
                    range: ATTHandleRange(start: start, end: 0xFFFF), type: 0x2800, value: uuid.wireBytes)))
            } catch BLEError.att(let e) where e.code == .attributeNotFound {
                break
            }
            guard case .findByTypeValueResponse(let r) = response else { throw unexpected(response, "Find By Type Value") }
            var last = start
            for range in r.ranges {
                guard range.start >= start, range.end >= range.start, range.start >= last else {
                    throw BLEError.protocolError("service discovery: group 0x\(hex(range.start))-0x\(hex(range.end)) out of order after 0x\(hex(last))")
                }
                out.append(GATTService(uuid: uuid, startHandle: range.start, endHandle: range.end))
                last = range.end
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        return out
    }

    /// Discover All Characteristics of a Service (4.6.1): Read By Type on 0x2803 within the service.
    public func discoverCharacteristics(of service: GATTService) async throws -> [GATTCharacteristic] {
        if let cached = characteristicsByService[service.startHandle] { return cached }
        var found: [(decl: UInt16, value: UInt16, props: GATTProperties, uuid: BluetoothUUID)] = []
        var start = service.startHandle
        let end = service.endHandle
        while start <= end {
            let response: ATTPDU
            do {
                response = try await att.request(.readByTypeRequest(ATTReadByTypeRequest(
                    range: ATTHandleRange(start: start, end: end), type: .characteristic)))
            } catch BLEError.att(let e) where e.code == .attributeNotFound {
                break
            }
            guard case .readByTypeResponse(let r) = response else { throw unexpected(response, "Read By Type") }
            var last = start
            for e in r.entries {
                guard e.handle >= start, e.handle <= end, e.handle >= last, e.handle > (found.last?.decl ?? 0) else {
                    throw BLEError.protocolError("characteristic discovery: declaration 0x\(hex(e.handle)) out of order or outside 0x\(hex(start))-0x\(hex(end))")
                }
                guard e.value.count == 5 || e.value.count == 19 else {
                    throw BLEError.protocolError("characteristic discovery: a declaration of \(e.value.count) bytes (5 or 19 expected)")
                }
                let valueHandle = UInt16(e.value[1]) | UInt16(e.value[2]) << 8
                guard let uuid = BluetoothUUID(wire: Array(e.value[3...])) else {
                    throw BLEError.protocolError("characteristic discovery: bad UUID")
                }
                guard valueHandle > e.handle, valueHandle <= end else {
                    throw BLEError.protocolError("characteristic discovery: value handle 0x\(hex(valueHandle)) outside its declaration's group")
                }
                found.append((e.handle, valueHandle, GATTProperties(rawValue: e.value[0]), uuid))
                last = e.handle
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        var out: [GATTCharacteristic] = []
        for (i, f) in found.enumerated() {
            let next = i + 1 < found.count ? found[i + 1].decl - 1 : end
            out.append(GATTCharacteristic(uuid: f.uuid, declarationHandle: f.decl, valueHandle: f.value,
                                          properties: f.props, endHandle: max(next, f.value)))
        }
        characteristicsByService[service.startHandle] = out
        return out
    }

    /// Discover All Characteristic Descriptors (4.7.1): Find Information after the value handle.
    public func discoverDescriptors(of characteristic: GATTCharacteristic) async throws -> [GATTDescriptor] {
        if let cached = descriptorsByValue[characteristic.valueHandle] { return cached }
        var out: [GATTDescriptor] = []
        let end = characteristic.endHandle
        guard characteristic.valueHandle < end else {
            descriptorsByValue[characteristic.valueHandle] = []
            return []
        }
        var start = characteristic.valueHandle + 1
        while start <= end {
            let response: ATTPDU
            do {
                response = try await att.request(.findInformationRequest(ATTFindInformationRequest(
                    range: ATTHandleRange(start: start, end: end))))
            } catch BLEError.att(let e) where e.code == .attributeNotFound {
                break
            }
            guard case .findInformationResponse(let r) = response else { throw unexpected(response, "Find Information") }
            var last = start
            for e in r.entries {
                guard e.handle >= start, e.handle <= end, e.handle >= last, e.handle > (out.last?.handle ?? 0) else {
                    throw BLEError.protocolError("descriptor discovery: handle 0x\(hex(e.handle)) out of order or outside 0x\(hex(start))-0x\(hex(end))")
                }
                out.append(GATTDescriptor(handle: e.handle, uuid: e.type))
                last = e.handle
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        descriptorsByValue[characteristic.valueHandle] = out
        return out
    }

    /// Finds a service by UUID per the discovery mode (cached), or throws `attributeNotFound`.
    public func service(_ uuid: BluetoothUUID) async throws -> GATTService {
        if let s = servicesByUUID[uuid] { return s }
        switch discovery {
        case .all:
            _ = try await discoverAllPrimaryServices()
        case .targeted:
            do {
                if let s = try await discoverPrimaryServices(uuid: uuid).first { servicesByUUID[uuid] = s }
            } catch BLEError.att(let e) where e.code == .requestNotSupported {
                // Find By Type Value is optional for a server: fall back to discovering them all.
                _ = try await discoverAllPrimaryServices()
            }
        }
        guard let s = servicesByUUID[uuid] else { throw BLEError.attributeNotFound("service \(uuid)") }
        return s
    }

    /// Finds a characteristic by (service, characteristic) UUID; with `needCCCD`, also its CCCD.
    public func resolve(service: BluetoothUUID, characteristic: BluetoothUUID, needCCCD: Bool = false) async throws -> ResolvedCharacteristic {
        let s = try await self.service(service)
        let chars = try await discoverCharacteristics(of: s)
        guard let c = chars.first(where: { $0.uuid == characteristic }) else {
            throw BLEError.attributeNotFound("characteristic \(characteristic) in service \(service)")
        }
        var cccd: UInt16?
        if needCCCD {
            cccd = try await discoverDescriptors(of: c).first(where: { $0.uuid == .clientCharacteristicConfiguration })?.handle
        }
        return ResolvedCharacteristic(service: s, characteristic: c, cccdHandle: cccd)
    }

    // MARK: - Values

    /// Read Characteristic Value (4.8.1), continued with Read Blob (4.8.3) while the value fills the PDU.
    public func read(handle: UInt16) async throws -> [UInt8] {
        let response = try await att.request(.readRequest(ATTReadRequest(handle: handle)))
        guard case .readResponse(var value) = response else { throw unexpected(response, "Read") }
        var chunk = value.count
        var mtu = att.mtu
        while chunk == mtu - 1 {
            guard value.count <= Self.maximumValueLength else {
                throw BLEError.protocolError("value of handle 0x\(hex(handle)) longer than \(Self.maximumValueLength) bytes")
            }
            let blob: ATTPDU
            do {
                blob = try await att.request(.readBlobRequest(ATTReadBlobRequest(handle: handle, offset: UInt16(value.count))))
            } catch BLEError.att(let e) where e.code == .attributeNotLong || e.code == .invalidOffset {
                break
            }
            guard case .readBlobResponse(let part) = blob else { throw unexpected(blob, "Read Blob") }
            value += part
            chunk = part.count
            mtu = att.mtu
        }
        guard value.count <= Self.maximumValueLength else {
            throw BLEError.protocolError("value of handle 0x\(hex(handle)) longer than \(Self.maximumValueLength) bytes")
        }
        return value
    }

    /// Write Characteristic Value (4.9.3); values longer than MTU-3 use Write Long Characteristic Values
    /// (4.9.4: Prepare Write in MTU-5 parts, each echo checked, then Execute Write).
    public func write(handle: UInt16, value: [UInt8]) async throws {
        let mtu = att.mtu
        if value.count <= mtu - 3 {
            let response = try await att.request(.writeRequest(ATTHandleValue(handle: handle, value: value)))
            guard case .writeResponse = response else { throw unexpected(response, "Write") }
            return
        }
        guard value.count <= Int(UInt16.max) else {
            throw BLEError.protocolError("a value of \(value.count) bytes cannot be written")
        }
        let part = mtu - 5
        var offset = 0
        do {
            while offset < value.count {
                let slice = Array(value[offset..<min(offset + part, value.count)])
                let sent = ATTPrepareWrite(handle: handle, offset: UInt16(offset), value: slice)
                let response = try await att.request(.prepareWriteRequest(sent))
                guard case .prepareWriteResponse(let echo) = response else { throw unexpected(response, "Prepare Write") }
                guard echo == sent else {
                    throw BLEError.protocolError("Prepare Write echo differs from what was sent at offset \(offset)")
                }
                offset += slice.count
            }
        } catch let error as BLEError {
            if case .protocolError = error {
                // Leave the server's prepare queue empty (4.9.5); a failure here changes nothing.
                _ = try? await att.request(.executeWriteRequest(ATTExecuteWriteRequest(commit: false)))
            }
            throw error
        }
        let response = try await att.request(.executeWriteRequest(ATTExecuteWriteRequest(commit: true)))
        guard case .executeWriteResponse = response else { throw unexpected(response, "Execute Write") }
    }

    /// Write Without Response (4.9.1). Waits for link credits; the value must fit in MTU-3.
    public func writeWithoutResponse(handle: UInt16, value: [UInt8]) async throws {
        try await att.command(.writeCommand(ATTHandleValue(handle: handle, value: value)))
    }

    /// Streams `data` with Write Without Response in MTU-3 chunks, in order, waiting for credits.
    public func writeBlob(handle: UInt16, data: [UInt8]) async throws {
        let chunk = att.mtu - 3
        var offset = 0
        while offset < data.count {
            if Task.isCancelled { throw BLEError.cancelled }
            let end = min(offset + chunk, data.count)
            try await att.command(.writeCommand(ATTHandleValue(handle: handle, value: Array(data[offset..<end]))))
            offset = end
        }
    }

    /// Writes a Client Characteristic Configuration descriptor: bit 0 notify, bit 1 indicate.
    public func writeCCCD(handle: UInt16, notify: Bool, indicate: Bool) async throws {
        let bits: UInt8 = (notify ? 0x01 : 0) | (indicate ? 0x02 : 0)
        try await write(handle: handle, value: [bits, 0x00])
    }

    private func unexpected(_ pdu: ATTPDU, _ procedure: String) -> BLEError {
        .protocolError("\(pdu.opcode.name) in answer to \(procedure)")
    }
}

func hex(_ v: UInt16) -> String { String(v, radix: 16) }
