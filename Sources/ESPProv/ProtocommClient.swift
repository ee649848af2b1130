import BLE

/// Carries protocomm requests: a write of the request to an endpoint, then a read of its answer.
public protocol ProtocommTransport: Sendable {
    /// Sends `data` to `endpoint` and returns the answer; throws `ProtocommTransportRefusal` when the
    /// device refused the write or the read (an ATT error), anything else when the link failed.
    func exchange(_ endpoint: String, _ data: [UInt8], timeout: Duration) async throws -> [UInt8]
}

/// The device refused a request (an ATT Error Response to the write or the read).
public struct ProtocommTransportRefusal: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// An operation ran past its deadline (its step's timeout).
public struct ProtocommTimeout: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var limit: Duration
    public var description: String { "\(operation) did not end within \(limit)" }
}

/// Protocomm over GATT (ESP-IDF's protocomm_ble / NimBLE transport): each endpoint is a characteristic of
/// the provisioning service, found by its Characteristic User Description (0x2901) — never by a UUID
/// alone, since the application chooses the service's UUID and the characteristics' follow from it. A
/// request is a Write Request (Prepare/Execute Write when longer than MTU-3) and its answer the Read
/// (Read Blob when longer than MTU-1) that follows.
public actor GATTProtocommTransport: ProtocommTransport {
    /// The service UUID ESP-IDF's examples give the provisioning service.
    public static let defaultService = BluetoothUUID("021a9004-0382-4aea-bff4-6b3f1c5adfb4") ?? BluetoothUUID(0xFFFF)

    public nonisolated let session: Session
    public nonisolated let service: BluetoothUUID
    private var endpoints: [String: BluetoothUUID]?

    public init(session: Session, service: BluetoothUUID = GATTProtocommTransport.defaultService) {
        self.session = session
        self.service = service
    }

    /// The endpoints found, by name (discovered on first use).
    public func endpointNames(timeout: Duration) async throws -> [String: BluetoothUUID] {
        if let endpoints { return endpoints }
        var found: [String: BluetoothUUID] = [:]
        for entry in try await session.userDescriptions(service: service, timeout: timeout) {
            guard let d = entry.description, d.count <= 64, let name = String(validating: d, as: UTF8.self) else { continue }
            let trimmed = String(name.prefix { $0 != "\0" })
            if !trimmed.isEmpty, found[trimmed] == nil { found[trimmed] = entry.characteristic }
        }
        endpoints = found
        return found
    }

    public func exchange(_ endpoint: String, _ data: [UInt8], timeout: Duration) async throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        guard let uuid = try await endpointNames(timeout: timeout)[endpoint] else {
            throw ProtocommError(.endpointNotFound, "the device has no `\(endpoint)` endpoint (no characteristic of service \(service) describes itself so)")
        }
        do {
            try await session.write(service: service, characteristic: uuid, value: data, withResponse: true,
                                    timeout: max(.zero, deadline - .now))
            return try await session.read(service: service, characteristic: uuid, timeout: max(.zero, deadline - .now))
        } catch BLEError.att(let e) {
            throw ProtocommTransportRefusal("\(endpoint): \(e)")
        }
    }
}

/// Runs `ProtocommMachine`s over a transport: one operation at a time, each within a deadline.
public enum ProtocommClient {
    /// Runs `operation` on `machine` (starting a session first when it has none) until it completes,
    /// fails (`ProtocommError`), runs past `deadline` (`ProtocommTimeout`), or the transport fails.
    public static func run(_ operation: ProtocommMachine.Operation, on machine: inout ProtocommMachine,
                           over transport: some ProtocommTransport, deadline: ContinuousClock.Instant,
                           timeout: Duration) async throws -> ProtocommMachine.Outcome {
        var actions = machine.handle(.begin(operation))
        while true {
            guard let action = actions.first else {
                throw ProtocommError(.protocolError, "the provisioning machine stopped without an outcome")
            }
            switch action {
            case .completed(let outcome):
                return outcome
            case .failed(let error):
                throw error
            case .send(let endpoint, let data):
                let left = deadline - .now
                guard left > .zero else { throw ProtocommTimeout(operation: "\(operation)", limit: timeout) }
                let answer: [UInt8]
                do {
                    answer = try await transport.exchange(endpoint, data, timeout: left)
                } catch let refusal as ProtocommTransportRefusal {
                    actions = machine.handle(.refused(refusal.reason))
                    continue
                } catch {
                    // The link failed under the machine: its session is gone with it.
                    machine = ProtocommMachine(configuration: machine.configuration)
                    throw error
                }
                actions = machine.handle(.answered(answer))
            case .wait(let d):
                // The device has no event for a status change: it is asked again after `d`, within the deadline.
                guard ContinuousClock.now + d < deadline else { throw ProtocommTimeout(operation: "\(operation)", limit: timeout) }
                try await Task.sleep(for: d)
                actions = machine.handle(.pollDue)
            }
        }
    }
}
