import AsyncSupport
import BLE
import Workflow

/// Runs one device: carries out what its `DeviceMachine` decides — runs each step through the
/// executor of its family, waits out backoffs, looks for the device elsewhere, closes its link, gives
/// slots back — and tells the machine what happened. It decides nothing itself. One per device, owned
/// by the device's task (never shared with another task).
final class DeviceAgent {
    let device: InventoryDevice
    let run: RunContext
    private(set) var machine: DeviceMachine
    let link = DeviceLink()
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    /// Actions the machine answered that are still to be carried out, in order.
    private var pending: [DeviceMachine.Action] = []
    /// What step families keep for this device across steps (`StepContext.deviceState`).
    private var states: [ObjectIdentifier: AnyObject] = [:]
    private var cutNoted = false

    init(device: InventoryDevice, context: RunContext, attemptNumber: Int, resumed: Bool, reconcile: Int?) {
        self.device = device
        self.run = context
        machine = DeviceMachine(plan: context.plan, device: device, redactor: context.inventory.redactor(for: device),
                                attemptNumber: attemptNumber, resumed: resumed, reconcile: reconcile)
        start = clock.now
    }

    private var elapsed: Duration { clock.now - start }

    /// Runs the workflow as the machine decides; always returns a record (never throws).
    func run() async -> DeviceRecord {
        pending = machine.handle(.begin(at: .zero, wall: .now()))
        var next = 0
        while next < pending.count {
            let action = pending[next]
            next += 1
            if next > 64 {
                pending.removeFirst(next)
                next = 0
            }
            switch action {
            case .run(let index, let attempt, let confirmFirst):
                let end = await runStep(index, attempt: attempt, confirmFirst: confirmFirst)
                feed(.stepEnded(end, at: elapsed))
            case .confirm(let index, let attempt):
                let end = await runStep(index, attempt: attempt, confirmFirst: true, confirmOnly: true)
                feed(.stepEnded(end, at: elapsed))
            case .wait(let delay):
                do {
                    try await Task.sleep(for: delay)
                    feed(.timerFired(sessionLost: await link.isLost, at: elapsed))
                } catch {
                    feed(.stop(at: elapsed))
                }
            case .lookElsewhere(let address, let avoid):
                let wanted = ScanHub.Wanted(address: address, name: nil, filter: ScanFilter())
                if let (ad, adapter) = await run.adapters.find(wanted, timeout: .milliseconds(1), avoid: avoid) {
                    feed(.link(.heardElsewhere(LinkLease.Heard(ad), on: adapter.id)))
                }
            case .closeLink:
                await closeLink()
            case .finish(let record):
                return record
            case .emit, .releaseSlot, .followSlots, .markAdapterFailed:
                perform(action)
            }
        }
        // The machine always ends with `finish`; a record for the impossible case all the same.
        return DeviceRecord(id: device.id, address: device.address?.description, name: device.name, outcome: .interrupted)
    }

    /// Tells the machine what happened; what it answers is carried out next (immediate actions at once).
    func note(_ event: DeviceMachine.Event) {
        for action in machine.handle(event) {
            switch action {
            case .emit, .releaseSlot, .followSlots, .markAdapterFailed: perform(action)
            default: pending.append(action)
            }
        }
    }

    private func feed(_ event: DeviceMachine.Event) {
        pending += machine.handle(event)
    }

    /// Carries out an action that does not wait.
    private func perform(_ action: DeviceMachine.Action) {
        switch action {
        case .emit(let kind):
            run.events.emit(kind)
        case .releaseSlot(let id):
            run.adapters.adapter(id)?.slots.release()
        case .followSlots(let id):
            run.adapters.adapter(id)?.followSlots()
        case .markAdapterFailed(let id, let why):
            run.adapters.adapter(id)?.markFailed(why)
        default:
            break
        }
    }

    /// One attempt of a step, through the executor of its family.
    private func runStep(_ index: Int, attempt: Int, confirmFirst: Bool, confirmOnly: Bool = false) async -> DeviceMachine.StepEnd {
        let step = run.workflow.steps[index]
        let context = StepContext(step: step, index: index, attempt: attempt, confirmFirst: confirmFirst, confirmOnly: confirmOnly, agent: self)
        do {
            try Task.checkCancellation()
            let output = try await run.executors[index].run(step, in: context)
            return .succeeded(captures: output.captures.map { DeviceMachine.Capture(name: $0.name, value: $0.value) })
        } catch {
            let f = DeviceFailure.from(error)
            return Task.isCancelled ? .cut(cause: f.description) : .failed(f)
        }
    }

    /// A device cut on its own (a lost lease on a line) says why in its record.
    private func noteCutReason() {
        guard !cutNoted, let why = run.cutReason(device.id) else { return }
        cutNoted = true
        note(.claimLost(reason: why))
    }

    /// Closes the device's link and tells the machine (which gives the slot back).
    func closeLink() async {
        noteCutReason()
        let (security, trips, record) = await link.close()
        note(.linkClosed(security: security, roundTrips: trips, link: record, at: elapsed))
    }

    func state<T: AnyObject>(_ type: T.Type, make: () -> T) -> T {
        let key = ObjectIdentifier(type)
        if let s = states[key] as? T { return s }
        let s = make()
        states[key] = s
        return s
    }
}
