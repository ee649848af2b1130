import Synchronization

/// The GATT client procedures (Vol 3 Part G 4) over one `ATTClient`. What it discovers is kept for the
/// link (a new link gets a new `GATTClient`); with a `GATTCache` it also reads the server's Database Hash
/// once per link and takes the layout of an earlier server with the same hash, so a later device of one
/// model skips discovery (docs/ble.md, "The GATT cache").
///
/// A service is looked for by its 16-bit UUID, then its 128-bit form, then by discovering every primary
/// service (`ServiceSearch`); characteristic and descriptor UUIDs are compared in 128-bit form.
/// Discovery loops only move forward: a peer whose handles do not increase, or fall outside the range
/// asked for, is a protocol error, so a hostile device cannot make discovery loop forever.
public actor GATTClient {
    public nonisolated let att: ATTClient
    public nonisolated let discovery: DiscoveryMode
    /// Layouts shared with other links of the run (nil: this link discovers everything itself).
    public nonisolated let cache: GATTCache?
    /// The kind of device (e.g. its model) that discovery hints are kept under, for servers without a
    /// Database Hash.
    public nonisolated let cacheKey: String

    /// Longest attribute value (Vol 3 Part F 3.2.9).
    public static let maximumValueLength = 512

    /// What this link knows of its server's layout.
    public private(set) var layout = GATTLayout()
    /// The server's Database Hash, once read on this link (only with a cache).
    public private(set) var databaseHash: [UInt8]?
    /// True when the layout came from the cache: its handles were not discovered on this link.
    public private(set) var layoutIsShared = false
    /// True once this link asked the server for robust caching (Client Supported Features bit 0).
    public private(set) var robustCaching = false

    /// The value handle of Service Changed on this link, once known; read without a hop by the link's
    /// indication handler.
    public nonisolated let serviceChanged: ServiceChangedSlot
    private var prepared = false
    private let log: @Sendable (String) -> Void

    /// Errors that say an attribute is not what the layout said it was.
    private static let layoutErrors: Set<ATTErrorCode> = [
        .invalidHandle, .readNotPermitted, .writeNotPermitted, .attributeNotFound, .invalidAttributeValueLength, .invalidOffset,
    ]

    public init(att: ATTClient, discovery: DiscoveryMode = .targeted, cache: GATTCache? = nil, cacheKey: String = "",
                serviceChanged: ServiceChangedSlot = ServiceChangedSlot(), log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.att = att
        self.discovery = discovery
        self.cache = cache
        self.cacheKey = cacheKey
        self.serviceChanged = serviceChanged
        self.log = log
    }

    /// Forgets everything discovered on this link (the next operation reads the Database Hash again).
    public func clearCache() {
        resetLayout()
        prepared = false
        databaseHash = nil
    }

    // MARK: - The shared layout

    /// Once per link, before the first discovery, with a cache: reads the Database Hash (one Read By
    /// Type over the whole range), takes the layout filed under it, learns the Generic Attribute service
    /// and asks for robust caching. Servers of a key known to have no hash are not asked.
    private func prepare() async throws {
        guard let cache, !prepared else { return }
        prepared = true
        guard cache.hints(for: cacheKey).hasDatabaseHash != false else { return }
        let hash: [UInt8]?
        do {
            hash = try await readDatabaseHash()
        } catch {
            prepared = false   // cut short (deadline, cancellation): the next operation asks again
            throw error
        }
        cache.updateHints(for: cacheKey) { $0.hasDatabaseHash = hash != nil }
        guard let hash else { return }
        databaseHash = hash
        if let shared = cache.layout(forHash: hash) {
            layout = shared
            layoutIsShared = true
        }
        try await enableRobustCaching()
        publish()
    }

    /// Read Using Characteristic UUID (4.8.2) on Database Hash over the whole range (allowed even to a
    /// change-unaware client): its 16 bytes, or nil when the server has no usable one.
    private func readDatabaseHash() async throws -> [UInt8]? {
        let response: ATTPDU
        do {
            response = try await att.request(.readByTypeRequest(ATTReadByTypeRequest(
                range: ATTHandleRange(start: 0x0001, end: 0xFFFF), type: .databaseHash)))
        } catch BLEError.att {
            return nil
        } catch BLEError.protocolError(let why) {
            log("Database Hash not usable: \(why)")
            return nil
        }
        guard case .readByTypeResponse(let r) = response else { return nil }
        // Exactly one 16-byte value; anything else is not a hash to trust a layout to.
        guard r.entries.count == 1, let e = r.entries.first, e.value.count == 16 else { return nil }
        return e.value
    }

    /// Finds the Generic Attribute service's characteristics (part of the layout, so once per layout),
    /// notes Service Changed, and writes Client Supported Features with robust caching (bit 0): from then
    /// on the server refuses this link's handle requests with Database Out Of Sync, instead of carrying
    /// them out, if its database changes before the client reads the hash again (Vol 3 Part G 2.5.2.1).
    private func enableRobustCaching() async throws {
        let characteristics: [GATTCharacteristic]
        do {
            characteristics = try await discoverCharacteristics(of: try await service(.genericAttribute))
        } catch BLEError.attributeNotFound {
            return
        }
        if let sc = characteristics.first(where: { $0.uuid == .serviceChanged }) {
            serviceChanged.set(sc.valueHandle)
        }
        guard let csf = characteristics.first(where: { $0.uuid == .clientSupportedFeatures }) else { return }
        do {
            try await write(handle: csf.valueHandle, value: [0x01])
            robustCaching = true
        } catch BLEError.att(let e) {
            log("Client Supported Features not written: \(e)")
            if layoutIsShared, Self.layoutErrors.contains(e.code) { distrustSharedLayout() }
        }
    }

    /// Files what this link knows under its server's hash.
    private func publish() {
        if let cache, let hash = databaseHash { cache.store(layout, forHash: hash) }
    }

    private func resetLayout() {
        layout = GATTLayout()
        layoutIsShared = false
        serviceChanged.set(nil)
    }

    private func distrustSharedLayout() {
        if let cache, let hash = databaseHash { cache.distrust(hash: hash) }
        resetLayout()
    }

    /// After an operation failed with `error`: true when the failure says this link's layout is stale and
    /// the operation may run once more on rediscovered handles. Safe, because an Error Response means the
    /// server did not carry the request out.
    /// - Database Out Of Sync (robust caching): the server's database changed. The layout is dropped and
    ///   the hash read again before the next discovery.
    /// - An attribute-level error (invalid handle, not permitted, ...) while the layout came from the
    ///   cache: that cache entry is distrusted for the run, and this link discovers for itself.
    public func shouldRediscover(after error: BLEError) -> Bool {
        guard case .att(let e) = error else { return false }
        if e.code == .databaseOutOfSync {
            clearCache()
            return true
        }
        // An Execute Write that failed may have written some of its values (Vol 3 Part F 3.4.6.3): never again.
        guard layoutIsShared, Self.layoutErrors.contains(e.code), e.requestOpcode != ATTOpcode.executeWriteRequest.rawValue else {
            return false
        }
        log("an operation on cached handles failed (\(e)): the cached layout is dropped")
        distrustSharedLayout()
        return true
    }

    /// The server indicated Service Changed: this link's layout is dropped (the entry for the old hash
    /// stays right for servers that still have it) and the hash is read again before the next discovery.
    public func serviceChangedIndicated() {
        clearCache()
    }

    // MARK: - Discovery

    /// Discover All Primary Services (4.4.1): Read By Group Type on 0x2800 over the whole range.
    public func discoverAllPrimaryServices() async throws -> [GATTService] {
        try await prepare()
        if let all = layout.allServices { return all }
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
        layout.allServices = out
        for s in out where layout.services[s.uuid] == nil { layout.services[s.uuid] = s }
        layout.absentServices.subtract(out.map(\.uuid))
        publish()
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

    /// Discover Primary Service by Service UUID (4.4.2), first instance only: Find By Type Value on 0x2800
    /// with `value` (the UUID as the server may have declared it). Nil when the server has none.
    private func findFirstService(_ uuid: BluetoothUUID, value: [UInt8]) async throws -> GATTService? {
        let response: ATTPDU
        do {
            response = try await att.request(.findByTypeValueRequest(ATTFindByTypeValueRequest(
                range: ATTHandleRange(start: 0x0001, end: 0xFFFF), type: 0x2800, value: value)))
        } catch BLEError.att(let e) where e.code == .attributeNotFound {
            return nil
        }
        guard case .findByTypeValueResponse(let r) = response else { throw unexpected(response, "Find By Type Value") }
        guard let range = r.ranges.first else { return nil }
        guard range.start >= 0x0001, range.end >= range.start else {
            throw BLEError.protocolError("service discovery: group 0x\(hex(range.start))-0x\(hex(range.end)) out of order")
        }
        return GATTService(uuid: uuid, startHandle: range.start, endHandle: range.end)
    }

    /// Read Using Characteristic UUID (4.8.2) for any attribute type: every attribute of `type` in
    /// `range`, with its value (a value Read By Type cut at ATT_MTU - 4 is read whole with Read Blob).
    /// One request covers as many attributes as fit (all descriptions of a service, typically).
    public func readByType(_ type: BluetoothUUID, in range: ATTHandleRange) async throws -> [(handle: UInt16, value: [UInt8])] {
        var out: [(handle: UInt16, value: [UInt8])] = []
        var start = range.start
        while start <= range.end {
            let response: ATTPDU
            do {
                response = try await att.request(.readByTypeRequest(ATTReadByTypeRequest(range: ATTHandleRange(start: start, end: range.end), type: type)))
            } catch BLEError.att(let e) where e.code == .attributeNotFound {
                break
            }
            guard case .readByTypeResponse(let r) = response, !r.entries.isEmpty else { throw unexpected(response, "Read By Type") }
            for e in r.entries {
                guard e.handle >= start, e.handle <= range.end, e.handle > (out.last?.handle ?? 0) else {
                    throw BLEError.protocolError("Read By Type: handle 0x\(hex(e.handle)) out of order or outside 0x\(hex(start))-0x\(hex(range.end))")
                }
                out.append((e.handle, e.value.count >= att.mtu - 4 ? try await read(handle: e.handle) : e.value))
            }
            guard let last = out.last?.handle, last < range.end else { break }
            start = last + 1
        }
        return out
    }

    /// Discover All Characteristics of a Service (4.6.1): Read By Type on 0x2803 within the service. Each
    /// request starts after the last value handle seen, so a service whose last characteristic's value
    /// ends the group needs no closing request.
    public func discoverCharacteristics(of service: GATTService) async throws -> [GATTCharacteristic] {
        if let cached = layout.characteristics[service.startHandle] { return cached }
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
                guard e.handle >= start, e.handle <= end, e.handle >= last, e.handle > (found.last?.value ?? 0) else {
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
                last = valueHandle
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
        layout.characteristics[service.startHandle] = out
        publish()
        return out
    }

    /// Discover All Characteristic Descriptors (4.7.1): Find Information after the value handle.
    public func discoverDescriptors(of characteristic: GATTCharacteristic) async throws -> [GATTDescriptor] {
        if let cached = layout.descriptors[characteristic.valueHandle] { return cached }
        var out: [GATTDescriptor] = []
        let end = characteristic.endHandle
        var start = characteristic.valueHandle < end ? characteristic.valueHandle + 1 : end
        while characteristic.valueHandle < end, start <= end {
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
        layout.descriptors[characteristic.valueHandle] = out
        publish()
        return out
    }

    /// Finds a service by UUID (`ServiceSearch`: 16-bit form, 128-bit form, every service), or throws
    /// `attributeNotFound`. Found and absent services are remembered for the link (and, under a Database
    /// Hash, for the run).
    public func service(_ uuid: BluetoothUUID) async throws -> GATTService {
        try await prepare()
        if let s = layout.services[uuid] { return s }
        if layout.absentServices.contains(uuid) || layout.allServices != nil {
            throw BLEError.attributeNotFound("service \(uuid)")
        }
        let hints = cache?.hints(for: cacheKey) ?? GATTCache.Hints()
        var search = ServiceSearch(uuid: uuid, mode: discovery, longFormFirst: hints.longForm.contains(uuid),
                                   findByValueUnsupported: hints.findByValueUnsupported)
        var next = search.next(after: nil)
        while let request = next {
            var outcome = ServiceSearch.Outcome.notFound
            switch request {
            case .findByValue(let value):
                do {
                    if let s = try await findFirstService(uuid, value: value) {
                        layout.services[uuid] = s
                        outcome = .found
                        if uuid.value16 != nil {
                            let long = value.count == 16
                            cache?.updateHints(for: cacheKey) { h in
                                if long { h.longForm.insert(uuid) } else { h.longForm.remove(uuid) }
                            }
                        }
                    }
                } catch BLEError.att(let e) where e.code == .requestNotSupported {
                    // Find By Type Value is optional for a server.
                    cache?.updateHints(for: cacheKey) { $0.findByValueUnsupported = true }
                    outcome = .notSupported
                }
            case .discoverAll:
                _ = try await discoverAllPrimaryServices()
                if layout.services[uuid] != nil { outcome = .found }
            }
            next = search.next(after: outcome)
        }
        guard let s = layout.services[uuid] else {
            layout.absentServices.insert(uuid)
            publish()
            throw BLEError.attributeNotFound("service \(uuid)")
        }
        publish()
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
        guard case .readResponse(let value) = response else { throw unexpected(response, "Read") }
        return try await readRest(of: handle, after: value, more: value.count == att.mtu - 1)
    }

    /// Read Blob from the end of `first` (when `more`) while each part fills the PDU; at most 512 bytes.
    private func readRest(of handle: UInt16, after first: [UInt8], more: Bool) async throws -> [UInt8] {
        var value = first
        var more = more
        while more {
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
            more = part.count == att.mtu - 1
        }
        guard value.count <= Self.maximumValueLength else {
            throw BLEError.protocolError("value of handle 0x\(hex(handle)) longer than \(Self.maximumValueLength) bytes")
        }
        return value
    }

    /// Read Multiple Variable Length Characteristic Values (4.8.5): the values of two or more handles in
    /// one request, in order. The server stops its answer at ATT_MTU-1 octets: a value cut short (or that
    /// ends exactly at the end of a full PDU) is completed with Read Blob, and values the answer did not
    /// reach are read one by one. An Error Response fails the whole request (`BLEError.att`).
    public func readMultipleVariable(handles: [UInt16]) async throws -> [[UInt8]] {
        guard handles.count >= 2 else {
            var out: [[UInt8]] = []
            for h in handles { out.append(try await read(handle: h)) }
            return out
        }
        let request = ATTPDU.readMultipleVariableRequest(ATTReadMultipleVariableRequest(handles: handles))
        let response = try await att.request(request)
        guard case .readMultipleVariableResponse(let r) = response else { throw unexpected(response, "Read Multiple Variable Length") }
        guard r.tuples.count <= handles.count else {
            throw BLEError.protocolError("Read Multiple Variable Length: \(r.tuples.count) values for \(handles.count) handles")
        }
        let full = response.bytes.count >= att.mtu
        var out: [[UInt8]] = []
        for (i, handle) in handles.enumerated() {
            guard i < r.tuples.count else {
                out.append(try await read(handle: handle))
                continue
            }
            let t = r.tuples[i]
            let last = i == r.tuples.count - 1 && r.cutLength == nil
            if t.isComplete && !(last && full) {
                out.append(t.value)
            } else {
                out.append(try await readRest(of: handle, after: t.value, more: true))
            }
        }
        return out
    }

    /// Whether to ask for several values at once with Read Multiple Variable Length: what an earlier
    /// answer of this layout (or, without a hash, this key) said; else yes, and the first answer settles
    /// it (`noteReadMultipleVariable`). Server Supported Features is read once per layout: with EATT the
    /// request is mandatory for the server (Vol 3 Part G Table 4.1); without, only an answer tells.
    public func prefersReadMultipleVariable() async throws -> Bool {
        if let known = layout.readMultipleVariable { return known }
        if databaseHash == nil, let known = cache?.hints(for: cacheKey).readMultipleVariable { return known }
        if layout.serverFeatures == nil, let ssf = layout.genericAttribute(.serverSupportedFeatures), ssf.properties.contains(.read) {
            do {
                layout.serverFeatures = try await read(handle: ssf.valueHandle).first ?? 0
            } catch BLEError.att(let e) {
                log("Server Supported Features not read: \(e)")
                layout.serverFeatures = 0
            }
            if let f = layout.serverFeatures, f & 0x01 != 0 { layout.readMultipleVariable = true }
            publish()
        }
        return true
    }

    /// Records whether the server answered Read Multiple Variable Length.
    public func noteReadMultipleVariable(_ supported: Bool) {
        layout.readMultipleVariable = supported
        cache?.updateHints(for: cacheKey) { $0.readMultipleVariable = supported }
        publish()
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
            switch error {
            case .protocolError, .att:
                // Leave the server's prepare queue empty (4.9.5), so nothing queued so far can be executed
                // later; a failure here changes nothing.
                _ = try? await att.request(.executeWriteRequest(ATTExecuteWriteRequest(commit: false)))
            default:
                break
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

/// Where a link's GATT client puts the Service Changed value handle once it knows it, for the link's
/// indication handler, which runs on the ATT reader and must not wait for the client.
public final class ServiceChangedSlot: Sendable {
    private let handle = Atomic<UInt16>(0)

    public init() {}

    /// The value handle, once known (handle 0 is never an attribute).
    public var valueHandle: UInt16? {
        let h = handle.load(ordering: .relaxed)
        return h == 0 ? nil : h
    }

    func set(_ valueHandle: UInt16?) { handle.store(valueHandle ?? 0, ordering: .relaxed) }
}

