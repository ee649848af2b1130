import YAML

/// A latency range: each occurrence takes a duration drawn uniformly between `lower` and `upper`.
public struct LatencyRange: Sendable, Equatable, CustomStringConvertible {
    public var lower: Duration
    public var upper: Duration

    public init(_ lower: Duration, _ upper: Duration) {
        self.lower = lower
        self.upper = max(lower, upper)
    }

    public static let zero = LatencyRange(.zero, .zero)

    public var description: String { "[\(lower), \(upper)]" }
}

/// The faults and firmware quirks of a virtual device: defaults in the model's `faults:` mapping,
/// overridden per device by the inventory's `simulator: { faults: ... }`.
///
/// Probabilities are drawn from the device's seeded generator, so a seed fixes where they strike.
public struct FaultSettings: Sendable, Equatable {
    /// `no_advertise`: the device never advertises (a scan never sees it; connecting to it times out).
    public var noAdvertise = false
    /// `connect_fail`: probability that a connection attempt fails with `BLEError.connectFailed` after
    /// the connect latency.
    public var connectFail = 0.0
    /// `connect_timeout`: probability that a connection attempt never completes (the caller's
    /// `ConnectOptions.timeout` expires with `BLEError.timeout`).
    public var connectTimeout = 0.0
    /// `drop`: probability, per ATT PDU the device receives, that it drops the link (supervision
    /// timeout) instead of handling that PDU. Everything handled before stays applied.
    public var drop = 0.0
    /// `ack_loss`: probability that a control command is executed but its ack notification never sent.
    public var ackLoss = 0.0
    /// `busy_ack`: probability that a control command is answered `<command> 02` (busy) and NOT executed.
    public var busyAck = 0.0
    /// `notify_undeclared`: the ack characteristic lacks the notify property and its CCCD, but the
    /// device notifies on it anyway.
    public var notifyUndeclared = false
    /// `full_discovery_only`: Find By Type Value is answered Request Not Supported.
    public var fullDiscoveryOnly = false
    /// `long_uuids`: every service and characteristic UUID is declared in its 128-bit form, also SIG UUIDs
    /// that have a 16-bit one (legal; a Find By Type Value with the 16-bit value finds nothing).
    public var longUUIDs = false
    /// `read_multiple_variable`: whether Read Multiple Variable Length is answered (false: Request Not
    /// Supported, as firmware before Bluetooth 5.2).
    public var readMultipleVariable = true
    /// `mtu_cap`: the largest ATT_MTU the device accepts (23...517).
    public var mtuCap: Int?
    /// `slow`: multiplier on every latency of the device (a slow device near a timeout).
    public var slow = 1.0
    /// `pairing_rejected`: the device answers every Pairing Request with Pairing Failed (Pairing Not
    /// Supported); encryption with a bond it holds still works.
    public var pairingRejected = false
    /// `wrong_passkey`: the passkey the device displays differs from the one its `security.passkey`
    /// names (the inventory's): Passkey Entry fails with Confirm Value Failed.
    public var wrongPasskey = false
    /// `bond_lost`: the device forgets every bond as soon as it is made: a later link's encryption with
    /// the stored key fails with PIN or Key Missing.
    public var bondLost = false
    /// `slow_pairing`: extra time (one duration or a range) each pairing takes on the device, scaled
    /// like every latency.
    public var slowPairing = LatencyRange.zero
    /// `drop_mid_upload`: once, when an image upload passes this fraction of its length, the device drops
    /// the link instead of answering that chunk (the upload stays in its RAM).
    public var smpDropMidUpload: Double?
    /// `failed_swap`: every swap fails at boot (MCUboot erases slot 1 and boots the old image).
    public var smpFailedSwap = false
    /// `revert`: a test image crashes on its first boot; MCUboot reverts to the old one.
    public var smpRevert = false
    /// `lose_responses`: probability that an SMP response is executed but never notified.
    public var smpLoseResponses = 0.0
    /// `buffer_overflow`: the SMP buffers the device really has (MCUmgr parameters report the model's).
    public var smpBuffers: Int?
    /// `not_bootable`: the device reports uploaded images not bootable and refuses to test or confirm them.
    public var smpNotBootable = false

    public init() {}

    /// The keys of a `faults:` mapping.
    public static let names = [
        "no_advertise", "connect_fail", "connect_timeout", "drop", "ack_loss", "busy_ack",
        "notify_undeclared", "full_discovery_only", "long_uuids", "read_multiple_variable", "mtu_cap", "slow",
        "pairing_rejected", "wrong_passkey", "bond_lost", "slow_pairing",
        "drop_mid_upload", "failed_swap", "revert", "lose_responses", "buffer_overflow", "not_bootable",
    ]

    /// Applies a `faults:` mapping on top of these settings.
    mutating func apply(_ node: YAMLNode, _ reader: ModelReader) throws(SimulatorError) {
        for (key, value) in try reader.mapping(node, "faults", allowed: Self.names) {
            switch key {
            case "no_advertise": noAdvertise = try reader.bool(value, key)
            case "connect_fail": connectFail = try reader.probability(value, key)
            case "connect_timeout": connectTimeout = try reader.probability(value, key)
            case "drop": drop = try reader.probability(value, key)
            case "ack_loss": ackLoss = try reader.probability(value, key)
            case "busy_ack": busyAck = try reader.probability(value, key)
            case "notify_undeclared": notifyUndeclared = try reader.bool(value, key)
            case "full_discovery_only": fullDiscoveryOnly = try reader.bool(value, key)
            case "long_uuids": longUUIDs = try reader.bool(value, key)
            case "read_multiple_variable": readMultipleVariable = try reader.bool(value, key)
            case "mtu_cap": mtuCap = try reader.int(value, key, in: 23...517)
            case "slow": slow = try reader.positive(value, key)
            case "pairing_rejected": pairingRejected = try reader.bool(value, key)
            case "wrong_passkey": wrongPasskey = try reader.bool(value, key)
            case "bond_lost": bondLost = try reader.bool(value, key)
            case "slow_pairing": slowPairing = try reader.latency(value, key)
            case "drop_mid_upload": smpDropMidUpload = try reader.probability(value, key)
            case "failed_swap": smpFailedSwap = try reader.bool(value, key)
            case "revert": smpRevert = try reader.bool(value, key)
            case "lose_responses": smpLoseResponses = try reader.probability(value, key)
            case "buffer_overflow": smpBuffers = try reader.int(value, key, in: 1...64)
            case "not_bootable": smpNotBootable = try reader.bool(value, key)
            default: break
            }
        }
    }
}
