import BLE
import BLESecurity
import McuMgr
import Synchronization

/// Serves one link of one virtual device: runs the device's `ATTServer` over the link's device end,
/// applies the model's behaviour and faults, and returns a credit after each PDU. Lives as long as the
/// link.
package struct DeviceConnection: Sendable {
    let device: VirtualDevice
    let link: InMemoryLink
    var rng: SimulatorRandom
    let latencyScale: Double
    /// The link's protection, as its Security Manager leaves it (`SimulatedLink.secure`).
    let security: LinkSecurityBox

    init(device: VirtualDevice, link: InMemoryLink, rng: SimulatorRandom, latencyScale: Double, security: LinkSecurityBox) {
        self.device = device
        self.link = link
        self.rng = rng
        self.latencyScale = latencyScale
        self.security = security
    }

    /// The GATT database for this connection: values resolved for the device, the current state
    /// value, fresh CCCDs, the notify-without-declaring and 128-bit declaration quirks applied, and the
    /// Database Hash (if the model declares 2B2A) computed over the result — from the layout its model
    /// and faults share (`DatabaseLayout`).
    package static func database(for device: VirtualDevice) -> GATTDatabase {
        device.layout.database(for: device)
    }

    /// How a stored characteristic tells a subscriber its new value: by notification when it declares
    /// notify, by indication when it declares only indicate, not at all otherwise.
    enum Echo { case none, notify, indicate }

    /// The value handles of the stored characteristics (`store` behaviour), with their path and echo.
    static func storeHandles(_ db: GATTDatabase, _ model: DeviceModel) -> [UInt16: (path: CommandBehaviour.Path, echo: Echo)] {
        var out: [UInt16: (path: CommandBehaviour.Path, echo: Echo)] = [:]
        for path in model.store?.characteristics ?? [] {
            guard let h = db.valueHandle(service: path.service, characteristic: path.characteristic) else { continue }
            let properties = model.services.first { $0.uuid == path.service }?.characteristics.first { $0.uuid == path.characteristic }?.properties ?? []
            out[h] = (path, properties.contains(.notify) ? .notify : properties.contains(.indicate) ? .indicate : .none)
        }
        return out
    }

    func handle(_ db: GATTDatabase, _ path: CommandBehaviour.Path?) -> UInt16? {
        path.flatMap { db.valueHandle(service: $0.service, characteristic: $0.characteristic) }
    }

    mutating func run() async {
        let db = Self.database(for: device)
        let behaviour = device.model.behaviour
        let controlHandle = handle(db, behaviour?.control)
        let ackHandle = handle(db, behaviour?.ack)
        let stateHandle = handle(db, behaviour?.state)
        let blobHandle = handle(db, behaviour?.blob)
        let stores = Self.storeHandles(db, device.model)
        let faults = device.faults
        let factor = latencyScale * faults.slow
        let model = device.model
        var server = ATTServer(database: db, maxMTU: min(model.maxMTU, faults.mtuCap ?? 517),
                               supportsFindByTypeValue: !faults.fullDiscoveryOnly,
                               supportsReadMultipleVariable: faults.readMultipleVariable)
        let peer = link.device
        // An MCUmgr device: writes to its SMP characteristic go to its transport and worker.
        var smp: SMPDeviceLink?
        if let config = model.mcumgr, let h = db.valueHandle(service: SMPGATT.service, characteristic: SMPGATT.characteristic) {
            let transport = SMPDeviceLink(device: device, config: config, valueHandle: h, peer: peer, factor: factor,
                                          rng: SimulatorRandom(seed: rng.next(), device: device.id, stream: 0x5319_0000))
            smp = transport
            Task { await transport.serve() }
        }
        defer { smp?.close() }
        while let pdu = await peer.receive() {
            if faults.drop > 0, rng.chance(faults.drop) {
                device.record(.fault("drop"))
                peer.drop(.supervisionTimeout)
                return
            }
            let isRequest = pdu.first.map { ATTOpcode($0).isRequest } ?? false
            // On a paced link the connection events are the link's timing; `round_trip` stands in for it
            // only on an unpaced one.
            if isRequest && link.events == nil {
                let rtt = rng.duration(in: model.latency.roundTrip).scaled(factor)
                if rtt > .zero {
                    do {
                        try await Task.sleep(for: rtt)
                    } catch {
                        return
                    }
                }
            }
            server.linkSecurity = security.value
            let (response, events) = server.receive(pdu)
            var acks: [[UInt8]] = []
            var echoes: [[UInt8]] = []
            for event in events {
                guard case .wrote(let h, let value, _) = event else { continue }
                if let store = stores[h] {
                    device.record(.store(store.path, value))
                    let pdu: [UInt8]?
                    switch store.echo {
                    case .notify: pdu = server.notification(valueHandle: h, value: value)
                    case .indicate: pdu = server.indication(valueHandle: h, value: value)
                    case .none: pdu = nil
                    }
                    if let pdu { echoes.append(pdu) }
                } else if h == controlHandle {
                    let busy = faults.busyAck > 0 && rng.chance(faults.busyAck)
                    let lost = !busy && faults.ackLoss > 0 && rng.chance(faults.ackLoss)
                    guard let ack = device.record(.control(value, busy: busy, link: server.linkSecurity.level)) else { continue }
                    if let stateHandle { server.database.setValue([device.stateValue], at: stateHandle) }
                    if lost {
                        device.record(.fault("ack_loss"))
                    } else {
                        acks.append(ack)
                    }
                } else if h == blobHandle {
                    device.record(.blob(value))
                } else if let smp, h == smp.valueHandle {
                    smp.write(value)
                }
            }
            if let smp {
                smp.linkState(mtu: server.mtu, notifying: server.notification(valueHandle: smp.valueHandle, value: []) != nil)
            }
            if let response { peer.send(response) }
            for echo in echoes { peer.send(echo) }
            for ack in acks {
                let delay = rng.duration(in: model.latency.ack).scaled(factor)
                guard let ackHandle, let notification = server.notification(valueHandle: ackHandle, value: ack) else { continue }
                if delay > .zero {
                    Task {
                        try? await Task.sleep(for: delay)
                        peer.send(notification)
                    }
                } else {
                    peer.send(notification)
                }
            }
            peer.consumed()
        }
    }
}

/// A link's protection, shared between its Security Manager (which sets it) and the device's ATT server
/// (which reads it for every PDU).
final class LinkSecurityBox: Sendable {
    private let state = Mutex(LinkSecurity.none)
    var value: LinkSecurity {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}
