import BLE

/// Host-to-controller command flow control (Core v5.4 Vol 4 Part E 4.4) as a value state machine.
///
/// Commands go to the controller in the order they were submitted, only while it has room
/// (Num_HCI_Command_Packets of the last Command Complete or Command Status; the controller starts with
/// room for one). Each answer is matched to the oldest command in flight with its opcode. A command in
/// flight has a deadline, delivered as `.timedOut` by the executor (which owns the clock): its waiter
/// learns it, and the credit it holds is assumed lost, so one more command may go (without that, a
/// controller that drops one command would stall every later one). An answer nobody waits for is
/// counted and dropped.
public struct HCICommandFlow: Sendable {
    /// Identifies one submitted command (unique per submitter, chosen by it).
    public typealias Token = UInt64

    public enum Event: Sendable, Equatable {
        /// A command to send; `timeout` runs from the moment it goes to the controller.
        case submit(Token, HCICommandPacket, timeout: Duration)
        /// The submitter stopped waiting: a queued command is dropped; an answer to one in flight is
        /// consumed silently.
        case abandon(Token)
        case commandComplete(CommandCompleteEvent)
        case commandStatus(CommandStatusEvent)
        /// The deadline armed by `.armTimeout(token, _)` passed.
        case timedOut(Token)
        /// The controller was reset or went away: every command queued or in flight ends with
        /// `.controllerReset`, and the controller has room for one command again (Vol 4 Part E 4.4).
        case reset
    }

    /// How a command ended.
    public enum Outcome: Sendable, Equatable {
        /// Command Complete with these return parameters (Status first, when there are any).
        case complete([UInt8])
        /// Command Status with this status (the command's own event may follow).
        case status(HCIStatus)
        /// No answer within the deadline.
        case timedOut
        /// The controller was reset (or went away) before it answered.
        case controllerReset
    }

    public enum Action: Sendable, Equatable {
        /// Write this command packet (without the H4 indicator) to the controller.
        case send([UInt8])
        /// Start the deadline of this command (it is with the controller now).
        case armTimeout(Token, Duration)
        /// Its answer came: the deadline is moot.
        case disarmTimeout(Token)
        /// The command ended; its submitter gets the outcome.
        case finished(Token, HCICommandPacket, Outcome)
        /// Something to note in the log (an answer nobody waits for, a lost credit).
        case note(String)
    }

    /// Counters for diagnostics and tests.
    public struct Counters: Sendable, Equatable {
        public var sent = 0
        public var timeouts = 0
        public var unexpectedAnswers = 0
    }

    private struct Flight: Sendable {
        var token: Token
        var packet: HCICommandPacket
        var abandoned = false
    }

    /// Commands the controller has room for now.
    public private(set) var credits: Int
    public private(set) var counters = Counters()
    private var queue: [(token: Token, packet: HCICommandPacket, timeout: Duration)] = []
    private var inFlight: [Flight] = []

    public init(credits: Int = 1) {
        self.credits = max(0, credits)
    }

    /// Commands waiting for room.
    public var queued: Int { queue.count }
    /// Commands with the controller and not yet answered.
    public var outstanding: Int { inFlight.count }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .submit(let token, let packet, let timeout):
            queue.append((token, packet, timeout))
            return pump()
        case .abandon(let token):
            if let i = queue.firstIndex(where: { $0.token == token }) {
                queue.remove(at: i)
            } else if let i = inFlight.firstIndex(where: { $0.token == token }) {
                inFlight[i].abandoned = true
            }
            return []
        case .commandComplete(let e):
            return answer(opcode: e.opcode, credits: e.numCommandPackets, outcome: .complete(e.returnParameters),
                          what: "Command Complete")
        case .commandStatus(let e):
            return answer(opcode: e.opcode, credits: e.numCommandPackets, outcome: .status(e.status),
                          what: "Command Status \(e.status)")
        case .timedOut(let token):
            guard let i = inFlight.firstIndex(where: { $0.token == token }) else { return [] }
            let flight = inFlight.remove(at: i)
            counters.timeouts += 1
            // The controller never answered: its credit is taken to be lost, so the queue moves on.
            credits = max(credits, 1)
            var actions: [Action] = [.note("\(flight.packet.opcode.name) got no answer; carrying on without it")]
            if !flight.abandoned { actions.append(.finished(flight.token, flight.packet, .timedOut)) }
            return actions + pump()
        case .reset:
            var actions: [Action] = []
            for flight in inFlight {
                actions.append(.disarmTimeout(flight.token))
                if !flight.abandoned { actions.append(.finished(flight.token, flight.packet, .controllerReset)) }
            }
            for queued in queue { actions.append(.finished(queued.token, queued.packet, .controllerReset)) }
            inFlight = []
            queue = []
            credits = 1
            return actions
        }
    }

    private mutating func answer(opcode: HCIOpcode, credits newCredits: UInt8, outcome: Outcome, what: String) -> [Action] {
        // Num_HCI_Command_Packets is the room the controller has now (not an increment).
        credits = Int(newCredits)
        var actions: [Action] = []
        // Opcode 0x0000 (no operation) only reports room.
        if opcode.rawValue != 0 {
            if let i = inFlight.firstIndex(where: { $0.packet.opcode == opcode }) {
                let flight = inFlight.remove(at: i)
                actions.append(.disarmTimeout(flight.token))
                if !flight.abandoned { actions.append(.finished(flight.token, flight.packet, outcome)) }
            } else {
                counters.unexpectedAnswers += 1
                actions.append(.note("\(what) for \(opcode.name) that nobody waits for"))
            }
        }
        return actions + pump()
    }

    private mutating func pump() -> [Action] {
        var actions: [Action] = []
        while credits > 0, !queue.isEmpty {
            let next = queue.removeFirst()
            credits -= 1
            counters.sent += 1
            inFlight.append(Flight(token: next.token, packet: next.packet))
            actions.append(.send(next.packet.bytes))
            actions.append(.armTimeout(next.token, next.timeout))
        }
        return actions
    }
}
