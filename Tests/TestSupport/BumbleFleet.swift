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
    }
    private struct Ready: Sendable, Decodable {
        var event: String
        var port: Int
        var ports: [Int]
        var devices: [Device]
    }

    public let port: Int
    /// One per station controller (`--stations`); `port` is the first.
    public let ports: [Int]
    public let devices: [Device]
    public let stateDirectory: URL
    private let process: Process
    private let exited: DispatchSemaphore
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
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
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
            return BumbleFleet(port: ready.port, ports: ready.ports, devices: ready.devices, stateDirectory: stateDirectory, process: process,
                               exited: exited, stdin: stdin)
        } catch {
            process.terminate()
            throw error
        }
    }

    private init(port: Int, ports: [Int], devices: [Device], stateDirectory: URL, process: Process, exited: DispatchSemaphore, stdin: Pipe) {
        self.exited = exited
        self.stdin = stdin
        self.port = port
        self.ports = ports
        self.devices = devices
        self.stateDirectory = stateDirectory
        self.process = process
    }

    /// The device-side state a peripheral last wrote.
    public func state(_ id: String) throws -> [String: Any] {
        let url = stateDirectory.appendingPathComponent("\(id).json")
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
        return object as? [String: Any] ?? [:]
    }

    /// Stops the fleet: SIGTERM, then SIGKILL if it lingers.
    public func stop() {
        guard process.isRunning else { return }
        process.terminate()
        if exited.wait(timeout: .now() + 5) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
        }
    }

    deinit { stop() }

    /// Runs `body` with a fresh fleet and always stops it.
    public static func with<T>(_ arguments: [String] = ["--devices", "4"],
                        _ body: (BumbleFleet) async throws -> T) async throws -> T {
        let fleet = try await start(arguments: arguments)
        defer { fleet.stop() }
        return try await body(fleet)
    }
}
