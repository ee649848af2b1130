/// What a session does on its ready link: discovery ahead of use, reads, writes, write blob. Each waits
/// for `ready` within its own deadline and runs once more on rediscovered handles (a stale layout) or after
/// an upgrade (a refusal for insufficient security).
extension Session {
    /// Discovers services and their characteristics ahead of use, caching them for this link: the named
    /// services (per the discovery mode), or every primary service when `services` is empty. Later
    /// operations on them need no discovery round trips. A named service that is missing throws
    /// `attributeNotFound`.
    public func discover(services: [BluetoothUUID], timeout: Duration) async throws {
        let what = services.isEmpty ? "all services" : services.map(\.description).joined(separator: ",")
        try await withDeadline(timeout, operation: "discover \(what)") {
            try await self.withClient { client in
                var found: [GATTService] = []
                if services.isEmpty {
                    found = try await client.discoverAllPrimaryServices()
                } else {
                    for uuid in services { found.append(try await client.service(uuid)) }
                }
                for service in found { _ = try await client.discoverCharacteristics(of: service) }
            }
        }
    }

    /// The characteristics of `service`, each with its Characteristic User Description (descriptor
    /// 0x2901, Vol 3 Part G 3.3.3.2) when it has one: how protocols such as ESP-IDF's protocomm name their
    /// endpoints. The descriptions are read all at once (Read By Type on 0x2901 over the service's
    /// handles), each belonging to the characteristic whose definition holds its handle.
    public func userDescriptions(service: BluetoothUUID, timeout: Duration) async throws -> [(characteristic: BluetoothUUID, description: [UInt8]?)] {
        try await withDeadline(timeout, operation: "user descriptions of \(service)") {
            try await self.withClient { client in
                let s = try await client.service(service)
                let characteristics = try await client.discoverCharacteristics(of: s)
                let descriptions = try await client.readByType(BluetoothUUID(0x2901), in: ATTHandleRange(start: s.startHandle, end: s.endHandle))
                return characteristics.map { c in
                    (c.uuid, descriptions.first { $0.handle > c.valueHandle && $0.handle <= c.endHandle }?.value)
                }
            }
        }
    }

    /// Reads a characteristic's value (long values with Read Blob).
    public func read(service: BluetoothUUID, characteristic: BluetoothUUID, timeout: Duration) async throws -> [UInt8] {
        try await withDeadline(timeout, operation: "read \(characteristic)") {
            try await self.withClient { client in
                let r = try await client.resolve(service: service, characteristic: characteristic)
                return try await client.read(handle: r.characteristic.valueHandle)
            }
        }
    }

    /// Reads several characteristics, in one round trip where the server answers Read Multiple Variable
    /// Length (one read each where it does not). Each entry succeeds or fails on its own: a characteristic
    /// that is missing or refuses the read fails only its entry. A lost link, the deadline or a protocol
    /// error fails the call.
    public func read(_ targets: [CharacteristicPath], timeout: Duration) async throws -> [Result<[UInt8], BLEError>] {
        let what = targets.map(\.characteristic.description).joined(separator: ",")
        return try await withDeadline(timeout, operation: "read \(what)") {
            let results = try await self.withClient { client in try await Self.read(targets, on: client) }
            // An entry refused for insufficient security upgrades the link once; then all are read again.
            for case .failure(let e) in results where try await self.upgrade(after: e) {
                return try await self.withClient { client in try await Self.read(targets, on: client) }
            }
            return results
        }
    }

    private static func read(_ targets: [CharacteristicPath], on client: GATTClient) async throws -> [Result<[UInt8], BLEError>] {
        var results = [Result<[UInt8], BLEError>](repeating: .failure(.protocolError("not read")), count: targets.count)
        /// An error that belongs to one entry; one that says the shared layout is stale is thrown instead,
        /// so the whole call runs again on rediscovered handles.
        func entryError(_ error: any Error) async throws -> BLEError {
            let e = Session.bleError(error)
            switch e {
            case .att(let a):
                let shared = await client.layoutIsShared
                if a.code == .databaseOutOfSync || shared { throw e }
                return e
            case .attributeNotFound, .unsupportedProperty:
                return e
            default:
                throw e
            }
        }
        var pending: [(index: Int, handle: UInt16)] = []
        for (i, t) in targets.enumerated() {
            do {
                let r = try await client.resolve(service: t.service, characteristic: t.characteristic)
                pending.append((i, r.characteristic.valueHandle))
            } catch {
                results[i] = .failure(try await entryError(error))
            }
        }
        if pending.count >= 2, try await client.prefersReadMultipleVariable() {
            do {
                let values = try await client.readMultipleVariable(handles: pending.map(\.handle))
                await client.noteReadMultipleVariable(true)
                for (p, v) in zip(pending, values) { results[p.index] = .success(v) }
                pending = []
            } catch BLEError.att(let e) where e.code == .requestNotSupported {
                await client.noteReadMultipleVariable(false)
            } catch BLEError.att(let e) where e.code != .databaseOutOfSync {
                // One of them refused: read each, so the error lands on its own characteristic.
            }
        }
        for p in pending {
            do {
                results[p.index] = .success(try await client.read(handle: p.handle))
            } catch {
                results[p.index] = .failure(try await entryError(error))
            }
        }
        return results
    }

    /// Writes a characteristic's value: a Write Request (long values with Prepare/Execute Write), or a
    /// Write Command when `withResponse` is false (the value must then fit in MTU-3).
    public func write(service: BluetoothUUID, characteristic: BluetoothUUID, value: [UInt8], withResponse: Bool,
                      timeout: Duration) async throws {
        guard withResponse else {
            try await writeWithoutResponse(service: service, characteristic: characteristic, pieces: [value], timeout: timeout)
            return
        }
        try await withDeadline(timeout, operation: "write \(characteristic)") {
            try await self.withClient { client in
                let r = try await client.resolve(service: service, characteristic: characteristic)
                try self.require(.write, "write", of: r)
                try await client.write(handle: r.characteristic.valueHandle, value: value)
            }
        }
    }

    /// Writes `pieces` with write without response, in order, all on one link (each at most MTU-3),
    /// waiting for link credits: a message a protocol cuts into pieces (MCUmgr's SMP) never has its
    /// first pieces on one link and the rest on the next. The link lost part-way fails the call; a call
    /// made while the session reconnects waits for the new link and writes everything there.
    public func writeWithoutResponse(service: BluetoothUUID, characteristic: BluetoothUUID, pieces: [[UInt8]],
                                     timeout: Duration) async throws {
        try await withDeadline(timeout, operation: "write \(characteristic)") {
            try await self.withClient { client in
                let r = try await client.resolve(service: service, characteristic: characteristic)
                try self.require(.writeWithoutResponse, "write-without-response", of: r)
                let limit = client.att.mtu - 3
                for piece in pieces {
                    guard piece.count <= limit else {
                        throw BLEError.protocolError("a write without response of \(piece.count) bytes exceeds MTU-3 (\(limit)); use writeBlob")
                    }
                    try await client.writeWithoutResponse(handle: r.characteristic.valueHandle, value: piece)
                }
            }
        }
    }

    /// Streams `data` with write without response in MTU-3 chunks, waiting for link credits.
    public func writeBlob(service: BluetoothUUID, characteristic: BluetoothUUID, data: [UInt8], timeout: Duration) async throws {
        try await withDeadline(timeout, operation: "write blob \(characteristic)") {
            try await self.withClient { client in
                let r = try await client.resolve(service: service, characteristic: characteristic)
                try self.require(.writeWithoutResponse, "write-without-response", of: r)
                try await client.writeBlob(handle: r.characteristic.valueHandle, data: data)
            }
        }
    }

    /// Runs `body` with the ready link's GATT client; once more, on rediscovered handles, when the client
    /// says the failure came from a stale layout (`GATTClient.shouldRediscover(after:)`).
    func withClient<T: Sendable>(_ body: @Sendable (GATTClient) async throws -> T) async throws -> T {
        let (_, client) = try await readyClient()
        do {
            return try await upgrading { try await body(client) }
        } catch let e as BLEError {
            guard await client.shouldRediscover(after: e) else { throw e }
            log("\(peer): \(e); rediscovering and trying once more")
            return try await body(client)
        }
    }

    nonisolated func require(_ property: GATTProperties, _ name: String, of r: ResolvedCharacteristic) throws {
        guard !options.allowUnsupportedProperties, !r.characteristic.properties.contains(property) else { return }
        throw BLEError.unsupportedProperty(characteristic: r.characteristic.uuid, property: name)
    }
}
