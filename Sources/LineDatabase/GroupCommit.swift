/// One station's intents and outcomes waiting to be written, and which of them go in the next batch.
///
/// Group commit: a batch (one round trip, one transaction) starts as soon as a writer is free; what
/// arrives while every writer is busy waits and goes in the next batch, so a station's throughput does
/// not fall with the database's round-trip time. With several writers (connections), batches commit in
/// parallel and PostgreSQL flushes their commits together.
///
/// A batch holds at most `maxBatch` entries. A device has at most one entry in the batches being
/// written, and its entries are written in the order they were submitted: an entry for a device that
/// is being written, or that waits behind an earlier entry, waits for a later batch. (The exception
/// that keeps one round trip per device: an intent and then the outcome of one device may share a
/// batch, since a batch writes its intents before its outcomes.)
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
    /// Batches being written.
    private(set) var writing = 0
    /// Devices with an entry in a batch being written.
    private var busy: [String: Int] = [:]
    let maxBatch: Int
    let writers: Int

    init(maxBatch: Int = 500, writers: Int = 1) {
        self.maxBatch = max(1, maxBatch)
        self.writers = max(1, writers)
    }

    /// Queues an entry; returns a batch to write now, if a writer is free.
    mutating func submit(_ entry: Entry) -> [Entry]? {
        pending.append(entry)
        return nextBatch()
    }

    /// A batch is written; returns the next batch to write, if any.
    mutating func batchFinished(_ batch: [Entry]) -> [Entry]? {
        writing -= 1
        for entry in batch {
            let d = entry.item.device
            if let n = busy[d], n > 1 { busy[d] = n - 1 } else { busy[d] = nil }
        }
        return nextBatch()
    }

    private mutating func nextBatch() -> [Entry]? {
        guard writing < writers, !pending.isEmpty else { return nil }
        var batch: [Entry] = []
        var rest: [Entry] = []
        var intents = Set<String>()
        var outcomes = Set<String>()
        // A device whose earlier entry waits must keep waiting behind it.
        var waiting = Set<String>()
        for entry in pending {
            let device = entry.item.device
            let fits: Bool
            if batch.count >= maxBatch || waiting.contains(device) || busy[device] != nil {
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
        guard !batch.isEmpty else { return nil }
        pending = rest
        writing += 1
        for entry in batch { busy[entry.item.device, default: 0] += 1 }
        return batch
    }
}
