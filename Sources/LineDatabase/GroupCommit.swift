/// One station's intents and outcomes waiting to be written, and which of them go in the next batch.
///
/// Group commit: while one batch is being written (one round trip, one transaction), everything that
/// arrives waits and goes in the next batch, so a station's throughput does not fall with the
/// database's round-trip time. A batch holds at most `maxBatch` entries and at most one intent and one
/// outcome per device (a second one for the same device waits for the following batch, so the
/// order of one device's writes is kept).
struct GroupCommit<Ticket: Sendable>: Sendable {
    enum Item: Sendable {
        case intent(LineIntent)
        case outcome(LineOutcome)

        var device: String {
            switch self {
            case .intent(let i): return i.device
            case .outcome(let o): return o.device
            }
        }
    }

    struct Entry: Sendable {
        var ticket: Ticket
        var item: Item
    }

    private(set) var pending: [Entry] = []
    private(set) var writing = false
    let maxBatch: Int

    init(maxBatch: Int = 500) {
        self.maxBatch = max(1, maxBatch)
    }

    /// Queues an entry; returns the batch to write now, if the writer is idle.
    mutating func submit(_ entry: Entry) -> [Entry]? {
        pending.append(entry)
        return nextBatch()
    }

    /// The batch being written is done; returns the next batch to write, if any.
    mutating func batchFinished() -> [Entry]? {
        writing = false
        return nextBatch()
    }

    private mutating func nextBatch() -> [Entry]? {
        guard !writing, !pending.isEmpty else { return nil }
        var batch: [Entry] = []
        var rest: [Entry] = []
        var intents = Set<String>()
        var outcomes = Set<String>()
        // A device whose earlier entry waits must keep waiting behind it.
        var waiting = Set<String>()
        for entry in pending {
            let device = entry.item.device
            let fits: Bool
            if batch.count >= maxBatch || waiting.contains(device) {
                fits = false
            } else {
                switch entry.item {
                // A batch writes its intents before its outcomes: an intent after an outcome waits.
                case .intent: fits = !outcomes.contains(device) && intents.insert(device).inserted
                case .outcome: fits = outcomes.insert(device).inserted
                }
            }
            if fits {
                batch.append(entry)
            } else {
                rest.append(entry)
                waiting.insert(device)
            }
        }
        pending = rest
        writing = true
        return batch
    }
}
