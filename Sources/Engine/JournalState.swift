import Foundation

/// What a journal says about each device: its lines folded in order (the resume triage's input).
public struct JournalState: Sendable, Equatable {
    public var headers: [JournalHeader]
    /// The last outcome recorded per device.
    public var outcomes: [String: DeviceRecord]
    /// Devices with an irreversible-write intent that no final outcome (succeeded or failed) followed,
    /// and the step: the write may have reached the device, and nobody knows how it ended.
    public var pendingIntents: [String: String]
    /// How many times each device was started.
    public var starts: [String: Int]
    /// The actions of checked steps (a `dfu`'s `test`, `reset`, `confirm`) journaled for each device, by
    /// step index, since its last final outcome: a resumed step reads the device's state and decides
    /// from it and these, instead of the device being left for review.
    public var journaledActions: [String: [Int: Set<String>]] = [:]

    /// Joins a step's name and an action in an intent line's `step`.
    public static let actionSeparator = "\u{1F}"
    /// True when the last line was cut short (the process died mid-write); it was ignored.
    public var truncatedTail: Bool

    public init(lines: [JournalLine], truncatedTail: Bool = false) {
        headers = []
        outcomes = [:]
        pendingIntents = [:]
        starts = [:]
        self.truncatedTail = truncatedTail
        for line in lines { apply(line) }
    }

    /// Folds one more line in.
    public mutating func apply(_ line: JournalLine) {
        switch line {
        case .header(let h, _):
            headers.append(h)
        case .started(let device, _, _):
            // A start does not clear an earlier intent: if this start never reaches an outcome, the
            // earlier irreversible write still may have gone out.
            starts[device, default: 0] += 1
        case .intent(let device, let step, let index, _):
            let parts = step.split(separator: Character(Self.actionSeparator), maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2 {
                journaledActions[device, default: [:]][index, default: []].insert(String(parts[1]))
            } else {
                pendingIntents[device] = step
            }
        case .outcome(let r, _):
            outcomes[r.id] = r
            // An interrupted device may have been cut after its irreversible write went out: its
            // intent stands.
            if r.outcome != .interrupted {
                pendingIntents[r.id] = nil
                journaledActions[r.id] = nil
            }
        case .end:
            break
        }
    }

    /// Why a journal cannot be used.
    public struct ReadError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Reads a journal file as it is (nothing is repaired): a torn last line is ignored, a damaged
    /// line anywhere else is an error.
    public static func read(path: String) throws -> JournalState {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReadError(description: "cannot read journal \(path)")
        }
        let parsed: (lines: [JournalLine], tail: JournalFile.Tail)
        do {
            parsed = try JournalFile.parse(data, path: path)
        } catch {
            throw ReadError(description: error.description)
        }
        let state = JournalState(lines: parsed.lines, truncatedTail: parsed.tail != .none && parsed.tail != .missingNewline)
        guard !state.headers.isEmpty else {
            throw ReadError(description: "\(path): not a provision journal (no header line)")
        }
        return state
    }
}
