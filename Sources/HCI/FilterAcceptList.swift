import BLE

/// The host's copy of the controller's Filter Accept List (Core v5.4 Vol 6 Part B 4.3.1) and the
/// one change that brings it closer to what the host wants in it.
///
/// The controller's list changes only through LE Add/Remove Device (Vol 4 Part E 7.8.16/17), one
/// command at a time; the host records a change once the controller confirmed it. Entries are
/// (address type, address) pairs: the same address under the other type is another entry.
public struct FilterAcceptList: Sendable, Equatable {
    /// One step toward the wanted list.
    public enum Change: Sendable, Equatable {
        case remove(BluetoothAddress)
        case add(BluetoothAddress)
    }

    /// Entries the controller holds, in the order they were added.
    public private(set) var entries: [BluetoothAddress] = []
    /// How many entries the controller takes (LE Read Filter Accept List Size, lowered when an add
    /// fails with Memory Capacity Exceeded).
    public private(set) var capacity: Int

    public init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    public func contains(_ address: BluetoothAddress) -> Bool { entries.contains(address) }

    /// The next change that makes the list equal to `wanted` (at most `capacity` entries are taken
    /// from its front): stale entries go first, so adds never overflow the list. Nil when it matches.
    public func nextChange(toward wanted: [BluetoothAddress]) -> Change? {
        var target: [BluetoothAddress] = []
        for a in wanted where !target.contains(a) && target.count < capacity { target.append(a) }
        if let stale = entries.first(where: { !target.contains($0) }) { return .remove(stale) }
        if let missing = target.first(where: { !entries.contains($0) }) { return .add(missing) }
        return nil
    }

    /// Records a change the controller confirmed.
    public mutating func applied(_ change: Change) {
        switch change {
        case .add(let a):
            if !entries.contains(a) { entries.append(a) }
        case .remove(let a):
            entries.removeAll { $0 == a }
        }
    }

    /// The controller refused an add for lack of room: it holds only what it holds now.
    public mutating func full() {
        capacity = entries.count
    }

    /// Forgets every entry (after LE Clear Filter Accept List or a reset).
    public mutating func cleared() {
        entries = []
    }
}
