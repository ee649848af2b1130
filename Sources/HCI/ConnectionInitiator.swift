import BLE

/// Connection creation (Core v5.4 Vol 4 Part E 7.8.12/7.8.13, Vol 6 Part B 4.3.5) as a value state
/// machine: which LE Create Connection to have pending on the controller, when to cancel it, and whom
/// each LE Connection Complete belongs to.
///
/// Callers' requests (a peer address each) are pending until their link is up, they give up, or the
/// controller refuses them. One initiation at a time is pending on the controller:
/// - one pending request, or no usable Filter Accept List: LE Create Connection to that address
///   (initiator filter policy 0);
/// - several: they go into the Filter Accept List and one LE Create Connection with filter policy 1
///   connects whichever advertises first, so an absent device blocks nobody. The list cannot change
///   while such an initiation is pending (7.8.16), so a change of the wanted set means cancel, update
///   the list, initiate again. More requests than list entries take turns (`rotation`), as do all of
///   them while the controller has not shown that it honours the list (a controller that ignores it
///   connects only the address in Peer_Address, which the host sets to the head of the line).
///
/// The cancel race (7.8.13): after LE Create Connection Cancel, a connection may still complete before
/// the cancel's Command Complete (which then says Command Disallowed); it goes to its request if that
/// request still wants it, otherwise it is an orphan the host disconnects. A Connection Complete that
/// arrives when nothing is pending is an orphan too, always. The controller is held only until a
/// Connection Complete; what follows on the link (MTU, discovery) does not involve this machine.
public struct ConnectionInitiator: Sendable {
    public typealias RequestID = UInt64

    /// The LE Create Connection parameters the host asks for (units as on the wire).
    public struct Parameters: Sendable, Equatable {
        /// Scan interval and window while initiating, 0.625 ms units.
        public var scanInterval: UInt16 = 0x0060
        public var scanWindow: UInt16 = 0x0060
        /// Connection interval bounds, 1.25 ms units.
        public var intervalMin: UInt16 = 0x000C
        public var intervalMax: UInt16 = 0x0018
        public var latency: UInt16 = 0
        /// 10 ms units.
        public var supervisionTimeout: UInt16 = 0x01F4
        public var ownAddressType: UInt8 = 1

        public init() {}
    }

    public struct Configuration: Sendable, Equatable {
        /// Links the controller may hold at once.
        public var slots: Int
        /// Filter Accept List entries (0: connect by address, one request at a time).
        public var acceptListSize: Int
        /// The controller is known to honour the list (no turn-taking among the list's members).
        public var acceptListTrusted: Bool
        /// How long one initiation may stay pending before the line moves on when not everyone
        /// pending is in it; on a radio that cannot scan while initiating, how long initiating keeps
        /// the radio while scans wait (scanning then gets a quarter of it).
        public var rotation: Duration
        /// How long to wait for the Connection Complete that follows a successful cancel.
        public var cancelTimeout: Duration
        public var parameters: Parameters

        public init(slots: Int = 8, acceptListSize: Int = 0, acceptListTrusted: Bool = false, rotation: Duration = .seconds(2),
                    cancelTimeout: Duration = .seconds(3), parameters: Parameters = Parameters()) {
            self.slots = slots
            self.acceptListSize = acceptListSize
            self.acceptListTrusted = acceptListTrusted
            self.rotation = rotation
            self.cancelTimeout = cancelTimeout
            self.parameters = parameters
        }
    }

    /// A command this machine wants sent; its result comes back as `.commandFinished`.
    public enum Command: Sendable, Equatable {
        case create(LECreateConnectionCommand)
        case cancel
        case add(BluetoothAddress)
        case remove(BluetoothAddress)

        public var packet: HCICommandPacket {
            switch self {
            case .create(let c): return HCICommandPacket(command: c)
            case .cancel: return HCICommandPacket(command: LECreateConnectionCancelCommand())
            case .add(let a): return HCICommandPacket(command: LEAddDeviceToFilterAcceptListCommand(address: a))
            case .remove(let a): return HCICommandPacket(command: LERemoveDeviceFromFilterAcceptListCommand(address: a))
            }
        }
    }

    /// What became of a command.
    public enum CommandResult: Sendable, Equatable {
        case success
        case failed(HCIStatus)
        case timedOut
    }

    /// Deadlines this machine arms; each carries a generation so a stale one is ignored.
    public enum Timer: Sendable, Hashable {
        /// The current initiation has had its turn.
        case rotation(UInt64)
        /// No Connection Complete followed a successful cancel.
        case cancelGuard(UInt64)
        /// Scanning has had its slice of a radio that cannot scan while initiating.
        case scanSlice(UInt64)
        /// Initiating has had its turn of a radio that cannot scan while initiating.
        case turn(UInt64)
    }

    /// Why a request failed.
    public enum Failure: Sendable, Equatable {
        /// The controller answered with this status (LE Create Connection or Connection Complete).
        case controller(HCIStatus)
        /// Every usable connection slot is taken (links up plus requests pending).
        case noSlot(Int)
        /// Connection Limit Exceeded: the controller holds fewer links than configured.
        case limitExceeded(Int)
    }

    public enum Event: Sendable, Equatable {
        /// A caller wants a link to `peer`. `inferredType` means the address type is a guess (the
        /// address was never heard), so turns alternate it. `parameters`: the link's own connection
        /// parameters (its workflow's), used when it heads an initiation; nil: the configuration's.
        case request(RequestID, peer: BluetoothAddress, inferredType: Bool, parameters: Parameters? = nil)
        /// Several callers at once, planned together (connects that waited while the controller was
        /// brought up again: several go into the Filter Accept List before the first initiation).
        case requests([Waiting])
        /// The caller gave up (deadline or cancellation).
        case withdraw(RequestID)
        /// An advertisement from `address` was heard (its type is now known).
        case heard(BluetoothAddress)
        /// The scanner no longer stands in the way of initiating.
        case radioGranted
        case commandFinished(Command, CommandResult)
        /// LE (Enhanced) Connection Complete in the central role.
        case connectionComplete(LEConnectionCompleteEvent)
        /// Links up now.
        case links(Int)
        case deadline(Timer)
        /// Scan consumers want advertisements (true) or no longer do, on a radio that cannot scan while
        /// it initiates: initiating and scanning then take turns.
        case scanWaiting(Bool)
    }

    public enum Action: Sendable, Equatable {
        case send(Command)
        /// Ask the scanner to make way for initiating (answered by `.radioGranted`).
        case requestRadio
        /// Initiating is over for now; scanning may resume.
        case releaseRadio
        /// The link for this request is up.
        case connected(RequestID, LEConnectionCompleteEvent)
        case failed(RequestID, Failure)
        /// A link nobody wants (a late completion, or one that won the race with its cancel): drop it.
        case orphan(LEConnectionCompleteEvent)
        case arm(Timer, Duration)
        case disarm(Timer)
        /// The usable slot count changed (Connection Limit Exceeded).
        case slots(Int)
        case note(String)
    }

    /// A caller's request, as `.requests` takes several.
    public struct Waiting: Sendable, Equatable {
        public var id: RequestID
        public var peer: BluetoothAddress
        public var inferredType: Bool
        public var parameters: Parameters?

        public init(id: RequestID, peer: BluetoothAddress, inferredType: Bool, parameters: Parameters? = nil) {
            self.id = id
            self.peer = peer
            self.inferredType = inferredType
            self.parameters = parameters
        }
    }

    public struct Counters: Sendable, Equatable {
        public var initiations = 0
        public var cancels = 0
        public var orphans = 0
        public var rotations = 0
        public var lateCompletions = 0
    }

    private struct Request: Sendable {
        var id: RequestID
        var peer: BluetoothAddress
        var inferredType: Bool
        var parameters: Parameters?
    }

    private struct Initiation: Sendable, Equatable {
        var policy: UInt8
        var head: BluetoothAddress
        var members: [BluetoothAddress]
    }

    private enum Phase: Sendable, Equatable {
        case idle
        case awaitingRadio
        case updatingList(Command)
        case creating(Initiation)
        case initiating(Initiation)
        case cancelling(Initiation, acknowledged: Bool, completed: Bool)
    }

    public private(set) var configuration: Configuration
    public private(set) var counters = Counters()
    public private(set) var list: FilterAcceptList
    /// The list is used (a controller refusal or a failed list command turns it off).
    public private(set) var acceptListEnabled: Bool
    /// The controller connected a list member other than the head: it honours the list.
    public private(set) var acceptListVerified: Bool
    /// Links up now.
    public private(set) var links = 0
    private var pending: [Request] = []
    private var phase: Phase = .idle
    private var holdsRadio = false
    private var rotateNext = false
    /// Scan consumers want the radio, which cannot scan while initiating.
    private var scanWaiting = false
    /// Scanning has the radio for its slice; initiating waits.
    private var yielding = false
    /// Initiating's turn is over: give the radio to scanning at the next chance.
    private var yieldNext = false
    /// Scanning had its slice since initiating last held the radio.
    private var sliceDone = false
    private var generation: UInt64 = 0
    private var rotationArmed: Timer?
    private var guardArmed: Timer?
    private var sliceArmed: Timer?
    private var turnArmed: Timer?

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        self.configuration.slots = max(1, configuration.slots)
        list = FilterAcceptList(capacity: configuration.acceptListSize)
        acceptListEnabled = configuration.acceptListSize >= 2
        acceptListVerified = configuration.acceptListTrusted
    }

    /// Requests waiting for a link.
    public var pendingCount: Int { pending.count }

    /// How long scanning gets the radio when the controller cannot scan while initiating and both
    /// want it (a quarter of a turn, at least 50 ms): before initiating takes the radio from a scan
    /// with consumers waiting, and after each of initiating's turns (`rotation`) while they wait.
    /// Connections made during a turn do not end it: a device heard in a slice advertises next about
    /// one advertising interval later, so it is connected in the turn that follows.
    public var scanSlice: Duration { max(.milliseconds(50), configuration.rotation / 4) }
    /// Whether an LE Create Connection is (or may be) pending on the controller.
    public var isInitiating: Bool {
        switch phase {
        case .creating, .initiating, .cancelling: return true
        default: return false
        }
    }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .request(let id, let peer, let inferred, let parameters):
            guard links + pending.count < configuration.slots else {
                return [.failed(id, .noSlot(configuration.slots))]
            }
            pending.append(Request(id: id, peer: peer, inferredType: inferred, parameters: parameters))
            return reconcile()
        case .requests(let all):
            var actions: [Action] = []
            for w in all {
                guard links + pending.count < configuration.slots else {
                    actions.append(.failed(w.id, .noSlot(configuration.slots)))
                    continue
                }
                pending.append(Request(id: w.id, peer: w.peer, inferredType: w.inferredType, parameters: w.parameters))
            }
            return actions + reconcile()
        case .withdraw(let id):
            guard let i = pending.firstIndex(where: { $0.id == id }) else { return [] }
            pending.remove(at: i)
            return reconcile()
        case .heard(let address):
            var changed = false
            for i in pending.indices where pending[i].peer.sameDevice(as: address) {
                if pending[i].peer.kind != address.kind { changed = true }
                pending[i].peer.kind = address.kind
                pending[i].inferredType = false
            }
            return changed ? reconcile() : []
        case .radioGranted:
            guard phase == .awaitingRadio else { return [] }
            holdsRadio = true
            sliceDone = false
            phase = .idle
            return (scanWaiting ? armTurn() : []) + reconcile()
        case .commandFinished(let command, let result):
            return finished(command, result)
        case .connectionComplete(let e):
            return complete(e)
        case .links(let n):
            links = max(0, n)
            return reconcile()
        case .deadline(let timer):
            return deadline(timer)
        case .scanWaiting(let waiting):
            guard waiting != scanWaiting else { return [] }
            scanWaiting = waiting
            if waiting {
                return holdsRadio ? armTurn() : []
            }
            // Nobody waits for advertisements any more: initiating keeps (or takes) the radio.
            var actions = disarm(&turnArmed)
            yieldNext = false
            sliceDone = false
            if yielding {
                yielding = false
                actions += disarm(&sliceArmed) + reconcile()
            }
            return actions
        }
    }

    // MARK: - Planning

    /// What should be pending on the controller for the requests as they are now.
    private func plan() -> Initiation? {
        guard let first = pending.first else { return nil }
        guard acceptListEnabled, pending.count > 1 else {
            return Initiation(policy: 0, head: first.peer, members: [first.peer])
        }
        var members: [BluetoothAddress] = []
        for r in pending where !members.contains(r.peer) && members.count < list.capacity { members.append(r.peer) }
        guard members.count > 1 else { return Initiation(policy: 0, head: first.peer, members: [first.peer]) }
        return Initiation(policy: 1, head: first.peer, members: members)
    }

    /// Moves the machine toward what `plan()` wants, one command at a time.
    private mutating func reconcile() -> [Action] {
        switch phase {
        case .awaitingRadio, .updatingList, .creating, .cancelling:
            return []
        case .initiating(let current):
            if rotateNext || yieldNext || plan().map({ $0.policy != current.policy || Set($0.members) != Set(current.members) }) ?? true {
                return cancel(current)
            }
            // Still right; someone who arrived since may need the turn to come round.
            return rotationArmed == nil ? armRotation() : []
        case .idle:
            break
        }
        if rotateNext {
            rotateNext = false
            rotate()
        }
        if yieldNext {
            // Initiating's turn is over while scans wait (a radio that cannot do both): their slice.
            yieldNext = false
            if scanWaiting && holdsRadio && !pending.isEmpty && !yielding {
                return startSlice() + releaseRadio()
            }
        }
        guard let next = plan(), links < configuration.slots, !yielding else {
            return releaseRadio()
        }
        guard holdsRadio else {
            if scanWaiting && !sliceDone {
                // The scan has the radio and consumers wait: it keeps it for a slice, so that the
                // devices heard meanwhile are connected together in the turn that follows.
                return startSlice()
            }
            phase = .awaitingRadio
            return [.requestRadio]
        }
        if next.policy == 1, let change = list.nextChange(toward: next.members) {
            let command: Command
            switch change {
            case .add(let a): command = .add(a)
            case .remove(let a): command = .remove(a)
            }
            phase = .updatingList(command)
            return [.send(command)]
        }
        // The head's own connection parameters (the others get theirs after connecting, when they differ).
        let p = pending.first?.parameters ?? configuration.parameters
        let create = LECreateConnectionCommand(
            peer: next.head, filterPolicy: next.policy, ownAddressType: p.ownAddressType, scanInterval: p.scanInterval,
            scanWindow: p.scanWindow, intervalMin: p.intervalMin, intervalMax: p.intervalMax, maxLatency: p.latency,
            supervisionTimeout: p.supervisionTimeout)
        phase = .creating(next)
        counters.initiations += 1
        return [.send(.create(create))]
    }

    /// Moves the requests that just had a turn to the back of the line, and tries the other address
    /// type for those whose type is a guess.
    private mutating func rotate() {
        counters.rotations += 1
        guard !pending.isEmpty else { return }
        let reach = acceptListEnabled && pending.count > 1 ? max(1, min(list.capacity, pending.count)) : 1
        let moved = pending.count > reach ? reach : (acceptListVerified ? 0 : 1)
        for i in 0..<min(reach, pending.count) where pending[i].inferredType {
            pending[i].peer.kind = pending[i].peer.kind == .public ? .random : .public
        }
        if moved > 0 && moved < pending.count {
            let front = pending.prefix(moved)
            pending.removeFirst(moved)
            pending.append(contentsOf: front)
        }
    }

    private mutating func startSlice() -> [Action] {
        yielding = true
        generation += 1
        let slice = Timer.scanSlice(generation)
        sliceArmed = slice
        return [.arm(slice, scanSlice)]
    }

    private mutating func armTurn() -> [Action] {
        guard turnArmed == nil else { return [] }
        generation += 1
        let turn = Timer.turn(generation)
        turnArmed = turn
        return [.arm(turn, configuration.rotation)]
    }

    /// Gives the radio back to scanning (if held) and ends the turn.
    private mutating func releaseRadio() -> [Action] {
        guard holdsRadio else { return [] }
        holdsRadio = false
        return disarm(&turnArmed) + [.releaseRadio]
    }

    private func disarm(_ timer: inout Timer?) -> [Action] {
        guard let t = timer else { return [] }
        timer = nil
        return [.disarm(t)]
    }

    private mutating func cancel(_ current: Initiation) -> [Action] {
        phase = .cancelling(current, acknowledged: false, completed: false)
        counters.cancels += 1
        return disarmRotation() + [.send(.cancel)]
    }

    private mutating func armRotation() -> [Action] {
        guard case .initiating(let current) = phase else { return [] }
        let outside = pending.count > current.members.count
        let unproven = current.policy == 1 && !acceptListVerified
        let guessed = pending.contains { $0.inferredType && current.members.contains($0.peer) }
        guard outside || unproven || guessed else { return [] }
        generation += 1
        let timer = Timer.rotation(generation)
        rotationArmed = timer
        return [.arm(timer, configuration.rotation)]
    }

    private mutating func disarmRotation() -> [Action] {
        guard let t = rotationArmed else { return [] }
        rotationArmed = nil
        return [.disarm(t)]
    }

    // MARK: - Results

    private mutating func finished(_ command: Command, _ result: CommandResult) -> [Action] {
        switch (command, phase) {
        case (.create, .creating(let current)):
            switch result {
            case .success:
                phase = .initiating(current)
                return armRotation() + reconcile()
            case .timedOut:
                // The controller may be initiating after all: cancel to be sure.
                return [.note("LE Create Connection got no Command Status; cancelling to be sure nothing is pending")]
                    + cancel(current)
            case .failed(let status):
                phase = .idle
                if current.policy == 1, status == .unsupportedFeature || status == .invalidParameters || status == .unknownCommand {
                    acceptListEnabled = false
                    return [.note("the controller refused LE Create Connection with the Filter Accept List (\(status)); connecting by address, one device at a time")]
                        + reconcile()
                }
                return refused(status, peer: nil, current: current) + reconcile()
            }
        case (.cancel, .cancelling(let current, _, let completed)):
            switch result {
            case .success where !completed:
                phase = .cancelling(current, acknowledged: true, completed: false)
                generation += 1
                let timer = Timer.cancelGuard(generation)
                guardArmed = timer
                return [.arm(timer, configuration.cancelTimeout)]
            case .success, .failed(.commandDisallowed):
                // Disallowed: nothing was pending any more (a completion, if any, came first).
                phase = .idle
                return reconcile()
            case .failed(let status):
                phase = .idle
                return [.note("LE Create Connection Cancel failed (\(status)); assuming nothing is pending")] + reconcile()
            case .timedOut:
                phase = .idle
                return [.note("LE Create Connection Cancel got no answer; assuming nothing is pending")] + reconcile()
            }
        case (.add(let a), .updatingList(.add(let b))) where a == b:
            phase = .idle
            switch result {
            case .success:
                list.applied(.add(a))
                return reconcile()
            case .failed(.memoryCapacityExceeded):
                list.full()
                if list.capacity < 2 { acceptListEnabled = false }
                return [.note("the Filter Accept List is full at \(list.entries.count) entr\(list.entries.count == 1 ? "y" : "ies"); using that many")]
                    + reconcile()
            case .failed(let status):
                acceptListEnabled = false
                return [.note("LE Add Device To Filter Accept List failed (\(status)); connecting by address, one device at a time")]
                    + reconcile()
            case .timedOut:
                acceptListEnabled = false
                return [.note("LE Add Device To Filter Accept List got no answer; connecting by address, one device at a time")]
                    + reconcile()
            }
        case (.remove(let a), .updatingList(.remove(let b))) where a == b:
            phase = .idle
            switch result {
            case .success, .failed(.invalidParameters), .failed(.unknownConnectionIdentifier):
                // Gone either way.
                list.applied(.remove(a))
                return reconcile()
            case .failed(let status):
                acceptListEnabled = false
                return [.note("LE Remove Device From Filter Accept List failed (\(status)); connecting by address, one device at a time")]
                    + reconcile()
            case .timedOut:
                acceptListEnabled = false
                return [.note("LE Remove Device From Filter Accept List got no answer; connecting by address, one device at a time")]
                    + reconcile()
            }
        default:
            return [.note("result of \(command.packet.opcode.name) in an unexpected state; ignored")]
        }
    }

    private mutating func complete(_ e: LEConnectionCompleteEvent) -> [Action] {
        switch phase {
        case .creating(let current), .initiating(let current):
            phase = .idle
            return disarmRotation() + outcome(e, current) + reconcile()
        case .cancelling(let current, let acknowledged, _):
            var actions = outcome(e, current)
            if acknowledged {
                phase = .idle
                if let g = guardArmed {
                    guardArmed = nil
                    actions.append(.disarm(g))
                }
                actions += reconcile()
            } else {
                phase = .cancelling(current, acknowledged: false, completed: true)
            }
            return actions
        case .idle, .awaitingRadio, .updatingList:
            counters.lateCompletions += 1
            guard e.status == .success else {
                return [.note("Connection Complete (\(e.status)) with nothing pending; ignored")]
            }
            counters.orphans += 1
            return [.orphan(e), .note("connection to \(e.peer) completed with nothing pending; dropping it")]
        }
    }

    /// A Connection Complete for the initiation `current`.
    private mutating func outcome(_ e: LEConnectionCompleteEvent, _ current: Initiation) -> [Action] {
        if e.status == .success {
            guard let i = pending.firstIndex(where: { $0.peer.sameDevice(as: e.peer) }) else {
                counters.orphans += 1
                return [.orphan(e), .note("connection to \(e.peer) is no longer wanted; dropping it")]
            }
            let request = pending.remove(at: i)
            var actions: [Action] = [.connected(request.id, e)]
            if current.policy == 1 && !acceptListVerified && !e.peer.sameDevice(as: current.head) {
                acceptListVerified = true
                actions.append(.note("the controller honours the Filter Accept List"))
            }
            return actions
        }
        if e.status == .unknownConnectionIdentifier {
            // The completion of a cancelled initiation.
            return []
        }
        return refused(e.status, peer: e.peer, current: current)
    }

    /// The controller refused the initiation `current` (or its connection failed): the request it was
    /// for fails; Connection Limit Exceeded also lowers the usable slots for good.
    private mutating func refused(_ status: HCIStatus, peer: BluetoothAddress?, current: Initiation) -> [Action] {
        var actions: [Action] = []
        let target = peer.flatMap { p in pending.firstIndex { $0.peer.sameDevice(as: p) } }
            ?? pending.firstIndex { $0.peer.sameDevice(as: current.head) }
        if status == .connectionLimitExceeded {
            let lowered = max(1, links)
            if let t = target {
                actions.append(.failed(pending.remove(at: t).id, .limitExceeded(lowered)))
            }
            if lowered < configuration.slots {
                configuration.slots = lowered
                actions.append(.slots(lowered))
            }
            // Requests beyond the room left fail now (the youngest first) rather than wait in vain.
            while links + pending.count > configuration.slots, let last = pending.popLast() {
                actions.append(.failed(last.id, .limitExceeded(lowered)))
            }
            return actions
        }
        if let t = target {
            actions.append(.failed(pending.remove(at: t).id, .controller(status)))
        } else {
            actions.append(.note("connection attempt failed (\(status))"))
        }
        return actions
    }

    private mutating func deadline(_ timer: Timer) -> [Action] {
        switch timer {
        case .rotation:
            guard timer == rotationArmed, case .initiating = phase else { return [] }
            rotationArmed = nil
            rotateNext = true
            return reconcile()
        case .cancelGuard:
            guard timer == guardArmed, case .cancelling = phase else { return [] }
            guardArmed = nil
            phase = .idle
            return [.note("no Connection Complete after LE Create Connection Cancel; assuming nothing is pending")] + reconcile()
        case .scanSlice:
            guard timer == sliceArmed else { return [] }
            sliceArmed = nil
            yielding = false
            sliceDone = true
            return reconcile()
        case .turn:
            guard timer == turnArmed else { return [] }
            turnArmed = nil
            guard scanWaiting, holdsRadio else { return [] }
            yieldNext = true
            return reconcile()
        }
    }
}
