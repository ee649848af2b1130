/// Notification subscriptions: keyed by (service, characteristic), shared by their consumers, enabled
/// by the first, disabled by the last, restored on every new link (`SessionMachine` decides who does what).
extension Session {
    /// Subscribes to a characteristic's notifications (or indications). Consumers of one characteristic
    /// share one subscription; the stream buffers every value that arrives after this call returns.
    public func notifications(service: BluetoothUUID, characteristic: BluetoothUUID, indicate: Bool = false,
                              timeout: Duration) async throws -> NotificationStream {
        let key = SubscriptionKey(service: service, characteristic: characteristic)
        let id = newWaiter()
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self, throwing: (any Error).self)
        continuation.onTermination = { @Sendable _ in
            Task { await self.consumerLeft(key, id: id) }
        }
        let token = LeaveToken { await self.consumerLeft(key, id: id) }
        // Register first, so nothing that arrives after the CCCD write is lost.
        router.add(continuation, id: id, for: key)
        do {
            try await withDeadline(timeout, operation: "subscribe \(characteristic)") {
                try await self.join(key, id: id, indicate: indicate)
            }
        } catch {
            router.remove(id: id, for: key)
            await feed(.leave(key, id))
            continuation.finish()
            throw error
        }
        return NotificationStream(base: stream, token: token)
    }

    /// Joins the subscription on the ready link: at once when it is enabled, after the consumer enabling
    /// it, or by enabling it (then the consumers that came meanwhile wait for this one).
    private func join(_ key: SubscriptionKey, id: WaiterID, indicate: Bool) async throws {
        let (g, client) = try await readyClient()
        switch try await wake(id, after: machine.handle(.subscribe(id, key, indicate: indicate, on: g))) {
        case .ready(let result):
            _ = try result.get()
        case .enable:
            let handles: SessionMachine.Handles
            do {
                handles = try await upgrading { try await self.enableRediscovering(key, indicate: indicate, on: client, generation: g) }
            } catch {
                await feed(.enableFailed(id, key, g, Self.bleError(error)))
                throw error
            }
            _ = try await ready(id, after: machine.handle(.enabled(id, key, g, handles)))
        }
    }

    /// Resolves the characteristic, binds its handle, and writes its CCCD on (strict unless allowed).
    private func enable(_ key: SubscriptionKey, indicate: Bool, on client: GATTClient,
                        generation g: Generation) async throws -> SessionMachine.Handles {
        let r = try await client.resolve(service: key.service, characteristic: key.characteristic, needCCCD: true)
        let property: GATTProperties = indicate ? .indicate : .notify
        try require(property, indicate ? "indicate" : "notify", of: r)
        router.bind(handle: r.characteristic.valueHandle, to: key, generation: g)
        if let cccd = r.cccdHandle {
            try await client.writeCCCD(handle: cccd, notify: !indicate, indicate: indicate)
        } else if !options.allowUnsupportedProperties {
            throw BLEError.attributeNotFound("client characteristic configuration of characteristic \(key.characteristic) in service \(key.service)")
        }
        return SessionMachine.Handles(value: r.characteristic.valueHandle, cccd: r.cccdHandle)
    }

    /// `enable`, once more on rediscovered handles when the client says the failure came from a stale
    /// layout.
    func enableRediscovering(_ key: SubscriptionKey, indicate: Bool, on client: GATTClient,
                             generation g: Generation) async throws -> SessionMachine.Handles {
        do {
            return try await enable(key, indicate: indicate, on: client, generation: g)
        } catch let e as BLEError {
            guard await client.shouldRediscover(after: e) else { throw e }
            log("\(peer): \(e); finding \(key) again")
            router.unbind(key)
            return try await enable(key, indicate: indicate, on: client, generation: g)
        }
    }

    /// A consumer left: the last one out disables the subscription on the device.
    private func consumerLeft(_ key: SubscriptionKey, id: WaiterID) async {
        router.remove(id: id, for: key)?.finish()
        await feed(.leave(key, id))
    }

    /// The last consumer left: the CCCD is written off (a failure is only logged).
    func disable(_ key: SubscriptionKey, cccd: UInt16, on g: Generation) async {
        guard let client = links[g]?.gatt else { return }
        do {
            try await withDeadline(options.attTimeout, operation: "unsubscribe \(key.characteristic)") {
                try await client.writeCCCD(handle: cccd, notify: false, indicate: false)
            }
        } catch {
            log("disabling \(key) on \(peer) failed: \(error)")
        }
    }

    /// The server's database changed (Service Changed indication): the link's layout is dropped, and every
    /// active subscription is found again by UUID, rebound and its CCCD written, as after a reconnect.
    /// (Requests already queued with old handles are not stopped: the server's robust caching, which this
    /// client asks for wherever the server offers it, is what refuses those.)
    func rediscover(_ list: [SessionMachine.Restore], on g: Generation) async {
        guard let client = links[g]?.gatt else { return }
        await client.serviceChangedIndicated()
        for r in list {
            router.unbind(r.key)
            do {
                let handles = try await enableRediscovering(r.key, indicate: r.indicate, on: client, generation: g)
                await feed(.rebound(r.key, g, handles))
            } catch {
                log("\(peer): restoring \(r.key) after Service Changed failed: \(error)")
            }
        }
    }
}
