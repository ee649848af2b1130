import BLE
import Foundation

/// A Bumble fleet (Tests/Fixtures/bumble_fleet.py) launched for one test and torn down after it.
public final class BumbleFleet: Sendable {
    public struct Device: Sendable, Decodable {
        public var id: String
        public var name: String
        public var address: String
        public var state_file: String
        public var faults: [String]
        public var firmware: String
        /// `uuid128` when the device declares its SIG UUIDs in 128-bit form.
        public var quirks: [String]?
        public var adv_interval_ms: Double?
        public var ack_loss_rate: Double?
        /// What FFF1 and FFF4 need: `none`, `encrypted` (Just Works) or `authenticated` (Passkey Entry).
        public var security: String?
        /// The passkey the device displays when it pairs (unless it has the `wrong_passkey` fault).
        public var passkey: String?
    }
    /// A Zephyr-like MCUmgr peripheral with MCUboot (Tests/Fixtures/smp_device.py; `--smp-devices N`).
    public struct SMPDevice: Sendable, Decodable {
        public var id: String
        public var name: String
        public var address: String
        public var state_file: String
        /// Version and SHA-256 TLV (hex) of the image it runs when the fleet starts.
        public var version: String
        public var hash: String
        public var buf_size: Int
        public var buf_count: Int
        public var reassembly: Bool
        public var params: Bool
        public var smp_v2: Bool
        public var faults: [String]
    }
    /// The fleet's radio timing, as it reports it.
    public struct Radio: Sendable, Decodable, Equatable {
        public var adv_interval_ms: Double
        /// Low and high end of the per-PDU link delay each way (equal for a fixed delay; 0 = instant).
        public var link_latency_ms: [Double]
        public var seed: Int
    }
    /// What every station controller of the fleet does, as it reports it.
    public struct Stations: Sendable, Decodable, Equatable {
        public var fal_size: Int
        public var max_links: Int?
        public var max_links_at: String
        public var scan_while_initiating: Bool
    }
    private struct Ready: Sendable, Decodable {
        var event: String
        var port: Int
        var ports: [Int]
        var devices: [Device]
        var smp_devices: [SMPDevice]?
        var radio: Radio?
        var stations: Stations?
    }

    /// How a fleet is started: its devices and their faults, the radio's timing and what its station
    /// controllers do (Tests/Fixtures/bumble_fleet.py --help). The defaults are the fixture's: devices
    /// advertising every 20 ms on an instant link, station controllers with an 8-entry Filter Accept
    /// List, no link limit, scanning allowed while initiating.
    public struct Options: Sendable {
        /// Where a connection beyond `maxLinks` is refused with Connection Limit Exceeded (0x09).
        public enum LinkRefusal: String, Sendable {
            /// In the Command Status of LE Create Connection.
            case create
            /// In the LE (Enhanced) Connection Complete, after the create was accepted.
            case complete
        }
        /// A firmware quirk of every device.
        public enum Quirk: String, Sendable {
            /// Services and characteristics (180A, 2A25, FFF0, ...) declared in 128-bit form.
            case uuid128
        }

        /// Devices SN-0001… (addresses F0:00:00:00:00:01…).
        public var devices: Int
        /// Station controllers, one TCP port each (`ports`).
        public var stations: Int
        /// 1-based indices of devices that never advertise.
        public var silent: [Int]
        /// Indices of devices that lose every ack (the command still runs).
        public var ackLoss: [Int]
        /// Indices of devices running firmware 1.9.0.
        public var oldFirmware: [Int]
        /// Indices of devices that drop the link instead of committing.
        public var dropOnCommit: [Int]
        /// Every device loses each ack with this probability (seeded).
        public var ackLossRate: Double?
        public var quirks: [Quirk]
        /// Advertising interval of every device (each event adds 0–10 ms advDelay). Default 20 ms.
        public var advertisingInterval: Duration?
        /// Delay of every LL PDU each way, fixed (`x...x`) or drawn per PDU from the range. Default none.
        public var linkLatency: ClosedRange<Duration>?
        /// Seed of advDelay, link delays, ack delays and ack losses. Default 1.
        public var seed: Int?
        /// Filter Accept List entries of each station controller. Default 8.
        public var filterAcceptListSize: Int?
        /// Links a station controller holds at once. Default: no limit.
        public var maxLinks: Int?
        public var refuseLinksAt: LinkRefusal
        /// False: LE Read Supported States says scanning while initiating is not supported, and the
        /// controller refuses the combination with Command Disallowed.
        public var scanWhileInitiating: Bool
        /// What every device's FFF1 and FFF4 need (bumble_fleet.py `--security`). Default none.
        public var security: Security
        /// Indices of devices that display another passkey than theirs, that forget every bond once it
        /// is made, and that send a Security Request when a central connects.
        public var wrongPasskey: [Int]
        public var forgetBond: [Int]
        public var securityRequest: [Int]
        /// Passed to bumble_fleet.py as they are, after the others.
        public var extraArguments: [String]

        /// What a device's provisioning characteristics need.
        public enum Security: String, Sendable {
            case none, encrypted, authenticated
        }

        public init(devices: Int = 4, stations: Int = 1, silent: [Int] = [], ackLoss: [Int] = [], oldFirmware: [Int] = [],
                    dropOnCommit: [Int] = [], ackLossRate: Double? = nil, quirks: [Quirk] = [],
                    advertisingInterval: Duration? = nil, linkLatency: ClosedRange<Duration>? = nil, seed: Int? = nil,
                    filterAcceptListSize: Int? = nil, maxLinks: Int? = nil, refuseLinksAt: LinkRefusal = .create,
                    scanWhileInitiating: Bool = true, security: Security = .none, wrongPasskey: [Int] = [],
                    forgetBond: [Int] = [], securityRequest: [Int] = [], extraArguments: [String] = []) {
            self.devices = devices
            self.stations = stations
            self.silent = silent
            self.ackLoss = ackLoss
            self.oldFirmware = oldFirmware
            self.dropOnCommit = dropOnCommit
            self.ackLossRate = ackLossRate
            self.quirks = quirks
            self.advertisingInterval = advertisingInterval
            self.linkLatency = linkLatency
            self.seed = seed
            self.filterAcceptListSize = filterAcceptListSize
            self.maxLinks = maxLinks
            self.refuseLinksAt = refuseLinksAt
            self.scanWhileInitiating = scanWhileInitiating
            self.security = security
            self.wrongPasskey = wrongPasskey
            self.forgetBond = forgetBond
            self.securityRequest = securityRequest
            self.extraArguments = extraArguments
        }

        /// The bumble_fleet.py arguments for these options.
        public var arguments: [String] {
            var a = ["--devices", "\(devices)", "--stations", "\(stations)"]
            func indices(_ flag: String, _ list: [Int]) {
                if !list.isEmpty { a += [flag, list.map(String.init).joined(separator: ",")] }
            }
            indices("--silent", silent)
            indices("--ack-loss", ackLoss)
            indices("--old-firmware", oldFirmware)
            indices("--drop-on-commit", dropOnCommit)
            if let ackLossRate { a += ["--ack-loss-rate", "\(ackLossRate)"] }
            for quirk in quirks { a += ["--quirk", quirk.rawValue] }
            if let advertisingInterval { a += ["--adv-interval", Self.text(advertisingInterval)] }
            if let linkLatency {
                let low = Self.text(linkLatency.lowerBound), high = Self.text(linkLatency.upperBound)
                a += ["--link-latency", low == high ? low : "\(low)-\(high)"]
            }
            if let seed { a += ["--seed", "\(seed)"] }
            if let filterAcceptListSize { a += ["--fal-size", "\(filterAcceptListSize)"] }
            if let maxLinks { a += ["--max-links", "\(maxLinks)", "--max-links-at", refuseLinksAt.rawValue] }
            if !scanWhileInitiating { a.append("--no-scan-while-initiating") }
            if security != .none { a += ["--security", security.rawValue] }
            indices("--wrong-passkey", wrongPasskey)
            indices("--forget-bond", forgetBond)
            indices("--security-request", securityRequest)
            return a + extraArguments
        }

        /// A duration as bumble_fleet.py reads it, in milliseconds: `7.5ms`, `1000ms`.
        static func text(_ d: Duration) -> String {
            let ms = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
            return ms == ms.rounded() ? "\(Int(ms))ms" : "\(ms)ms"
        }
    }

    public let port: Int
    /// One per station controller (`--stations`); `port` is the first.
    public let ports: [Int]
    public let devices: [Device]
    /// Its SMP devices (`--smp-devices`, `--smp-config`), whose state files `state(_:)` reads too.
    public let smpDevices: [SMPDevice]
    /// The radio timing the fleet runs with.
    public let radio: Radio?
    /// What its station controllers do.
    public let stations: Stations?
    public let stateDirectory: URL
    private let process: Process
    private let exited: ExitWaiter
    private let stdin: Pipe

    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The Python with Bumble: `PROVISION_PYTHON`, else `<package root>/.venv/bin/python3`.
    public static let python: String? = {
        if let p = ProcessInfo.processInfo.environment["PROVISION_PYTHON"], !p.isEmpty,
           FileManager.default.isExecutableFile(atPath: p) { return p }
        let venv = packageRoot.appendingPathComponent(".venv/bin/python3").path
        return FileManager.default.isExecutableFile(atPath: venv) ? venv : nil
    }()

    public static let available = python != nil

    public var spec: String { "hci:tcp:127.0.0.1:\(port)" }

    /// Starts a fleet with `options` and waits (with a deadline) for its ready line.
    public static func start(_ options: Options, timeout: Duration = .seconds(30)) async throws -> BumbleFleet {
        try await start(arguments: options.arguments, timeout: timeout)
    }

    /// Starts the fleet and waits (with a deadline) for its ready line.
    public static func start(arguments: [String] = ["--devices", "4"], timeout: Duration = .seconds(30)) async throws -> BumbleFleet {
        guard let python else { throw BLEError.adapterFailure("no Python with Bumble (set PROVISION_PYTHON)") }
        let stateDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("bumble-fleet-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [packageRoot.appendingPathComponent("Tests/Fixtures/bumble_fleet.py").path,
                             "--port", "0", "--state-dir", stateDirectory.path, "--exit-on-stdin-eof"] + arguments
        // The fleet stops when this pipe closes, which the kernel does if the test process dies.
        let stdin = Pipe()
        process.standardInput = stdin
        let stdout = Pipe()
        process.standardOutput = stdout
        let (lines, continuation) = AsyncStream<Data>.makeStream()
        stdout.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                continuation.finish()
            } else {
                continuation.yield(data)
            }
        }
        let exited = ExitWaiter()
        process.terminationHandler = { p in exited.exited(p.terminationStatus) }
        try process.run()
        do {
            let ready: Ready? = try await withDeadline(timeout, operation: "Bumble fleet start") {
                var buffer = Data()
                for await chunk in lines {
                    buffer.append(chunk)
                    if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                        return try JSONDecoder().decode(Ready.self, from: buffer[..<newline])
                    }
                }
                return nil
            }
            guard let ready else { throw BLEError.timeout(operation: "Bumble fleet start", limit: timeout) }
            return BumbleFleet(ready: ready, stateDirectory: stateDirectory, process: process, exited: exited, stdin: stdin)
        } catch {
            process.terminate()
            throw error
        }
    }

    private init(ready: Ready, stateDirectory: URL, process: Process, exited: ExitWaiter, stdin: Pipe) {
        self.exited = exited
        self.stdin = stdin
        self.port = ready.port
        self.ports = ready.ports
        self.devices = ready.devices
        self.smpDevices = ready.smp_devices ?? []
        self.radio = ready.radio
        self.stations = ready.stations
        self.stateDirectory = stateDirectory
        self.process = process
    }

    /// The device-side state a peripheral last wrote.
    public func state(_ id: String) throws -> [String: Any] {
        let url = stateDirectory.appendingPathComponent("\(id).json")
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
        return object as? [String: Any] ?? [:]
    }

    /// Runs a Python test module of Tests/Fixtures (`python -m unittest MODULE`) to its end, within
    /// `limit`; returns its exit status and everything it printed.
    public static func runFixtureTests(_ module: String, limit: Duration = .seconds(180)) async throws -> (status: Int32, output: String) {
        guard let python else { throw BLEError.adapterFailure("no Python with Bumble (set PROVISION_PYTHON)") }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("\(module)-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let output = try FileHandle(forWritingTo: log)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-m", "unittest", module]
        process.currentDirectoryURL = packageRoot.appendingPathComponent("Tests/Fixtures")
        process.standardOutput = output
        process.standardError = output
        let (exits, exited) = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { exited.yield($0.terminationStatus); exited.finish() }
        try process.run()
        let status: Int32
        do {
            status = try await withDeadline(limit, operation: "the fixture's Python tests (\(module))") {
                for await status in exits { return status }
                return -1
            }
        } catch {
            process.terminate()
            throw error
        }
        try output.close()
        return (status, String(decoding: try Data(contentsOf: log), as: UTF8.self))
    }

    /// Stops the fleet and waits until it has exited: SIGTERM, then SIGKILL if it lingers (5 s).
    public func stop() async {
        guard process.isRunning else { return }
        process.terminate()
        if await exited.wait(timeout: .seconds(5)) == nil {
            kill(process.processIdentifier, SIGKILL)
        }
    }

    // A fleet not stopped by then ends on SIGTERM, or when its standard input closes with this object.
    deinit { if process.isRunning { process.terminate() } }

    /// Runs `body` with a fresh fleet started with `options` and always stops it.
    public static func with<T>(_ options: Options, _ body: (BumbleFleet) async throws -> T) async throws -> T {
        try await with(options.arguments, body)
    }

    /// Runs `body` with a fresh fleet and always stops it.
    public static func with<T>(_ arguments: [String] = ["--devices", "4"],
                        _ body: (BumbleFleet) async throws -> T) async throws -> T {
        try await scoped(try await start(arguments: arguments), stop: { await $0.stop() }, body)
    }
}
