import BLE
import Workflow

/// The link family: `scan`, `connect`, `pair`, `discover`, `disconnect`. What they decide about
/// adapters and slots is the device's `LinkLease`; these do the radio work and report to it.
struct LinkSteps: StepExecutor {
    func run(_ step: Step, in context: StepContext) async throws -> StepOutput {
        switch step.kind {
        case .scan(let s):
            try await scan(s, context)
        case .connect(let c):
            try await connect(c, context)
        case .pair(let p):
            let s = try context.session()
            let request = try p.security.request(level: p.security.level.securityLevel, lookup: context.text)
            _ = try await s.secure(request, timeout: context.timeout)
        case .discover(let d):
            let s = try context.session()
            let services = d.services.isEmpty ? context.agent.run.servicesUsed : d.services
            try await s.discover(services: d.all ? [] : services, timeout: context.timeout)
        case .disconnect:
            await context.agent.closeLink()
        default:
            throw DeviceFailure(.invalidInput, "`\(step.kind.keyword)` is not a link step")
        }
        return .none
    }

    // MARK: scan

    private func scan(_ s: Step.Scan, _ context: StepContext) async throws {
        let device = context.device
        var wanted = ScanHub.Wanted(address: nil, name: nil, filter: ScanFilter(services: s.services, minimumRSSI: s.minRSSI))
        if let t = s.address {
            let text = try context.render(t)
            guard let a = BluetoothAddress(text) else { throw DeviceFailure(.invalidInput, "\"\(text)\" is not a Bluetooth address") }
            if let own = device.address, !own.sameDevice(as: a) {
                throw DeviceFailure(.invalidInput, "the scan step asks for address \(a), but the inventory gives this device \(own)")
            }
            wanted.address = a
        } else if let t = s.name {
            wanted.name = try context.render(t)
            // A device the inventory gives an address is that unit and no other: a second unit advertising
            // the same name must never be provisioned in its place.
            wanted.address = device.address
        } else if let a = device.address {
            wanted.address = a
        } else {
            wanted.name = device.name
        }
        if let m = s.manufacturer { wanted.manufacturer = (m.company, m.prefix) }
        if try await scanByConnecting(wanted, s, context) { return }
        let agent = context.agent
        let timeout = context.timeout
        guard let (ad, adapter) = await agent.run.adapters.find(wanted, timeout: timeout, avoid: agent.machine.lease.avoid) else {
            try Task.checkCancellation()
            let what = wanted.address.map { "address \($0)" } ?? wanted.name.map { "name \"\($0)\"" } ?? "a matching device"
            throw DeviceFailure(.notFound, "no advertisement from \(what) within \(timeout)")
        }
        agent.note(.link(.heard(LinkLease.Heard(ad), on: adapter.id)))
    }

    /// A scan that only has to hear a device whose address is known is satisfied by connecting to that
    /// address on an adapter that connects by address (`Central.connectsByAddress`): the controller
    /// connects the device when it advertises, within the scan's timeout, or the device is `not_found`.
    /// The link is held for the next `connect` step. False when the step needs a real scan: no address
    /// (in the step or the inventory), an RSSI or manufacturer filter, no connect step after it, a
    /// session already up, no such adapter, or an advertisement heard lately from the address that the
    /// step's filters reject.
    private func scanByConnecting(_ wanted: ScanHub.Wanted, _ s: Step.Scan, _ context: StepContext) async throws -> Bool {
        let agent = context.agent
        // The step's own address, else the inventory's (a device listed with an address is that address,
        // whatever name or services the step also asks for; those are checked against what was heard).
        guard let address = wanted.address ?? context.device.address, s.minRSSI == nil, s.manufacturer == nil,
              agent.link.session == nil, agent.link.heldLink == nil,
              context.steps[(context.index + 1)...].contains(where: { if case .connect = $0.kind { return true } else { return false } }),
              let adapter = agent.run.adapters.connectingAdapter(avoid: agent.machine.lease.avoid) else { return false }
        let byAddress = ScanHub.Wanted(address: address, name: nil, filter: ScanFilter())
        let heard = await adapter.hub.cached(byAddress)
        if let heard, !wanted.matches(heard) { return false }
        try await adapter.slots.acquire()
        agent.note(.link(.slotTaken(on: adapter.id)))
        let timeout = context.timeout
        let link: any Link
        // The link is the next connect step's: it asks the radio for what that step does.
        let linkWanted = context.steps[(context.index + 1)...].lazy.compactMap { step -> LinkPreferences?? in
            if case .connect(let c) = step.kind { return .some(c.link) } else { return nil }
        }.first ?? nil
        do {
            link = try await adapter.central.connect(to: address, options: ConnectOptions(timeout: timeout, link: linkWanted))
        } catch {
            agent.note(.link(.scanConnectFailed(on: adapter.id, adapterFailure: Self.adapterFailure(error))))
            switch error as? BLEError {
            case .timeout?:
                throw DeviceFailure(.notFound, "no advertisement from address \(address) within \(timeout) (connecting by address on \(adapter.id))")
            case .adapterFailure?, .cancelled?, nil:
                throw error
            default:
                // The controller reached the device and the link failed: it is there. The connect step
                // connects again under its own policy.
                return true
            }
        }
        agent.link.heldLink = link
        let rssi = await link.readRSSI() ?? heard?.rssi
        agent.note(.link(.linkHeld(on: adapter.id, heard: rssi.map { LinkLease.Heard(address: link.peer, rssi: $0, name: heard?.name) })))
        return true
    }

    // MARK: connect

    private func connect(_ c: Step.Connect, _ context: StepContext) async throws {
        let agent = context.agent
        let run = agent.run
        // A stop that came before the first connection has cut this device: nothing was sent to it.
        guard run.reached.reach(context.device.id) else { throw CancellationError() }
        if let s = agent.link.session, await s.state == .ready { return }
        let held = agent.link.heldLink
        agent.link.heldLink = nil
        // A held link owns the slot the scan step took; anything else starts afresh.
        if held == nil { await agent.closeLink() }
        guard let peer = held?.peer ?? agent.machine.lease.peer(inventory: context.device.address) else {
            throw DeviceFailure(.invalidInput, "no address to connect to (add a scan step or an address in the inventory)")
        }
        let pool = run.adapters
        // A held link stays on its adapter; otherwise a controller that is down hands the device on.
        let current = agent.machine.lease.connectAdapter(among: pool.ids, failed: { pool.adapter($0)?.isFailed ?? true }).flatMap(pool.adapter)
        guard let adapter = held != nil && current != nil ? current : pool.working(preferring: current) else {
            throw DeviceFailure(.adapterFailure, "no working adapter")
        }
        let id = adapter.id
        agent.note(.link(.connecting(on: id)))
        if held == nil {
            try await adapter.slots.acquire()
            agent.note(.link(.slotTaken(on: id)))
        }
        // The secrets (passkey, OOB data) rendered for this device; never shown (the redactor knows them).
        let asked = try c.security.request(level: c.security.level.securityLevel, lookup: context.text)
        let options = SessionOptions(
            connect: ConnectOptions(timeout: context.timeout, preferredMTU: c.mtu ?? 247, link: c.link),
            reconnect: c.reconnect,
            discovery: run.fullDiscovery ? .all : .targeted,
            allowUnsupportedProperties: run.allowUndeclared,
            attTimeout: run.attTimeout,
            gattCache: run.gattCache, gattCacheKey: context.device.value(of: "model") ?? "",
            security: asked.level > .none ? asked : nil,
            upgrade: c.security.upgrade ? asked : nil)
        let central: any Central = held.map { HeldLinkCentral(base: adapter.central, link: $0) } ?? adapter.central
        let s = Session(central: central, peer: peer, options: options)
        do {
            try await s.connect()
        } catch {
            if let outcome = await s.security { agent.note(.secured(outcome)) }
            await s.disconnect()
            if let h = central as? HeldLinkCentral { await h.close() }
            agent.note(.link(.connectFailed(on: id, adapterFailure: Self.adapterFailure(error))))
            throw error
        }
        agent.link.session = s
        agent.note(.link(.connected))
    }

    /// Why the adapter itself failed, when that is what the error says.
    private static func adapterFailure(_ error: any Error) -> String? {
        if case .adapterFailure(let why)? = error as? BLEError { return why }
        return nil
    }
}
