/// What a run's journal starts with: enough to refuse resuming with another workflow or inventory, or
/// with another device selection.
public struct JournalHeader: Codable, Sendable, Equatable {
    public var runId: String
    public var workflow: FileRef
    public var inventory: FileRef
    public var adapters: [String]
    public var options: [String: String]
    public var started: WallTime
    public var toolVersion: String
    /// True for the header a resumed run appends.
    public var resumed: Bool
    /// The ids of the devices the run selected (`--limit`), in inventory order; nil when it selected
    /// every device of the inventory. A resume keeps this selection.
    public var selected: [String]?

    public init(runId: String, workflow: FileRef, inventory: FileRef, adapters: [String], options: [String: String],
                started: WallTime, toolVersion: String, resumed: Bool, selected: [String]? = nil) {
        self.runId = runId
        self.workflow = workflow
        self.inventory = inventory
        self.adapters = adapters
        self.options = options
        self.started = started
        self.toolVersion = toolVersion
        self.resumed = resumed
        self.selected = selected
    }
}

/// One line of the journal, one case per line type. On disk each is one JSON object with a `type`
/// (`header`, `started`, `intent`, `outcome`, `end`), its time `at`, and the fields of its case
/// (docs/report.md, "The journal").
public enum JournalLine: Sendable, Equatable {
    /// A run starts, or resumes (then `header.resumed` is true).
    case header(JournalHeader, at: WallTime)
    /// A device starts its workflow for the `attempt`-th time (counting earlier runs).
    case started(device: String, attempt: Int, at: WallTime)
    /// An irreversible write is about to be sent to a device: step `step`, `stepIndex` in the workflow.
    /// Durable before the write goes out.
    case intent(device: String, step: String, stepIndex: Int, at: WallTime)
    /// A device's outcome is known.
    case outcome(DeviceRecord, at: WallTime)
    /// The run ended; `stopped` when it stopped early.
    case end(stopped: StopInfo?, at: WallTime)

    /// When the line was written.
    public var at: WallTime {
        switch self {
        case .header(_, let at), .started(_, _, let at), .intent(_, _, _, let at), .outcome(_, let at), .end(_, let at): return at
        }
    }

    /// The device the line is about, if any.
    public var device: String? {
        switch self {
        case .started(let d, _, _), .intent(let d, _, _, _): return d
        case .outcome(let r, _): return r.id
        case .header, .end: return nil
        }
    }

    /// The `type` written on disk.
    public var type: String {
        switch self {
        case .header: return "header"
        case .started: return "started"
        case .intent: return "intent"
        case .outcome: return "outcome"
        case .end: return "end"
        }
    }
}

extension JournalLine {
    /// The record's JSON inside an `outcome` line's compact JSON, `{"at":"…","record":{…},"type":"outcome"}`
    /// (keys sorted), found by what surrounds it; nil when the line is not that shape.
    static func record(inOutcome line: [UInt8]) -> ArraySlice<UInt8>? {
        let head = Array(#"{"at":""#.utf8), mid = Array(#"","record":"#.utf8), tail = Array(#","type":"outcome"}"#.utf8)
        // The time is fixed-width ISO 8601 (24 bytes).
        let start = head.count + 24 + mid.count
        guard line.count > start + tail.count, line.starts(with: head), line[(head.count + 24)..<start].elementsEqual(mid),
              line[(line.count - tail.count)...].elementsEqual(tail) else { return nil }
        return line[start..<(line.count - tail.count)]
    }
}

extension JournalLine: Codable, SortedRecordKeys {
    /// The keys of a journal line on disk, in sorted order. Each case writes `at`, its own fields and
    /// `type`, in this order (`SortedRecordKeys`).
    enum CodingKeys: String, CodingKey {
        case at, attempt, device, header, record, step, stepIndex, stopped, type
    }

    /// Why a line cannot be read.
    struct UnknownType: Error, CustomStringConvertible {
        var type: String
        var description: String { "unknown journal line type `\(type)` (written by a newer provision?)" }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        // The type first: a line of a type this provision does not know is refused as such.
        let type = try c.decode(String.self, forKey: .type)
        guard ["header", "started", "intent", "outcome", "end"].contains(type) else { throw UnknownType(type: type) }
        let at = try c.decode(WallTime.self, forKey: .at)
        switch type {
        case "header":
            self = .header(try c.decode(JournalHeader.self, forKey: .header), at: at)
        case "started":
            self = .started(device: try c.decode(String.self, forKey: .device), attempt: try c.decode(Int.self, forKey: .attempt), at: at)
        case "intent":
            self = .intent(device: try c.decode(String.self, forKey: .device), step: try c.decode(String.self, forKey: .step),
                           stepIndex: try c.decode(Int.self, forKey: .stepIndex), at: at)
        case "outcome":
            self = .outcome(try c.decode(DeviceRecord.self, forKey: .record), at: at)
        case "end":
            self = .end(stopped: try c.decodeIfPresent(StopInfo.self, forKey: .stopped), at: at)
        case let other:
            throw UnknownType(type: other)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(at, forKey: .at)
        switch self {
        case .header(let h, _):
            try c.encode(h, forKey: .header)
        case .started(let device, let attempt, _):
            try c.encode(attempt, forKey: .attempt)
            try c.encode(device, forKey: .device)
        case .intent(let device, let step, let index, _):
            try c.encode(device, forKey: .device)
            try c.encode(step, forKey: .step)
            try c.encode(index, forKey: .stepIndex)
        case .outcome(let r, _):
            try c.encode(r, forKey: .record)
        case .end(let stopped, _):
            try c.encodeIfPresent(stopped, forKey: .stopped)
        }
        try c.encode(type, forKey: .type)
    }
}
