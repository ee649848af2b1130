import BLE
import HCI
import Testing

private func device(_ n: UInt64) -> BluetoothAddress { BluetoothAddress(value: 0xF0_0000_0000 | n, kind: .random) }
private let a = device(1), b = device(2), c = device(3)

private func complete(_ peer: BluetoothAddress, handle: UInt16 = 0x40, status: HCIStatus = .success) -> LEConnectionCompleteEvent {
    LEConnectionCompleteEvent(status: status, handle: handle, peer: peer)
}

private func config(size: Int = 8, trusted: Bool = false, slots: Int = 8) -> ConnectionInitiator.Configuration {
    ConnectionInitiator.Configuration(slots: slots, acceptListSize: size, acceptListTrusted: trusted)
}

/// The command sent among the actions, if any.
private func command(_ actions: [ConnectionInitiator.Action]) -> ConnectionInitiator.Command? {
    for case .send(let c) in actions { return c }
    return nil
}

private func create(_ actions: [ConnectionInitiator.Action]) -> LECreateConnectionCommand? {
    if case .create(let c)? = command(actions) { return c }
    return nil
}

/// The LE Create Connection among commands sent, the last one.
private func lastCreate(_ sent: [ConnectionInitiator.Command]) -> LECreateConnectionCommand? {
    for c in sent.reversed() { if case .create(let x) = c { return x } }
    return nil
}

private func armed(_ actions: [ConnectionInitiator.Action]) -> ConnectionInitiator.Timer? {
    for case .arm(let t, _) in actions { return t }
    return nil
}

/// Drives a machine through the controller's side of the conversation.
private struct Driver {
    var machine: ConnectionInitiator
    /// Every timer armed so far, in order.
    var armedTimers: [ConnectionInitiator.Timer] = []

    init(_ configuration: ConnectionInitiator.Configuration) { machine = ConnectionInitiator(configuration) }

    mutating func on(_ event: ConnectionInitiator.Event) -> [ConnectionInitiator.Action] {
        let actions = machine.handle(event)
        for case .arm(let t, _) in actions { armedTimers.append(t) }
        return actions
    }

    /// The rotation timer armed last.
    var rotation: ConnectionInitiator.Timer {
        armedTimers.last { if case .rotation = $0 { return true } else { return false } } ?? .rotation(0)
    }

    /// Answers every command with success until an LE Create Connection is pending; returns every
    /// command sent on the way, the last being the create.
    mutating func settle(_ first: [ConnectionInitiator.Action]) -> [ConnectionInitiator.Command] {
        var actions = first
        var sent: [ConnectionInitiator.Command] = []
        for _ in 0..<32 {
            if actions.contains(.requestRadio) {
                actions = on(.radioGranted)
                continue
            }
            guard let c = command(actions) else { return sent }
            sent.append(c)
            switch c {
            case .create:
                actions = on(.commandFinished(c, .success))
                return sent
            case .cancel:
                actions = on(.commandFinished(c, .success))
                if case .cancelGuard? = armed(actions) {
                    actions = on(.connectionComplete(complete(BluetoothAddress(value: 0), status: .unknownConnectionIdentifier)))
                }
            case .add, .remove:
                actions = on(.commandFinished(c, .success))
            }
        }
        return sent
    }
}

@Suite struct ConnectionInitiatorTests {
    @Test func oneRequestIsConnectedByAddressWithFilterPolicyZero() {
        var d = Driver(config())
        #expect(d.on(.request(1, peer: a, inferredType: false)) == [.requestRadio])
        let first = d.on(.radioGranted)
        let cmd = try! #require(create(first))
        #expect(cmd.filterPolicy == 0 && cmd.peer == a)
        // One request of known type: nothing to take turns with, no rotation armed.
        #expect(d.on(.commandFinished(.create(cmd), .success)).isEmpty)
        let done = d.on(.connectionComplete(complete(a)))
        #expect(done == [.connected(1, complete(a)), .releaseRadio])
        #expect(d.machine.counters.initiations == 1)
    }

    @Test func severalRequestsGoIntoTheAcceptListAndOneCreateConnection() {
        var d = Driver(config())
        var sent = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        #expect(sent.count == 1)
        // A second pending device: cancel, fill the list, initiate with filter policy 1.
        sent = d.settle(d.on(.request(2, peer: b, inferredType: false)))
        #expect(sent.dropLast() == [.cancel, .add(a), .add(b)])
        let policyOne = try! #require(lastCreate(sent))
        #expect(policyOne.filterPolicy == 1)
        #expect(policyOne.peer == a, "Peer_Address carries the head of the line (ignored by a compliant controller)")
        #expect(d.machine.list.entries == [a, b])
        // B advertises first and is connected: the controller honours the list; A's turn continues.
        let done = d.on(.connectionComplete(complete(b)))
        #expect(done.contains(.connected(2, complete(b))))
        #expect(d.machine.acceptListVerified)
        let next = try! #require(create(done))
        #expect(next.filterPolicy == 0 && next.peer == a)
    }

    @Test func theListIsNotChangedWhileAnInitiationUsesIt() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.settle(d.on(.request(2, peer: b, inferredType: false)))
        // Initiating with the list: a third device means cancel first; no add before the cancel ended.
        let third = d.on(.request(3, peer: c, inferredType: false))
        #expect(command(third) == .cancel)
        let acked = d.on(.commandFinished(.cancel, .success))
        #expect(command(acked) == nil)
        let ended = d.on(.connectionComplete(complete(BluetoothAddress(value: 0), status: .unknownConnectionIdentifier)))
        #expect(command(ended) == .add(c))
    }

    @Test func anAbsentDeviceBlocksNobody() {
        var d = Driver(config(trusted: true))
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.settle(d.on(.request(2, peer: b, inferredType: false)))
        _ = d.settle(d.on(.request(3, peer: c, inferredType: false)))
        // A never advertises; B then C connect, each through the pending list initiation.
        var actions = d.on(.connectionComplete(complete(b, handle: 0x41)))
        #expect(actions.contains(.connected(2, complete(b, handle: 0x41))))
        _ = d.on(.links(1))
        let sent = d.settle(actions)
        #expect(lastCreate(sent)?.filterPolicy == 1)
        actions = d.on(.connectionComplete(complete(c, handle: 0x42)))
        #expect(actions.contains(.connected(3, complete(c, handle: 0x42))))
        #expect(d.machine.pendingCount == 1)
    }

    @Test func completionWinsTheRaceWithTheCancel() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.settle(d.on(.request(2, peer: b, inferredType: false)))
        // A's caller gives up: cancel. Before the cancel's Command Complete, B connects: it is still
        // wanted, so the connection that won the race is B's.
        #expect(command(d.on(.withdraw(1))) == .cancel)
        let raced = d.on(.connectionComplete(complete(b)))
        #expect(raced.first == .connected(2, complete(b)))
        // The cancel then finds nothing pending (Command Disallowed) and the machine is idle.
        let after = d.on(.commandFinished(.cancel, .failed(.commandDisallowed)))
        #expect(after == [.releaseRadio])
        #expect(!d.machine.isInitiating && d.machine.pendingCount == 0)
    }

    @Test func aConnectionToTheWithdrawnDeviceThatWinsTheRaceIsDropped() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        #expect(command(d.on(.withdraw(1))) == .cancel)
        let raced = d.on(.connectionComplete(complete(a)))
        #expect(raced.first == .orphan(complete(a)))
        #expect(d.on(.commandFinished(.cancel, .failed(.commandDisallowed))) == [.releaseRadio])
        #expect(d.machine.counters.orphans == 1)
    }

    @Test func cancelAcknowledgedFirstThenItsConnectionCompleteThenALateOneIsDropped() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        #expect(command(d.on(.withdraw(1))) == .cancel)
        let acked = d.on(.commandFinished(.cancel, .success))
        guard case .cancelGuard? = armed(acked) else { Issue.record("no guard armed: \(acked)"); return }
        let ended = d.on(.connectionComplete(complete(a, status: .unknownConnectionIdentifier)))
        #expect(ended.contains(.releaseRadio))
        #expect(!d.machine.isInitiating)
        // A success arriving now has no initiation to belong to: always an orphan.
        let late = d.on(.connectionComplete(complete(a, handle: 0x44)))
        #expect(late.first == .orphan(complete(a, handle: 0x44)))
        #expect(d.on(.connectionComplete(complete(a, status: .failedToEstablish))).allSatisfy {
            if case .note = $0 { return true } else { return false }
        })
        #expect(d.machine.counters.lateCompletions == 2)
    }

    @Test func aCancelWhoseConnectionCompleteNeverComesEndsAtItsGuard() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.on(.withdraw(1))
        let acked = d.on(.commandFinished(.cancel, .success))
        let guardTimer = try! #require(armed(acked))
        let expired = d.on(.deadline(guardTimer))
        #expect(expired.contains(.releaseRadio))
        #expect(!d.machine.isInitiating)
    }

    @Test func connectionLimitExceededLowersTheSlotsAndFailsWhoCannotFit() {
        var d = Driver(config(slots: 4))
        _ = d.on(.links(2))
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.settle(d.on(.request(2, peer: b, inferredType: false)))
        let refused = d.on(.connectionComplete(complete(BluetoothAddress(value: 0), status: .connectionLimitExceeded)))
        #expect(refused.contains(.failed(1, .limitExceeded(2))))
        #expect(refused.contains(.slots(2)))
        #expect(refused.contains(.failed(2, .limitExceeded(2))))
        #expect(d.machine.configuration.slots == 2)
        // From now on a request beyond the two links fails at once.
        #expect(d.on(.request(3, peer: c, inferredType: false)) == [.failed(3, .noSlot(2))])
    }

    @Test func requestsBeyondTheSlotsFailAtOnce() {
        var d = Driver(config(slots: 1))
        _ = d.on(.request(1, peer: a, inferredType: false))
        #expect(d.on(.request(2, peer: b, inferredType: false)) == [.failed(2, .noSlot(1))])
    }

    @Test func moreRequestsThanListEntriesTakeTurns() {
        var d = Driver(config(size: 2, trusted: true))
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.settle(d.on(.request(2, peer: b, inferredType: false)))
        // C does not fit: the initiation for A and B stays as it is, and a turn is armed.
        let third = d.on(.request(3, peer: c, inferredType: false))
        #expect(command(third) == nil)
        #expect(armed(third) == d.rotation)
        #expect(d.machine.list.entries == [a, b])
        // The turn ends: A and B go to the back, C comes in.
        let turn = d.on(.deadline(d.rotation))
        #expect(command(turn) == .cancel)
        let sent = d.settle(turn)
        #expect(sent.contains(.remove(b)) && sent.contains(.add(c)))
        #expect(Set(d.machine.list.entries) == [c, a])
        #expect(d.machine.counters.rotations == 1)
    }

    @Test func untilTheControllerHonoursTheListTheHeadTakesTurns() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        let sent = d.settle(d.on(.request(2, peer: b, inferredType: false)))
        #expect(lastCreate(sent)?.peer == a)
        let turn = d.on(.deadline(d.rotation))
        let again = d.settle(turn)
        let next = try! #require(lastCreate(again))
        #expect(next.filterPolicy == 1 && next.peer == b)
    }

    @Test func aGuessedAddressTypeAlternatesFromTurnToTurn() {
        var d = Driver(config())
        let guess = BluetoothAddress(value: 0xC0_5E00_0001, kind: .random)
        let sent = d.settle(d.on(.request(1, peer: guess, inferredType: true)))
        #expect(lastCreate(sent)?.peer.kind == .random)
        let again = d.settle(d.on(.deadline(d.rotation)))
        #expect(lastCreate(again)?.peer.kind == .public)
        // Hearing the device settles its type: the initiation is redone with it.
        let heard = d.on(.heard(guess))
        #expect(command(heard) == .cancel)
    }

    @Test func aControllerThatRefusesTheListIsAskedByAddress() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.on(.request(2, peer: b, inferredType: false))
        var actions = d.on(.commandFinished(.cancel, .success))
        actions = d.on(.connectionComplete(complete(BluetoothAddress(value: 0), status: .unknownConnectionIdentifier)))
        actions = d.on(.commandFinished(try! #require(command(actions)), .success))
        actions = d.on(.commandFinished(try! #require(command(actions)), .success))
        let policyOne = try! #require(create(actions))
        #expect(policyOne.filterPolicy == 1)
        let refused = d.on(.commandFinished(.create(policyOne), .failed(.unsupportedFeature)))
        #expect(!d.machine.acceptListEnabled)
        #expect(create(refused)?.filterPolicy == 0)
    }

    @Test func aCreateConnectionWithoutCommandStatusIsCancelledToBeSure() {
        var d = Driver(config())
        _ = d.on(.request(1, peer: a, inferredType: false))
        let cmd = try! #require(create(d.on(.radioGranted)))
        let lost = d.on(.commandFinished(.create(cmd), .timedOut))
        #expect(command(lost) == .cancel)
    }

    @Test func aFailedConnectionFailsItsRequestAndTheLineMovesOn() {
        var d = Driver(config(size: 0))
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.on(.request(2, peer: b, inferredType: false))
        let failed = d.on(.connectionComplete(complete(a, status: .failedToEstablish)))
        #expect(failed.contains(.failed(1, .controller(.failedToEstablish))))
        #expect(create(failed)?.peer == b)
    }

    @Test func connectionsMadeDuringATurnDoNotEndItWhileScansWait() {
        // A radio that cannot scan while initiating: a device heard in the last scan slice advertises next
        // about one advertising interval later, so the turn goes on after a connection.
        var d = Driver(config(size: 0))
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        _ = d.on(.request(2, peer: b, inferredType: false))
        let waiting = d.on(.scanWaiting(true))
        guard case .turn? = armed(waiting) else { Issue.record("expected a turn, got \(waiting)"); return }
        let done = d.on(.connectionComplete(complete(a)))
        #expect(done.contains(.connected(1, complete(a))))
        #expect(!done.contains(.releaseRadio))
        #expect(create(done)?.peer == b)
    }

    @Test func aScanWithConsumersWaitingKeepsTheRadioForASliceBeforeInitiatingTakesIt() {
        var d = Driver(config())
        _ = d.on(.scanWaiting(true))
        let first = d.on(.request(1, peer: a, inferredType: false))
        #expect(!first.contains(.requestRadio), "the scan keeps the radio for its slice")
        let slice = try! #require(armed(first))
        guard case .scanSlice = slice else { Issue.record("expected a scan slice, got \(slice)"); return }
        #expect(first.contains(.arm(slice, d.machine.scanSlice)))
        // Devices heard during the slice join the line; they are connected together after it.
        #expect(d.on(.request(2, peer: b, inferredType: false)).isEmpty)
        #expect(d.on(.deadline(slice)) == [.requestRadio])
        let granted = d.on(.radioGranted)
        guard case .turn? = armed(granted) else { Issue.record("expected a turn, got \(granted)"); return }
        let sent = d.settle(granted)
        #expect(lastCreate(sent)?.filterPolicy == 1)
    }

    @Test func whenNobodyWaitsForAdvertisementsAnyMoreInitiatingTakesTheRadioAtOnce() {
        var d = Driver(config())
        _ = d.on(.scanWaiting(true))
        let first = d.on(.request(1, peer: a, inferredType: false))
        let slice = try! #require(armed(first))
        let gone = d.on(.scanWaiting(false))
        #expect(gone == [.disarm(slice), .requestRadio])
        // A stale slice deadline changes nothing.
        #expect(d.on(.deadline(slice)).isEmpty)
    }

    @Test func withoutWaitingScansATurnThatEndsChangesNothing() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        let waiting = d.on(.scanWaiting(true))
        let turn = try! #require(armed(waiting))
        #expect(d.on(.scanWaiting(false)) == [.disarm(turn)])
        #expect(d.on(.deadline(turn)).isEmpty)
    }

    @Test func scanningGetsItsSliceWhenTheRadioCannotDoBoth() {
        var d = Driver(config())
        _ = d.settle(d.on(.request(1, peer: a, inferredType: false)))
        // Consumers wait for advertisements while initiating keeps scanning off: a turn is armed.
        let waiting = d.on(.scanWaiting(true))
        let turn = try! #require(armed(waiting))
        var actions = d.on(.deadline(turn))
        #expect(command(actions) == .cancel)
        actions = d.on(.commandFinished(.cancel, .success))
        actions = d.on(.connectionComplete(complete(BluetoothAddress(value: 0), status: .unknownConnectionIdentifier)))
        #expect(actions.contains(.releaseRadio))
        let slice = try! #require(armed(actions))
        guard case .scanSlice = slice else { Issue.record("expected a scan slice, got \(slice)"); return }
        // After the slice, initiating resumes.
        #expect(d.on(.deadline(slice)) == [.requestRadio])
    }
}

@Suite struct FilterAcceptListTests {
    @Test func staleEntriesGoBeforeNewOnesAreAdded() {
        var list = FilterAcceptList(capacity: 2)
        list.applied(.add(a))
        list.applied(.add(b))
        #expect(list.nextChange(toward: [c, a]) == .remove(b))
        list.applied(.remove(b))
        #expect(list.nextChange(toward: [c, a]) == .add(c))
        list.applied(.add(c))
        #expect(list.nextChange(toward: [c, a]) == nil)
    }

    @Test func theListTakesAtMostItsCapacityFromTheFrontOfTheLine() {
        let list = FilterAcceptList(capacity: 2)
        #expect(list.nextChange(toward: [a, a, b, c]) == .add(a))
        var full = FilterAcceptList(capacity: 2)
        full.applied(.add(a))
        full.applied(.add(b))
        #expect(full.nextChange(toward: [a, b, c]) == nil)
    }

    @Test func theSameAddressUnderTheOtherTypeIsAnotherEntry() {
        var list = FilterAcceptList(capacity: 4)
        list.applied(.add(a))
        var publicA = a
        publicA.kind = .public
        #expect(list.nextChange(toward: [publicA]) == .remove(a))
    }

    @Test func aFullControllerLowersTheCapacity() {
        var list = FilterAcceptList(capacity: 8)
        list.applied(.add(a))
        list.full()
        #expect(list.capacity == 1)
        list.cleared()
        #expect(list.entries.isEmpty)
    }
}
