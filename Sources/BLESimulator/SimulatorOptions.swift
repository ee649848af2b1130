import BLESecurity

/// How a simulated adapter runs.
public struct SimulatorOptions: Sendable {
    /// The adapter id in reports and logs.
    public var id: String
    /// The run seed: with the same seed, fleet and client behaviour, faults strike in the same places.
    public var seed: UInt64
    /// Multiplier on every model latency: 0 = zero latency (benchmarks, fast tests), 1 = as modelled.
    public var latencyScale: Double
    /// The state file that carries device state across process crashes (`--sim-state PATH`); nil for
    /// devices that start fresh.
    public var statePath: String?
    /// How many links the adapter holds at once.
    public var connectionSlots: Int
    /// With latency, a scan that keeps going reports each advertising device again once per
    /// `max(reportPeriod, advertising interval)` (a real scanner hears it every interval; reporting
    /// every 20 ms for 10,000 devices would only burn CPU).
    public var reportPeriod: Duration
    /// Link credits: client PDUs in flight to a device before the client's send waits.
    public var credits: Int
    /// The connection interval of every link (× `latencyScale`), whatever the models say: every PDU
    /// waits for the link's next connection event and a connect for the device's next advertising event.
    /// Nil: each model's `latency.connection_interval`, or no pacing when it has none.
    public var connectionInterval: Duration?
    /// The station's bond store (`--bonds`): links to devices it has bonds with encrypt with the stored
    /// key; new bonds are kept there. Nil: bonds last as long as the link.
    public var bonds: BondStore?

    public init(id: String = "sim", seed: UInt64 = 0, latencyScale: Double = 1, statePath: String? = nil,
                connectionSlots: Int = 256, reportPeriod: Duration = .seconds(1), credits: Int = 8,
                connectionInterval: Duration? = nil, bonds: BondStore? = nil) {
        self.id = id
        self.seed = seed
        self.latencyScale = max(0, latencyScale)
        self.statePath = statePath
        self.connectionSlots = max(1, connectionSlots)
        self.reportPeriod = max(.milliseconds(1), reportPeriod)
        self.credits = max(1, credits)
        self.connectionInterval = connectionInterval.map { max(.microseconds(7_500), $0) }
        self.bonds = bonds
    }
}
