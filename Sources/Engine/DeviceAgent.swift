import BLE
import Foundation
import Support
import Synchronization
import Workflow

/// Runs the workflow for one device: owns its session, runs the steps under the supervisor's retry
/// rules, and records each step's outcome, attempts and timing, and the values captured.
actor DeviceAgent {
    let device: InventoryDevice
    let context: RunContext
    let attemptNumber: Int
    let resumed: Bool

    /// Values captured by earlier steps, with their types.
    private var captured: [String: TypedValue] = [:]
    /// The workflow's declared variables (`vars:`), read from the device's inventory text as their type.
    private let declared: [String: TypedValue]
    /// Every `verify` run so far, in the order they ran (a step run again replaces its record).
    private var measurements: [MeasurementRecord] = []
    private var session: Session?
    private var adapter: AdapterPool.Adapter?
    private var holdsSlot = false
    /// A link a `scan` step made by connecting to a known address, for the `connect` step to take.
    private var heldLink: (any Link)?
    private var advertisement: Advertisement?
    private var mailboxes: [String: Mailbox] = [:]
    private var avoidAdapters: Set<String> = []
    private var roundTripsBefore = 0
    /// Values of read steps fetched together with the read step before them (`readValue`), by step index.
    private var prefetched: [Int: Result<[UInt8], BLEError>] = [:]
    /// Hides this device's secrets in every record, event and message it makes; learns the bytes it
    /// writes from values that use a secret.
    private var redactor: Redactor
    /// This attempt sent an irreversible write that may have reached the device (no answer said it
    /// was not executed, no `confirm` said it did not take effect).
    private var irreversibleSent = false
    /// What securing this device's links achieved, over every session so far.
    private var security: SecurityOutcome?
    /// What the device's last link got from the radio (for the report).
    private var linkRecord: LinkRecord?

    init(device: InventoryDevice, context: RunContext, attemptNumber: Int, resumed: Bool) {
        self.device = device
        self.context = context
        self.attemptNumber = attemptNumber
        self.resumed = resumed
        self.redactor = context.inventory.redactor(for: device)
        var declared: [String: TypedValue] = [:]
        for (name, declaration) in context.workflow.variables {
            // Validation checked every selected device's values; a value that does not read is absent.
            if let text = device.value(of: name), let v = try? declaration.value(fromText: text, name: name) { declared[name] = v }
        }
        self.declared = declared
    }

    /// Runs the workflow as its supervisor decides; always returns a record (never throws).
    func run() async -> DeviceRecord {
        let clock = ContinuousClock()
        let start = clock.now
        let startedAt = WallClock.iso(WallClock.now())
        let steps = context.workflow.steps
        var supervisor = StepSupervisor(steps: context.stepInfos, seed: context.seed ^ StableHash.fnv1a(device.id),
                                        reconcile: context.reconcile[device.id])
        var queue = supervisor.handle(.begin(at: .zero))
        while !queue.isEmpty {
            let action = queue.removeFirst()
            switch action {
            case .execute(let index, _, let confirmFirst):
                if let condition = steps[index].condition, let skip = skipReason(condition) {
                    switch skip {
                    case .success(let reason):
                        queue += supervisor.handle(.skippedByCondition(reason: reason, at: clock.now - start))
                    case .failure(let f):
                        queue += supervisor.handle(.failed(redacted(f), sent: false, at: clock.now - start))
                    }
                    continue
                }
                queue += supervisor.handle(await executeStep(index, confirmFirst: confirmFirst, elapsed: { clock.now - start }))
            case .confirm(let index, _):
                queue += supervisor.handle(await confirmStep(index, elapsed: { clock.now - start }))
            case .stepFinished(let index, let outcome, let attempt, let duration, let f):
                context.events.emit(RunEvent(.stepFinished, device: device.id, step: steps[index].name, attempt: attempt,
                                             outcome: outcome.rawValue, durationMs: duration.milliseconds,
                                             error: f.map { FailureRecord(kind: $0.kind, step: steps[index].name, message: $0.message, causes: $0.causes) }))
            case .retry(let index, let attempt, let delay, let f):
                context.events.emit(RunEvent(.stepRetry, device: device.id, step: steps[index].name, attempt: attempt,
                                             delayMs: delay.milliseconds,
                                             error: FailureRecord(kind: f.kind, step: steps[index].name, message: f.message, causes: f.causes)))
                await prepareRetry(after: f, step: steps[index])
                do {
                    try await Task.sleep(for: delay)
                    queue += supervisor.handle(.backoffEnded(sessionLost: await sessionIsLost(), at: clock.now - start))
                } catch {
                    queue += supervisor.handle(.backoffCancelled(at: clock.now - start))
                }
            case .closeSession:
                await closeSession()
            case .finish:
                break
            }
        }
        let end = clock.now - start
        var records: [StepRecord] = []
        records.reserveCapacity(steps.count)
        for (i, step) in steps.enumerated() {
            let p = supervisor.progress[i]
            records.append(StepRecord(name: step.name, kind: step.kind.keyword, outcome: p.outcome, attempts: p.attempts,
                                      startMs: (p.firstStart ?? end).milliseconds.rounded(toPlaces: 3),
                                      durationMs: p.spent.milliseconds.rounded(toPlaces: 3),
                                      error: p.outcome == .failed ? p.failure.map { FailureRecord(kind: $0.kind, step: step.name, message: $0.message, causes: $0.causes) } : nil,
                                      skipReason: p.outcome == .skippedByCondition ? p.skipReason : nil,
                                      optional: step.onFailure == .optional ? true : nil,
                                      continueOnError: step.onFailure == .continueOnError ? true : nil))
        }
        let roundTrips = await finish()
        let duration = clock.now - start
        let failedStep = supervisor.failedStep.map { steps[$0].name }
        var failure = supervisor.failure
        // Cut on its own (a lost lease on a line), not by a stop: say why.
        if let f = failure, f.kind == .interrupted, let why = context.cutReason(device.id) {
            failure = DeviceFailure(.interrupted, why, causes: [f.message] + f.causes)
        }
        return DeviceRecord(
            id: device.id, address: (advertisement?.address ?? device.address)?.description,
            name: device.name ?? advertisement?.name, outcome: supervisor.outcome, attempts: attemptNumber, adapter: adapter?.id,
            rssi: advertisement?.rssi, started: startedAt, durationMs: duration.milliseconds.rounded(toPlaces: 3),
            captured: capturedForReport(), measurements: measurements, steps: records,
            error: failure.map { FailureRecord(kind: $0.kind, step: failedStep, message: $0.message, causes: $0.causes) },
            resumed: resumed ? true : nil, attRoundTrips: roundTrips, security: securityRecord(), link: linkRecord)
    }

    /// Runs one attempt of a step and says how it went, for the supervisor.
    private func executeStep(_ index: Int, confirmFirst: Bool, elapsed: () -> Duration) async -> StepSupervisor.Event {
        irreversibleSent = false
        do {
            try Task.checkCancellation()
            try await execute(context.workflow.steps[index], index: index, confirmFirst: confirmFirst)
            return .succeeded(at: elapsed())
        } catch {
            var f = DeviceFailure.from(error)
            if Task.isCancelled { f = DeviceFailure(.interrupted, "cut while stopping", causes: [f.description]) }
            return .failed(redacted(f), sent: irreversibleSent, at: elapsed())
        }
    }

    /// Reads a reconciling device's `confirm` for step `index` (nothing is sent), for the supervisor.
    private func confirmStep(_ index: Int, elapsed: () -> Duration) async -> StepSupervisor.Event {
        let step = context.workflow.steps[index]
        do {
            try Task.checkCancellation()
            guard case .await(let a) = step.kind, a.confirm != nil else {
                throw DeviceFailure(.invalidInput, "step `\(step.name)` has no `confirm` read")
            }
            return .confirmed(tookEffect: try await confirmed(a, step: step, timeout: step.effectiveTimeout), at: elapsed())
        } catch {
            var f = DeviceFailure.from(error)
            if Task.isCancelled { f = DeviceFailure(.interrupted, "cut while stopping", causes: [f.description]) }
            return .failed(redacted(f), sent: false, at: elapsed())
        }
    }

    // MARK: - Steps

    private func execute(_ step: Step, index: Int, confirmFirst: Bool) async throws {
        let timeout = step.effectiveTimeout
        switch step.kind {
        case .scan(let s):
            try await scan(s, index: index, timeout: timeout)
        case .connect(let c):
            try await connect(c, timeout: timeout)
        case .pair(let p):
            let s = try requireSession(step)
            let request = try p.security.request(level: p.security.level.securityLevel, lookup: lookup)
            _ = try await s.secure(request, timeout: timeout)
        case .discover(let d):
            let s = try requireSession(step)
            let services = d.services.isEmpty ? context.servicesUsed : d.services
            try await s.discover(services: d.all ? [] : services, timeout: timeout)
        case .read(let r):
            let s = try requireSession(step)
            let bytes = try await readValue(r, at: index, on: s, timeout: timeout)
            let value: TypedValue
            do {
                value = try r.format.decode(bytes)
            } catch {
                throw DeviceFailure(.protocolError, "the value read cannot be decoded as \(r.format): \(error.message)")
            }
            if let id = r.id { capture(id, value) }
        case .verify(let v):
            try verify(v, index: index)
        case .derive(let d):
            try derive(d)
        case .write(let w):
            let s = try requireSession(step)
            try await write(w, on: s, step: step, index: index, timeout: timeout)
        case .writeBlob(let w):
            let s = try requireSession(step)
            let data = try w.value.bytes(variables: lookup, baseDirectory: context.inventory.baseDirectory)
            learnSecretBytes(data, from: w.value)
            if let chunk = w.chunkSize, chunk > 0, chunk < data.count {
                var offset = 0
                let deadline = ContinuousClock.now + timeout
                while offset < data.count {
                    let end = min(data.count, offset + chunk)
                    try await s.writeBlob(service: w.target.service, characteristic: w.target.characteristic,
                                          data: Array(data[offset..<end]), timeout: max(.zero, deadline - .now))
                    offset = end
                }
            } else {
                try await s.writeBlob(service: w.target.service, characteristic: w.target.characteristic, data: data, timeout: timeout)
            }
        case .subscribe(let sub):
            let s = try requireSession(step)
            if let old = mailboxes.removeValue(forKey: sub.id) { await old.close() }
            let stream = try await s.notifications(service: sub.target.service, characteristic: sub.target.characteristic,
                                                   indicate: sub.mode == .indicate, timeout: timeout)
            mailboxes[sub.id] = Mailbox(stream: stream)
        case .unsubscribe(let u):
            if let m = mailboxes.removeValue(forKey: u.id) { await m.close() }
        case .await(let a):
            try await awaitValue(a, step: step, index: index, timeout: timeout, confirmFirst: confirmFirst)
        case .sleep(let s):
            try await Task.sleep(for: s.duration)
        case .disconnect:
            await closeSession()
        }
    }

    private func scan(_ s: Step.Scan, index: Int, timeout: Duration) async throws {
        var wanted = ScanHub.Wanted(address: nil, name: nil, filter: ScanFilter(services: s.services, minimumRSSI: s.minRSSI))
        if let t = s.address {
            let text = try t.render(lookup)
            guard let a = BluetoothAddress(text) else { throw DeviceFailure(.invalidInput, "\"\(text)\" is not a Bluetooth address") }
            if let own = device.address, !own.sameDevice(as: a) {
                throw DeviceFailure(.invalidInput, "the scan step asks for address \(a), but the inventory gives this device \(own)")
            }
            wanted.address = a
        } else if let t = s.name {
            wanted.name = try t.render(lookup)
            // A device the inventory gives an address is that unit and no other: a second unit advertising
            // the same name must never be provisioned in its place.
            wanted.address = device.address
        } else if let a = device.address {
            wanted.address = a
        } else {
            wanted.name = device.name
        }
        if let m = s.manufacturer { wanted.manufacturer = (m.company, m.prefix) }
        if try await scanByConnecting(wanted, s, index: index, timeout: timeout) { return }
        guard let (ad, adapter) = await context.adapters.find(wanted, timeout: timeout, avoid: avoidAdapters) else {
            try Task.checkCancellation()
            let what = wanted.address.map { "address \($0)" } ?? wanted.name.map { "name \"\($0)\"" } ?? "a matching device"
            throw DeviceFailure(.notFound, "no advertisement from \(what) within \(timeout)")
        }
        advertisement = ad
        self.adapter = adapter
    }

    /// A scan that only has to hear a device whose address is known is satisfied by connecting to that
    /// address on an adapter that connects by address (`Central.connectsByAddress`): the controller
    /// connects the device when it advertises, within the scan's timeout, or the device is `not_found`.
    /// The link is held for the next `connect` step. False when the step needs a real scan: no address
    /// (in the step or the inventory),
    /// an RSSI or manufacturer filter, no connect step after it, a session already up, no such adapter,
    /// or an advertisement heard lately from the address that the step's filters reject.
    private func scanByConnecting(_ wanted: ScanHub.Wanted, _ s: Step.Scan, index: Int, timeout: Duration) async throws -> Bool {
        // The step's own address, else the inventory's (a device listed with an address is that address,
        // whatever name or services the step also asks for; those are checked against what was heard).
        guard let address = wanted.address ?? device.address, s.minRSSI == nil, s.manufacturer == nil, session == nil, heldLink == nil,
              context.workflow.steps[(index + 1)...].contains(where: { if case .connect = $0.kind { return true } else { return false } }),
              let adapter = context.adapters.connectingAdapter(avoid: avoidAdapters) else { return false }
        let byAddress = ScanHub.Wanted(address: address, name: nil, filter: ScanFilter())
        let heard = await adapter.hub.cached(byAddress)
        if let heard, !wanted.matches(heard) { return false }
        try await adapter.slots.acquire()
        holdsSlot = true
        self.adapter = adapter
        let link: any Link
        // The link is the next connect step's: it asks the radio for what that step does.
        let linkWanted = context.workflow.steps[(index + 1)...].lazy.compactMap { step -> LinkPreferences?? in
            if case .connect(let c) = step.kind { return .some(c.link) } else { return nil }
        }.first ?? nil
        do {
            link = try await adapter.central.connect(to: address, options: ConnectOptions(timeout: timeout, link: linkWanted))
        } catch {
            releaseSlot()
            adapter.followSlots()
            switch error as? BLEError {
            case .timeout?:
                throw DeviceFailure(.notFound, "no advertisement from address \(address) within \(timeout) (connecting by address on \(adapter.id))")
            case .adapterFailure(let why)?:
                adapter.markFailed(why)
                context.events.emit(RunEvent(.adapterFailed, device: device.id, message: why, adapter: adapter.id))
                self.adapter = nil
                throw error
            case .cancelled?, nil:
                throw error
            default:
                // The controller reached the device and the link failed: it is there. The connect step
                // connects again under its own policy.
                return true
            }
        }
        heldLink = link
        if let rssi = await link.readRSSI() ?? heard?.rssi {
            advertisement = Advertisement(address: link.peer, rssi: rssi, data: heard?.data ?? AdvertisingData(), adapter: adapter.id)
        }
        return true
    }

    private func connect(_ c: Step.Connect, timeout: Duration) async throws {
        if let s = session, await s.state == .ready { return }
        let held = heldLink
        heldLink = nil
        // A held link owns the slot the scan step took; anything else starts afresh.
        if held == nil { await closeSession() }
        let peer: BluetoothAddress
        if let link = held {
            peer = link.peer
        } else if let ad = advertisement {
            peer = ad.address
        } else if let a = device.address {
            peer = a
        } else {
            throw DeviceFailure(.invalidInput, "no address to connect to (add a scan step or an address in the inventory)")
        }
        // A held link stays on its adapter; otherwise a controller that is down hands the device on.
        let chosen = held != nil && self.adapter?.isFailed == false ? self.adapter : context.adapters.working(preferring: self.adapter)
        guard let adapter = chosen else {
            throw DeviceFailure(.adapterFailure, "no working adapter")
        }
        self.adapter = adapter
        if held == nil {
            try await adapter.slots.acquire()
            holdsSlot = true
        }
        // The secrets (passkey, OOB data) rendered for this device; never shown (the redactor knows them).
        let asked = try c.security.request(level: c.security.level.securityLevel, lookup: lookup)
        let options = SessionOptions(
            connect: ConnectOptions(timeout: timeout, preferredMTU: c.mtu ?? 247, link: c.link),
            reconnect: c.reconnect.attempts > 0 ? .limited(maxAttempts: c.reconnect.attempts, delays: [c.reconnect.delay]) : .disabled,
            discovery: context.fullDiscovery ? .all : .targeted,
            allowUnsupportedProperties: context.allowUndeclared,
            attTimeout: context.attTimeout,
            gattCache: context.gattCache, gattCacheKey: device.value(of: "model") ?? "",
            security: asked.level > .none ? asked : nil,
            upgrade: c.security.upgrade ? asked : nil)
        let central: any Central = held.map { HeldLinkCentral(base: adapter.central, link: $0) } ?? adapter.central
        let s = Session(central: central, peer: peer, options: options)
        do {
            try await s.connect()
        } catch {
            if let outcome = await s.security { security = security.map { $0.followed(by: outcome) } ?? outcome }
            await s.disconnect()
            if let h = central as? HeldLinkCentral { await h.close() }
            releaseSlot()
            adapter.followSlots()
            if case BLEError.adapterFailure(let why)? = error as? BLEError {
                adapter.markFailed(why)
                context.events.emit(RunEvent(.adapterFailed, device: device.id, message: why, adapter: adapter.id))
                // Let the retry find the device on another adapter.
                self.adapter = nil
                advertisement = nil
            }
            throw error
        }
        session = s
    }

    /// A read step's value. A read step directly followed by more read steps fetches theirs with it, in
    /// one request where the device answers Read Multiple Variable Length; each of those steps still runs,
    /// takes its own value (or error) and is recorded as itself. A retried step reads again.
    private func readValue(_ r: Step.Read, at index: Int, on s: Session, timeout: Duration) async throws -> [UInt8] {
        if let ready = prefetched.removeValue(forKey: index) { return try ready.get() }
        let steps = context.workflow.steps
        var batch: [(index: Int, target: CharacteristicRef)] = [(index, r.target)]
        for i in steps.indices.dropFirst(index + 1) {
            guard case .read(let next) = steps[i].kind else { break }
            batch.append((i, next.target))
        }
        guard batch.count > 1 else {
            return try await s.read(service: r.target.service, characteristic: r.target.characteristic, timeout: timeout)
        }
        let results = try await s.read(batch.map(\.target), timeout: timeout)
        prefetched = [:]
        for (b, result) in zip(batch, results).dropFirst() { prefetched[b.index] = result }
        return try results[0].get()
    }

    private func write(_ w: Step.Write, on s: Session, step: Step, index: Int, timeout: Duration) async throws {
        let data = try w.value.bytes(variables: lookup, baseDirectory: context.inventory.baseDirectory)
        learnSecretBytes(data, from: w.value)
        if step.irreversible {
            // Durable before the write goes out; a store that cannot record it stops the write.
            do {
                try await context.store.intent(device: device.id, step: step.name, stepIndex: index)
            } catch {
                throw DeviceFailure(.interrupted, "not sent: the journal could not record the intent of the irreversible step `\(step.name)`",
                                    causes: ["\(error)"])
            }
            irreversibleSent = true
        }
        do {
            try await s.write(service: w.target.service, characteristic: w.target.characteristic, value: data,
                              withResponse: w.withResponse, timeout: timeout)
        } catch let e as BLEError {
            switch e {
            case .att, .attributeNotFound, .unsupportedProperty:
                // Refused by the device (an Error Response) or never sent (no such characteristic, or it
                // does not allow the write): it did not take effect.
                if step.irreversible { irreversibleSent = false }
            default:
                break
            }
            throw e
        }
    }

    private func awaitValue(_ a: Step.Await, step: Step, index: Int, timeout: Duration, confirmFirst: Bool) async throws {
        guard let mailbox = mailboxes[a.subscription] else {
            throw DeviceFailure(.invalidInput, "no active subscription `\(a.subscription)` (it must be subscribed first)")
        }
        let matcher = try a.matcher.resolve(variables: lookup, baseDirectory: context.inventory.baseDirectory)
        let busy = try a.busy?.resolve(variables: lookup, baseDirectory: context.inventory.baseDirectory)
        let failsOn = try a.failsOn?.resolve(variables: lookup, baseDirectory: context.inventory.baseDirectory)
        // An earlier attempt's trigger may have taken effect: look before sending it again.
        if confirmFirst, a.confirm != nil, try await confirmed(a, step: step, timeout: timeout) { return }
        let waits = 1 + (a.trigger == nil ? 0 : a.resend.count)
        var sends = 0
        for i in 0..<waits {
            if i > 0 { try await Task.sleep(for: a.resend[i - 1]) }
            if let trigger = a.trigger {
                let s = try requireSession(step)
                // Listen first: values already buffered belong to earlier commands.
                mailbox.discardBuffered()
                try await write(trigger, on: s, step: step, index: index, timeout: timeout)
                sends += 1
            }
            switch try await mailbox.next(matching: matcher, busy: busy, failsOn: failsOn, timeout: timeout) {
            case .matched(let value):
                if let c = a.capture {
                    do {
                        capture(c.id, try c.value(of: value))
                    } catch {
                        throw DeviceFailure(.protocolError, "the value that matched (\(value.hexString)) cannot be captured as \(c.format): \(error.message)")
                    }
                }
                return
            case .busy(let value):
                // A busy device did not execute the command (unless an earlier send of this attempt did).
                if sends == 1 { irreversibleSent = false }
                throw DeviceFailure(.busy, "device answered busy (\(value.hexString))")
            case .failed(let value):
                if sends == 1 { irreversibleSent = false }
                throw DeviceFailure(.verifyFailed, "device answered \(value.hexString), which `fails_on` rejects")
            case .timedOut(let lastSeen):
                // The answer may be lost while the command took effect: ask the device.
                if a.confirm != nil, a.trigger != nil, try await confirmed(a, step: step, timeout: timeout) { return }
                if i == waits - 1 {
                    let seen = lastSeen.map { "; last value seen: \($0.hexString)" } ?? "; nothing arrived"
                    throw DeviceFailure(.timeout, "no value on `\(a.subscription)` that \(matcher) within \(timeout)"
                                        + (waits > 1 ? " (sent \(waits) times)" : "") + seen
                                        + (a.confirm != nil ? "; `confirm` shows it did not take effect" : ""))
                }
            }
        }
    }

    /// Reads the `confirm` characteristic: true when the trigger took effect. False clears the doubt
    /// about an irreversible write (the device shows it did not happen).
    private func confirmed(_ a: Step.Await, step: Step, timeout: Duration) async throws -> Bool {
        guard let c = a.confirm else { return false }
        let s = try requireSession(step)
        let expected = try c.matcher.resolve(variables: lookup, baseDirectory: context.inventory.baseDirectory)
        let value = try await s.read(service: c.target.service, characteristic: c.target.characteristic, timeout: timeout)
        let done = expected.matches(value)
        if !done { irreversibleSent = false }
        return done
    }

    /// True when there is no session, or its reconnect policy gave up.
    private func sessionIsLost() async -> Bool {
        guard let s = session else { return false }
        switch await s.state {
        case .failed, .disconnected: return true
        default: return false
        }
    }

    private func requireSession(_ step: Step) throws -> Session {
        guard let s = session else {
            throw DeviceFailure(.invalidInput, "step `\(step.name)` needs a connection (add a connect step before it)")
        }
        return s
    }

    /// Before retrying a step: after repeated link failures on one adapter, prefer another that hears it.
    private func prepareRetry(after f: DeviceFailure, step: Step) async {
        guard case .connect = step.kind, f.kind == .connectFailed || f.kind == .timeout,
              context.adapters.adapters.count > 1, let a = adapter, let ad = advertisement else { return }
        avoidAdapters.insert(a.id)
        let wanted = ScanHub.Wanted(address: ad.address, name: nil, filter: ScanFilter())
        if let (better, other) = await context.adapters.find(wanted, timeout: .milliseconds(1), avoid: avoidAdapters),
           !avoidAdapters.contains(other.id) {
            advertisement = better
            adapter = other
        }
    }

    // MARK: - Values

    /// A template reference's text: a captured value or declared variable as it is shown
    /// (`TypedValue.description`: numbers in decimal, bytes in hex), else the device's variable.
    private func lookup(_ name: String) -> String? {
        typed(name)?.description
    }

    /// A name's typed value: a capture, a declared variable, else the inventory's text.
    private func typed(_ name: String) -> TypedValue? {
        if let v = captured[name] ?? declared[name] { return v }
        return device.value(of: name).map { .text($0) }
    }

    /// Keeps a captured value; a value derived from a secret is a secret too, in every message.
    private func capture(_ id: String, _ value: TypedValue) {
        captured[id] = value
        if context.secretNames.contains(id) { redactor.addSecret(value.description) }
    }

    /// The captured values as the report keeps them: the JSON of each type, and `***` for a value
    /// that is secret or shows a secret.
    private func capturedForReport() -> [String: JSONScalar] {
        var out: [String: JSONScalar] = [:]
        for (k, v) in captured {
            let shown = v.description
            let hidden = context.secretNames.contains(k) || (!redactor.isEmpty && redactor.redact(shown) != shown)
            out[k] = hidden ? .string(Redactor.mask) : v.jsonScalar
        }
        return out
    }

    // MARK: - when, verify, set

    /// Nil when the step's condition holds; else why it is skipped (or why it cannot be evaluated).
    private func skipReason(_ condition: Step.Condition) -> Result<String, DeviceFailure>? {
        let expression = condition.expression
        let result: Bool?
        do {
            result = try expression.evaluate { typed($0) }
        } catch {
            return .failure(DeviceFailure(.invalidInput, "`when: \(expression.source)`: column \(error.column): \(error.message)"))
        }
        if result == true { return nil }
        let names = expression.names.sorted()
        let missing = names.filter { typed($0) == nil }
        var reason = "`when: \(expression.source)` is \(result == false ? "false" : "unknown")"
        if result == nil, !missing.isEmpty {
            reason += ": " + missing.map { "`\($0)` has no value" }.joined(separator: ", ")
        } else {
            let shown = names.filter { !context.secretNames.contains($0) }.compactMap { n in typed(n).map { "\(n) \($0.quotedForMessage)" } }
            if !shown.isEmpty { reason += " (" + shown.joined(separator: ", ") + ")" }
        }
        return .success(redactor.redact(reason))
    }

    /// Checks a verify's value against its limits for this device and records the measurement, passed
    /// or failed; a failed one fails the step (`verify_failed`) with the measurement's message.
    private func verify(_ v: Step.Verify, index: Int) throws {
        let value: TypedValue?
        if let name = v.value.loneReference {
            value = typed(name)
        } else {
            value = (try? v.value.render(lookup)).map { .text($0) }
        }
        var result: MeasurementResult
        do {
            let limits = try v.limits.resolve(valueType: v.valueType, typed: typed, text: lookup)
            result = limits.check(value, name: v.measurementName, unit: v.unit)
        } catch {
            result = MeasurementResult(name: v.measurementName, value: value, limits: MeasurementLimits(), unit: v.unit, outcome: .fail,
                                       message: "\(v.measurementName): the limits cannot be made for this device: \(error.message)")
        }
        let secret = v.value.referencedNames.contains(where: context.secretNames.contains)
            || v.limits.templates.contains { $0.referencedNames.contains(where: context.secretNames.contains) }
        var record = MeasurementRecord(step: index, result: result)
        if secret || revealsSecret(result) {
            record.redacted = true
            record.result.value = nil
            record.result.limits = hidingSecrets(result.limits, all: secret)
            // Every rendering of a secret is known to the redactor but one too short to match safely.
            let short = secret && (value?.description.count ?? 0) < 2
            record.result.message = short ? "\(v.measurementName) *** \(result.outcome == .pass ? "passes" : "fails")" : redactor.redact(result.message)
        }
        measurements.removeAll { $0.step == index }
        measurements.append(record)
        if !result.passed { throw DeviceFailure(.verifyFailed, record.result.message) }
    }

    private func revealsSecret(_ r: MeasurementResult) -> Bool {
        guard !redactor.isEmpty else { return false }
        let texts = [r.message, r.value?.description ?? "", r.limits.description(unit: r.unit)]
        return texts.contains { redactor.redact($0) != $0 }
    }

    /// The limits without those that show a secret (all of them when the value is secret).
    private func hidingSecrets(_ l: MeasurementLimits, all: Bool) -> MeasurementLimits {
        guard !all else { return MeasurementLimits() }
        func keep(_ v: TypedValue?) -> TypedValue? { v.flatMap { redactor.redact($0.description) == $0.description ? $0 : nil } }
        var out = l
        out.min = keep(l.min)
        out.max = keep(l.max)
        out.equals = keep(l.equals)
        out.oneOf = l.oneOf.map { $0.compactMap(keep) }
        return out
    }

    /// `set:`: derives the value from typed inputs (`Step.Derive.value` says how).
    private func derive(_ d: Step.Derive) throws {
        do {
            capture(d.id, try d.value(typed: typed, text: lookup, baseDirectory: context.inventory.baseDirectory))
        } catch {
            throw DeviceFailure(.invalidInput, "`set \(d.id)`: \(error.message)")
        }
    }

    private func redacted(_ f: DeviceFailure) -> DeviceFailure {
        guard !redactor.isEmpty else { return f }
        return DeviceFailure(f.kind, redactor.redact(f.message), causes: f.causes.map { redactor.redact($0) })
    }

    /// The bytes of a value made from a secret are secret too, in whatever form a message shows them.
    private func learnSecretBytes(_ data: [UInt8], from value: ValueSpec) {
        guard !redactor.isEmpty,
              value.templates.contains(where: { $0.referencedNames.contains(where: context.secretNames.contains) }) else { return }
        redactor.add(bytes: data)
    }

    // MARK: - Clean-up

    private func closeSession() async {
        for (_, m) in mailboxes { await m.close() }
        mailboxes = [:]
        if let link = heldLink {
            heldLink = nil
            await link.disconnect()
        }
        if let s = session {
            roundTripsBefore += await s.roundTrips
            if let outcome = await s.security { security = security.map { $0.followed(by: outcome) } ?? outcome }
            await recordLink(s)
            await s.disconnect()
        }
        session = nil
        releaseSlot()
    }

    /// Keeps what the session's link got from the radio, for the report.
    private func recordLink(_ s: Session) async {
        guard let p = await s.linkParameters else { return }
        let mtu = await s.mtu
        linkRecord = LinkRecord(phy: p.txPHY.rawValue, rxPhy: p.rxPHY == p.txPHY ? nil : p.rxPHY.rawValue, dataLength: p.txOctets,
                                intervalMs: p.interval.milliseconds.rounded(toPlaces: 3), latency: p.latency,
                                supervisionTimeoutMs: p.supervisionTimeout.milliseconds.rounded(toPlaces: 3), mtu: mtu)
    }

    /// The report's view of the device's security: what its links reached, how, and with which bond;
    /// nil when the workflow never asks for security and nothing was secured.
    private func securityRecord() -> SecurityRecord? {
        let asked = context.workflow.steps.contains { $0.security.map { $0.level != .none } ?? false }
        guard asked || security != nil else { return nil }
        let o = security ?? .none
        return SecurityRecord(level: o.security.level.name, method: o.method?.rawValue, bond: o.bond.rawValue,
                              keySize: o.security.level == .none ? nil : o.security.keySize,
                              secureConnections: o.security.level == .none ? nil : o.security.secureConnections,
                              bondLost: o.bondWasLost ? true : nil)
    }

    private func releaseSlot() {
        if holdsSlot, let a = adapter { a.slots.release() }
        holdsSlot = false
    }

    private func finish() async -> Int {
        await closeSession()
        return roundTripsBefore
    }
}

/// Values of one subscription, buffered from the moment of subscribing, consumed by `await` steps.
final class Mailbox: Sendable {
    enum Result {
        case matched([UInt8])
        case busy([UInt8])
        case failed([UInt8])
        case timedOut(lastSeen: [UInt8]?)
    }

    private struct State {
        var buffer: [[UInt8]] = []
        var waiter: CheckedContinuation<Void, Never>?
        var error: (any Error)?
        var ended = false
    }

    /// The buffer lives in its own object so the pump and timer tasks can share it.
    private final class Box: Sendable {
        let m = Mutex(State())
    }

    private let state = Box()
    private let stream: NotificationStream
    private let pump: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(stream: NotificationStream) {
        self.stream = stream
        let task = Task { [state] in
            do {
                for try await value in stream {
                    let w: CheckedContinuation<Void, Never>? = state.m.withLock { s in
                        s.buffer.append(value)
                        defer { s.waiter = nil }
                        return s.waiter
                    }
                    w?.resume()
                }
                let w = state.m.withLock { s in
                    s.ended = true
                    defer { s.waiter = nil }
                    return s.waiter
                }
                w?.resume()
            } catch {
                let w = state.m.withLock { s in
                    s.error = error
                    s.ended = true
                    defer { s.waiter = nil }
                    return s.waiter
                }
                w?.resume()
            }
        }
        pump.withLock { $0 = task }
    }

    func discardBuffered() { state.m.withLock { $0.buffer.removeAll() } }

    /// Consumes values in order until one matches (or is a busy answer), or the timeout passes.
    func next(matching matcher: Matcher, busy: Matcher?, failsOn: Matcher?, timeout: Duration) async throws -> Result {
        let deadline = ContinuousClock.now + timeout
        var last: [UInt8]?
        let timer = Timeouts.shared.schedule(after: timeout) { [state] in
            let w = state.m.withLock { s in
                defer { s.waiter = nil }
                return s.waiter
            }
            w?.resume()
        }
        defer { Timeouts.shared.cancel(timer) }
        while true {
            try Task.checkCancellation()
            enum Next { case value([UInt8]), error(any Error), ended, wait }
            let next: Next = state.m.withLock { s in
                if !s.buffer.isEmpty { return .value(s.buffer.removeFirst()) }
                if let e = s.error { return .error(e) }
                if s.ended { return .ended }
                return .wait
            }
            switch next {
            case .value(let v):
                last = v
                if matcher.matches(v) { return .matched(v) }
                if let busy, busy.matches(v) { return .busy(v) }
                if let failsOn, failsOn.matches(v) { return .failed(v) }
                continue
            case .error(let e):
                throw e
            case .ended:
                throw BLEError.disconnected(.localHostTerminated)
            case .wait:
                if ContinuousClock.now >= deadline { return .timedOut(lastSeen: last) }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.m.withLock { s -> Bool in
                            if !s.buffer.isEmpty || s.ended || Task.isCancelled || ContinuousClock.now >= deadline { return true }
                            s.waiter = c
                            return false
                        }
                        if resumeNow { c.resume() }
                    }
                } onCancel: { [state] in
                    let w = state.m.withLock { s in
                        defer { s.waiter = nil }
                        return s.waiter
                    }
                    w?.resume()
                }
            }
        }
    }

    func close() async {
        pump.withLock { $0?.cancel() }
        await stream.cancel()
    }
}
