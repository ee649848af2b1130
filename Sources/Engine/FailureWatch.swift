/// Whether the line should stop for its failures, decided one finished device at a time: a value with
/// no clock, fed each record of this run as it ends (outcomes carried over from a journal are the past).
///
/// - `--max-failures` (`FailureThreshold`) counts the failures that point to the fixture — the device
///   was not found, did not answer in time, could not be connected or kept, the adapter failed
///   (`fixtureKinds`) — and not the product's rejects (a failed `verify`, a refused command, a pairing
///   the device refused...): one unit with a low battery or old firmware says nothing of the fixture.
///   A percentage is of the devices finished.
/// - `--max-consecutive-failures N` counts failures of any kind in a row (in the order devices end); a
///   success starts it again.
public struct FailureWatch: Sendable, Equatable {
    /// The failure kinds that point to the fixture rather than the unit.
    public static let fixtureKinds: Set<FailureKind> = [.timeout, .notFound, .connectFailed, .disconnected, .adapterFailure]

    public var threshold: FailureThreshold?
    public var maxConsecutive: Int?
    public private(set) var finished = 0
    /// Fixture failures by kind.
    public private(set) var fixture: [FailureKind: Int] = [:]
    /// Failures of other kinds (product rejects), not counted by the threshold.
    public private(set) var rejects = 0
    public private(set) var consecutive = 0

    public init(threshold: FailureThreshold? = nil, maxConsecutive: Int? = nil) {
        self.threshold = threshold
        self.maxConsecutive = maxConsecutive
    }

    public var fixtureFailures: Int { fixture.values.reduce(0, +) }

    /// Takes one finished device in; the stop message when the line should stop now.
    public mutating func record(outcome: DeviceOutcome, kind: FailureKind?) -> String? {
        switch outcome {
        case .succeeded:
            // A success can bring a percentage's sample to its size.
            finished += 1
            consecutive = 0
        case .failed:
            finished += 1
            consecutive += 1
            if let kind, Self.fixtureKinds.contains(kind) { fixture[kind, default: 0] += 1 } else { rejects += 1 }
        case .skipped, .interrupted:
            return nil
        }
        if let n = maxConsecutive, outcome == .failed, consecutive >= n {
            return "line stopped: \(consecutive) devices failed in a row (--max-consecutive-failures \(n)); \(breakdown)"
        }
        if let t = threshold, t.crossed(failures: fixtureFailures, finished: finished) {
            let product = rejects > 0 ? "; \(rejects) product reject\(rejects == 1 ? "" : "s") (verify and other device answers) not counted" : ""
            return "line stopped: \(fixtureFailures) of \(finished) finished devices failed in ways that point to the fixture (threshold \(t)): \(breakdown)\(product); a fixture or adapter problem is suspected"
        }
        return nil
    }

    /// The fixture failures by kind (`timeout 3, not_found 2`), then the rejects.
    var breakdown: String {
        let kinds = fixture.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" }
        return (kinds.isEmpty ? "no fixture failure" : kinds.joined(separator: ", ")) + (rejects > 0 ? ", product rejects \(rejects)" : "")
    }
}
