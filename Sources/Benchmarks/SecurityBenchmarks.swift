import BLE
import BLESecurity

#if canImport(Glibc)
import Glibc
#endif

/// Micro-benchmarks of pairing, for `provision bench`: `SMPCentral` and `SMPPeripheral` over
/// `SMPLoopback` with the system random source (fresh P-256 keys, OpenSSL's generator). They measure
/// this host's work per pairing — both sides' cryptography and state machines — not a radio; the
/// round trips a radio adds are given as `turns` (how often the sending side changes).
public enum SecurityBenchmarks {
    /// The exchanges measured.
    public enum Exchange: String, Sendable, CaseIterable {
        case secureConnectionsJustWorks = "LE Secure Connections, Just Works"
        case secureConnectionsPasskeyEntry = "LE Secure Connections, Passkey Entry"
        case legacyJustWorks = "LE legacy, Just Works"
        case legacyPasskeyEntry = "LE legacy, Passkey Entry"
    }

    /// What one run measured.
    public struct Result: Sendable, CustomStringConvertible {
        public var exchange: Exchange
        public var pairings: Int
        /// Wall-clock seconds for all pairings.
        public var seconds: Double
        /// CPU seconds (user + system) of this process for all pairings.
        public var cpuSeconds: Double
        /// PDUs and sender changes in one pairing (key distribution included).
        public var pdus: Int
        public var turns: Int

        public var description: String {
            "\(exchange.rawValue): \(pairings) pairings, \(milliseconds(cpuSeconds)) ms CPU and \(milliseconds(seconds)) ms wall per pairing (both sides), \(pdus) PDUs, \(turns) turns"
        }

        private func milliseconds(_ total: Double) -> String {
            let ms = pairings > 0 ? total / Double(pairings) * 1000 : 0
            return String(Double(Int(ms * 1000)) / 1000)
        }
    }

    /// Runs `count` whole pairings of `exchange`, each with fresh keys, and checks that each succeeded.
    public static func pairings(_ exchange: Exchange, count: Int) throws(SMPFailure) -> Result {
        let central = BluetoothAddress(value: 0xC0_0000_0000_01, kind: .random)
        let peripheral = BluetoothAddress(value: 0x00_1B_DC_00_00_01, kind: .public)
        let passkey = Passkey(123_456)
        let legacy = exchange == .legacyJustWorks || exchange == .legacyPasskeyEntry
        let usesPasskey = exchange == .secureConnectionsPasskeyEntry || exchange == .legacyPasskeyEntry
        let identity = SMPLocalIdentity(irk: Key128(0x0102_0304_0506_0708_090A_0B0C_0D0E_0F10), address: peripheral)
        var pdus = 0, turns = 0
        let clock = ContinuousClock()
        let cpuBefore = cpuSeconds()
        let start = clock.now
        for _ in 0..<count {
            var link = SMPLoopback(
                central: SMPCentral(configuration: SMPCentralConfiguration(localAddress: central, peerAddress: peripheral,
                                                                           passkey: usesPasskey ? passkey : nil, allowLegacy: legacy)),
                peripheral: SMPPeripheral(configuration: SMPPeripheralConfiguration(
                    localAddress: peripheral, peerAddress: central, ioCapability: usesPasskey ? .displayOnly : .noInputNoOutput,
                    passkey: passkey, secureConnections: !legacy, localIdentity: identity)))
            link.run(.secure(usesPasskey ? .authenticated : .encrypted))
            if let failure = link.centralFailure { throw failure }
            guard link.centralOutcome?.bond != nil else { throw internalFailure("the benchmark pairing made no bond") }
            pdus = link.transfers.count
            turns = link.turns
        }
        let elapsed = clock.now - start
        return Result(exchange: exchange, pairings: count,
                      seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                      cpuSeconds: cpuSeconds() - cpuBefore, pdus: pdus, turns: turns)
    }

    /// User + system CPU time of this process so far.
    private static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
