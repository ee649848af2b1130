/// The server side of ATT over a `GATTDatabase` (Vol 3 Part F 3.4, Part G 4), as a value-type state
/// machine: `receive` takes one PDU from the client and returns the response to send (if any) and the
/// events the owner should act on (a value written, a subscription changed). The owner does the I/O.
///
/// Used by the simulator's virtual peripherals and by tests; it answers like a careful peripheral
/// (truncation to the MTU, error responses with the right handle and code).
public struct ATTServer: Sendable {
    /// Something the device logic should know about.
    public enum Event: Sendable, Equatable {
        /// The client wrote a characteristic value (request or command, or an executed prepared write).
        case wrote(handle: UInt16, value: [UInt8], withResponse: Bool)
        /// The client wrote a CCCD: bit 0 notify, bit 1 indicate.
        case subscriptionChanged(valueHandle: UInt16, configuration: UInt16)
        /// The client confirmed an indication.
        case confirmation
        /// The MTU was exchanged; the new ATT_MTU.
        case mtuExchanged(Int)
        /// The client sent something that could not be decoded.
        case malformed([UInt8])
    }

    public var database: GATTDatabase
    /// The largest ATT_MTU this server accepts.
    public var maxMTU: Int
    /// The ATT_MTU in force (23 until exchanged).
    public private(set) var mtu: Int = 23
    /// When false, Find By Type Value gets Request Not Supported (firmware that needs full discovery).
    public var supportsFindByTypeValue: Bool
    /// When false, Read Multiple Variable Length gets Request Not Supported (firmware before 5.2).
    public var supportsReadMultipleVariable: Bool
    /// Largest number of queued prepared writes.
    public var prepareQueueLimit: Int = 64
    /// The Client Supported Features bits this client set on this connection (Vol 3 Part G 7.2): bit 0
    /// robust caching, bit 1 EATT, bit 2 multiple handle value notifications. Bits can be set, never cleared.
    public private(set) var clientFeatures: UInt8 = 0
    /// Robust caching (Vol 3 Part G 2.5.2.1): false once the database changed under a client that asked
    /// for robust caching, until it reads the Database Hash. A connection without a bond starts aware.
    public private(set) var isChangeAware = true
    /// The link's protection (set by the owner as the link is encrypted): values that need more are
    /// refused with Insufficient Encryption or Insufficient Authentication (`AttributeSecurity`).
    public var linkSecurity: LinkSecurity = .none

    private var prepareQueue: [ATTPrepareWrite] = []

    public init(database: GATTDatabase, maxMTU: Int = 247, supportsFindByTypeValue: Bool = true,
                supportsReadMultipleVariable: Bool = true) {
        self.database = database
        self.maxMTU = max(23, maxMTU)
        self.supportsFindByTypeValue = supportsFindByTypeValue
        self.supportsReadMultipleVariable = supportsReadMultipleVariable
    }

    /// Handles one PDU from the client.
    public mutating func receive(_ bytes: [UInt8]) -> (response: [UInt8]?, events: [Event]) {
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(decoding: bytes)
        } catch _ {
            guard let first = bytes.first, ATTOpcode(first).isRequest else {
                return (nil, [.malformed(bytes)])
            }
            return (errorResponse(ATTOpcode(first), 0, .invalidPDU), [.malformed(bytes)])
        }
        if !isChangeAware, clientFeatures & 0x01 != 0, let refusal = outOfSync(pdu) {
            return (refusal.isEmpty ? nil : refusal, [])
        }
        switch pdu {
        case .exchangeMTURequest(let m):
            mtu = max(23, min(Int(m.mtu), maxMTU))
            return (ATTPDU.exchangeMTUResponse(ATTExchangeMTU(mtu: UInt16(maxMTU))).bytes, [.mtuExchanged(mtu)])
        case .findInformationRequest(let p):
            return (findInformation(p.range), [])
        case .findByTypeValueRequest(let p):
            return (findByTypeValue(p), [])
        case .readByTypeRequest(let p):
            return (readByType(p), [])
        case .readRequest(let p):
            return (read(p.handle, offset: 0, opcode: .readRequest), [])
        case .readBlobRequest(let p):
            return (read(p.handle, offset: Int(p.offset), opcode: .readBlobRequest), [])
        case .readMultipleRequest(let p):
            var out: [UInt8] = []
            for h in p.handles {
                guard let a = database.attribute(h) else { return (errorResponse(.readMultipleRequest, h, .invalidHandle), []) }
                if let e = readError(a) { return (errorResponse(.readMultipleRequest, h, e), []) }
                out += a.value
            }
            return (ATTPDU.readMultipleResponse(Array(out.prefix(mtu - 1))).bytes, [])
        case .readMultipleVariableRequest(let p):
            return (readMultipleVariable(p.handles), [])
        case .readByGroupTypeRequest(let p):
            return (readByGroupType(p), [])
        case .writeRequest(let p):
            return write(p, withResponse: true)
        case .writeCommand(let p):
            let (_, events) = write(p, withResponse: false)
            return (nil, events)
        case .prepareWriteRequest(let p):
            guard let a = database.attribute(p.handle) else { return (errorResponse(.prepareWriteRequest, p.handle, .invalidHandle), []) }
            if let e = writeError(a, withResponse: true) { return (errorResponse(.prepareWriteRequest, p.handle, e), []) }
            guard prepareQueue.count < prepareQueueLimit else { return (errorResponse(.prepareWriteRequest, p.handle, .prepareQueueFull), []) }
            prepareQueue.append(p)
            return (ATTPDU.prepareWriteResponse(p).bytes, [])
        case .executeWriteRequest(let p):
            defer { prepareQueue = [] }
            guard p.commit else { return (ATTPDU.executeWriteResponse.bytes, []) }
            var assembled: [(UInt16, [UInt8])] = []
            for part in prepareQueue {
                if let i = assembled.firstIndex(where: { $0.0 == part.handle }) {
                    guard Int(part.offset) == assembled[i].1.count else {
                        return (errorResponse(.executeWriteRequest, part.handle, .invalidOffset), [])
                    }
                    assembled[i].1 += part.value
                } else {
                    guard part.offset == 0 else { return (errorResponse(.executeWriteRequest, part.handle, .invalidOffset), []) }
                    assembled.append((part.handle, part.value))
                }
            }
            var events: [Event] = []
            for (h, v) in assembled {
                guard v.count <= 512 else { return (errorResponse(.executeWriteRequest, h, .invalidAttributeValueLength), []) }
                database.setValue(v, at: h)
                events.append(.wrote(handle: h, value: v, withResponse: true))
            }
            return (ATTPDU.executeWriteResponse.bytes, events)
        case .handleValueConfirmation:
            return (nil, [.confirmation])
        case .unknown(let op, _):
            if op.isCommand { return (nil, []) }
            return (errorResponse(op, 0, .requestNotSupported), [])
        default:
            // Responses and notifications have no business arriving at a server: ignore them.
            return (nil, [])
        }
    }

    /// A notification for `valueHandle`, if the client enabled notifications or the characteristic has
    /// no CCCD (firmware that notifies without declaring it). The value is truncated to MTU-3.
    public func notification(valueHandle: UInt16, value: [UInt8]) -> [UInt8]? {
        guard wants(valueHandle, bit: 0x0001) else { return nil }
        return ATTPDU.handleValueNotification(ATTHandleValue(handle: valueHandle, value: Array(value.prefix(mtu - 3)))).bytes
    }

    /// An indication for `valueHandle`, if the client enabled indications.
    public func indication(valueHandle: UInt16, value: [UInt8]) -> [UInt8]? {
        guard wants(valueHandle, bit: 0x0002) else { return nil }
        return ATTPDU.handleValueIndication(ATTHandleValue(handle: valueHandle, value: Array(value.prefix(mtu - 3)))).bytes
    }

    /// The Service Changed indication (Vol 3 Part G 7.1) for `start...end`, if the database has a
    /// Service Changed characteristic and the client enabled its indications.
    public func serviceChangedIndication(start: UInt16 = 0x0001, end: UInt16 = 0xFFFF) -> [UInt8]? {
        guard let sc = database.attributes.first(where: { $0.type == .serviceChanged && $0.isValue }) else { return nil }
        var range = ByteWriter()
        range.writeUInt16LE(start)
        range.writeUInt16LE(end)
        return indication(valueHandle: sc.handle, value: range.bytes)
    }

    /// The database changes while the client is connected (firmware that lays itself out again). The new
    /// table keeps this client's Client Supported Features and Service Changed configuration; a client
    /// that asked for robust caching becomes change-unaware (its handle requests get Database Out Of
    /// Sync until it reads the Database Hash). Returns the Service Changed indication to send, if enabled.
    public mutating func replaceDatabase(_ new: GATTDatabase) -> [UInt8]? {
        let scConfig = database.attributes.first(where: { $0.type == .serviceChanged && $0.isValue })
            .map { configuration(valueHandle: $0.handle) } ?? 0
        database = new
        prepareQueue = []
        if let csf = database.attributes.first(where: { $0.type == .clientSupportedFeatures && $0.isValue }) {
            database.setValue([clientFeatures], at: csf.handle)
        }
        if let sc = database.attributes.first(where: { $0.type == .serviceChanged && $0.isValue }),
           let cccd = database.cccdHandle(forValue: sc.handle) {
            database.setValue([UInt8(truncatingIfNeeded: scConfig), UInt8(scConfig >> 8)], at: cccd)
        }
        if clientFeatures & 0x01 != 0 { isChangeAware = false }
        return serviceChangedIndication()
    }

    /// The CCCD value for a characteristic (0 when none or not written).
    public func configuration(valueHandle: UInt16) -> UInt16 {
        guard let c = database.cccdHandle(forValue: valueHandle), let v = database.value(c), v.count == 2 else { return 0 }
        return UInt16(v[0]) | UInt16(v[1]) << 8
    }

    private func wants(_ valueHandle: UInt16, bit: UInt16) -> Bool {
        guard database.attribute(valueHandle) != nil else { return false }
        guard database.cccdHandle(forValue: valueHandle) != nil else { return true }
        return configuration(valueHandle: valueHandle) & bit != 0
    }

    // MARK: - Requests

    private func errorResponse(_ op: ATTOpcode, _ handle: UInt16, _ code: ATTErrorCode) -> [UInt8] {
        ATTPDU.errorResponse(ATTErrorResponse(requestOpcode: op, handle: handle, code: code)).bytes
    }

    private func validRange(_ r: ATTHandleRange) -> Bool { r.start != 0 && r.start <= r.end }

    /// What a change-unaware robust-caching client may not do (Vol 3 Part G 2.5.2.1): any request that
    /// names attribute handles, and a Read By Type other than for declarations or over the whole range.
    /// Returns the refusal (empty for a command, which is dropped), or nil when the request may go on.
    /// Reading the Database Hash makes the client aware again.
    private mutating func outOfSync(_ pdu: ATTPDU) -> [UInt8]? {
        func refuse(_ op: ATTOpcode, _ handle: UInt16) -> [UInt8] { errorResponse(op, handle, .databaseOutOfSync) }
        switch pdu {
        case .readByTypeRequest(let p):
            if p.type == .databaseHash { isChangeAware = true }
            if p.type == .characteristic || p.type == .include || (p.range.start == 0x0001 && p.range.end == 0xFFFF) { return nil }
            return refuse(.readByTypeRequest, p.range.start)
        case .readRequest(let p):
            if database.attribute(p.handle)?.type == .databaseHash {
                isChangeAware = true
                return nil
            }
            return refuse(.readRequest, p.handle)
        case .readBlobRequest(let p): return refuse(.readBlobRequest, p.handle)
        case .readMultipleRequest(let p): return refuse(.readMultipleRequest, p.handles.first ?? 0)
        case .readMultipleVariableRequest(let p): return refuse(.readMultipleVariableRequest, p.handles.first ?? 0)
        case .writeRequest(let p): return refuse(.writeRequest, p.handle)
        case .prepareWriteRequest(let p): return refuse(.prepareWriteRequest, p.handle)
        case .executeWriteRequest: return refuse(.executeWriteRequest, 0)
        case .writeCommand: return []
        default: return nil
        }
    }

    /// Read Multiple Variable Length (3.4.4.11): every value with its full length, in order; the list
    /// stops at ATT_MTU-1 octets, cutting the last tuple wherever that falls (even inside its length).
    private func readMultipleVariable(_ handles: [UInt16]) -> [UInt8] {
        guard supportsReadMultipleVariable else {
            return errorResponse(.readMultipleVariableRequest, handles.first ?? 0, .requestNotSupported)
        }
        var tuples: [ATTReadMultipleVariableResponse.Tuple] = []
        for h in handles {
            guard let a = database.attribute(h) else { return errorResponse(.readMultipleVariableRequest, h, .invalidHandle) }
            if let e = readError(a) { return errorResponse(.readMultipleVariableRequest, h, e) }
            tuples.append(.init(a.value))
        }
        let whole = ATTPDU.readMultipleVariableResponse(ATTReadMultipleVariableResponse(tuples: tuples)).bytes
        return Array(whole.prefix(mtu))
    }

    private func readError(_ a: GATTDatabase.Attribute) -> ATTErrorCode? {
        if case .value(let props) = a.role, !props.contains(.read) { return .readNotPermitted }
        return AttributeSecurity.refusal(a.security.read, on: linkSecurity)
    }

    private func writeError(_ a: GATTDatabase.Attribute, withResponse: Bool) -> ATTErrorCode? {
        switch a.role {
        case .value(let props):
            guard props.contains(withResponse ? .write : .writeWithoutResponse) else { return .writeNotPermitted }
            return AttributeSecurity.refusal(a.security.write, on: linkSecurity)
        case .cccd:
            return nil
        default:
            return .writeNotPermitted
        }
    }

    private func findInformation(_ range: ATTHandleRange) -> [UInt8] {
        guard validRange(range) else { return errorResponse(.findInformationRequest, range.start, .invalidHandle) }
        var entries: [ATTFindInformationResponse.Entry] = []
        var width = 0
        var i = database.firstIndex(atOrAfter: range.start)
        while i < database.attributes.count, database.attributes[i].handle <= range.end {
            let a = database.attributes[i]
            let w = a.typeIsLong || a.type.value16 == nil ? 16 : 2
            if width == 0 { width = w }
            if w != width || (entries.count + 1) * (2 + width) > mtu - 2 { break }
            entries.append(.init(handle: a.handle, type: a.type))
            i += 1
        }
        guard !entries.isEmpty else { return errorResponse(.findInformationRequest, range.start, .attributeNotFound) }
        return ATTPDU.findInformationResponse(ATTFindInformationResponse(entries: entries, uses128BitUUIDs: width == 16)).bytes
    }

    private func findByTypeValue(_ p: ATTFindByTypeValueRequest) -> [UInt8] {
        guard supportsFindByTypeValue else { return errorResponse(.findByTypeValueRequest, p.range.start, .requestNotSupported) }
        guard validRange(p.range) else { return errorResponse(.findByTypeValueRequest, p.range.start, .invalidHandle) }
        let type = BluetoothUUID(p.type)
        var ranges: [ATTHandleRange] = []
        var i = database.firstIndex(atOrAfter: p.range.start)
        while i < database.attributes.count, database.attributes[i].handle <= p.range.end {
            let a = database.attributes[i]
            i += 1
            guard a.type == type, a.value == p.value else { continue }
            if (ranges.count + 1) * 4 > mtu - 1 { break }
            let end = a.role == .primaryService ? a.groupEnd : a.handle
            ranges.append(ATTHandleRange(start: a.handle, end: end))
        }
        guard !ranges.isEmpty else { return errorResponse(.findByTypeValueRequest, p.range.start, .attributeNotFound) }
        return ATTPDU.findByTypeValueResponse(ATTFindByTypeValueResponse(ranges: ranges)).bytes
    }

    private func readByType(_ p: ATTReadByTypeRequest) -> [UInt8] {
        guard validRange(p.range) else { return errorResponse(.readByTypeRequest, p.range.start, .invalidHandle) }
        var entries: [ATTReadByTypeResponse.Entry] = []
        var length = -1
        var i = database.firstIndex(atOrAfter: p.range.start)
        while i < database.attributes.count, database.attributes[i].handle <= p.range.end {
            let a = database.attributes[i]
            i += 1
            guard a.type == p.type else { continue }
            if let e = readError(a) {
                if entries.isEmpty { return errorResponse(.readByTypeRequest, a.handle, e) }
                break
            }
            let value = Array(a.value.prefix(min(mtu - 4, 253)))
            if length < 0 { length = value.count }
            if value.count != length || (entries.count + 1) * (2 + length) > mtu - 2 { break }
            entries.append(.init(handle: a.handle, value: value))
        }
        guard !entries.isEmpty else { return errorResponse(.readByTypeRequest, p.range.start, .attributeNotFound) }
        return ATTPDU.readByTypeResponse(ATTReadByTypeResponse(entries: entries)).bytes
    }

    private func read(_ handle: UInt16, offset: Int, opcode: ATTOpcode) -> [UInt8] {
        guard let a = database.attribute(handle) else { return errorResponse(opcode, handle, .invalidHandle) }
        if let e = readError(a) { return errorResponse(opcode, handle, e) }
        guard offset <= a.value.count else { return errorResponse(opcode, handle, .invalidOffset) }
        let part = Array(a.value[offset...].prefix(mtu - 1))
        return (opcode == .readRequest ? ATTPDU.readResponse(part) : ATTPDU.readBlobResponse(part)).bytes
    }

    private func readByGroupType(_ p: ATTReadByTypeRequest) -> [UInt8] {
        guard validRange(p.range) else { return errorResponse(.readByGroupTypeRequest, p.range.start, .invalidHandle) }
        guard p.type == .primaryService else { return errorResponse(.readByGroupTypeRequest, p.range.start, .unsupportedGroupType) }
        var entries: [ATTReadByGroupTypeResponse.Entry] = []
        var length = -1
        var i = database.firstIndex(atOrAfter: p.range.start)
        while i < database.attributes.count, database.attributes[i].handle <= p.range.end {
            let a = database.attributes[i]
            i += 1
            guard a.role == .primaryService else { continue }
            if length < 0 { length = a.value.count }
            if a.value.count != length || (entries.count + 1) * (4 + length) > mtu - 2 { break }
            entries.append(.init(handle: a.handle, endGroupHandle: a.groupEnd, value: a.value))
        }
        guard !entries.isEmpty else { return errorResponse(.readByGroupTypeRequest, p.range.start, .attributeNotFound) }
        return ATTPDU.readByGroupTypeResponse(ATTReadByGroupTypeResponse(entries: entries)).bytes
    }

    private mutating func write(_ p: ATTHandleValue, withResponse: Bool) -> (response: [UInt8]?, events: [Event]) {
        guard let a = database.attribute(p.handle) else { return (errorResponse(.writeRequest, p.handle, .invalidHandle), []) }
        if let e = writeError(a, withResponse: withResponse) { return (errorResponse(.writeRequest, p.handle, e), []) }
        guard p.value.count <= 512 else { return (errorResponse(.writeRequest, p.handle, .invalidAttributeValueLength), []) }
        if case .cccd(let valueHandle) = a.role {
            guard p.value.count == 2 else { return (errorResponse(.writeRequest, p.handle, .invalidAttributeValueLength), []) }
            database.setValue(p.value, at: p.handle)
            let config = UInt16(p.value[0]) | UInt16(p.value[1]) << 8
            return (ATTPDU.writeResponse.bytes, [.subscriptionChanged(valueHandle: valueHandle, configuration: config)])
        }
        if a.type == .clientSupportedFeatures {
            // Bits once set stay set (Vol 3 Part G 7.2).
            guard let bits = p.value.first, bits & clientFeatures == clientFeatures else {
                return (errorResponse(.writeRequest, p.handle, .valueNotAllowed), [])
            }
            clientFeatures = bits
        }
        database.setValue(p.value, at: p.handle)
        return (ATTPDU.writeResponse.bytes, [.wrote(handle: p.handle, value: p.value, withResponse: withResponse)])
    }
}
