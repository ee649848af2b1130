import BLE
import BLESimulator
import Foundation
import HCI
import Support
import Trace
import Workflow

/// What `provision gatt`, `read`, `write` and `subscribe` share: their options, finding the one device
/// they look at, and connecting to it, all within one deadline (`--timeout`).
///
/// DEVICE is an inventory id (with `--inventory`), a Bluetooth address (`C0:5E:00:00:00:01`) or an
/// advertised name. The device is found by scanning for it (which also tells its address type and
/// RSSI), then connected by address.
struct OneDevice {
    /// The options every one-device command takes.
    static let options: [OptionSpec] = [
        SharedOptions.adapter.required.spec,
        SharedOptions.inventory.help("find DEVICE by inventory id; with `--adapter sim`, the fleet to simulate").spec,
        OptionSpec("workflow", kind: .value("FILE"), role: .input,
                   help: "a workflow whose `vars:` declarations apply (its `secret: true` variables are hidden too)"),
        timeout.spec,
        SharedOptions.json,
        SharedOptions.trace.help("protocol trace: btsnoop for HCI (Wireshark), ATT PDUs for sim").spec,
        force,
        OptionSpec("sim-state", kind: .value("PATH"), role: .output,
                   help: "simulator: the virtual devices' state, as `provision run --sim-state` keeps it (read, and written back)"),
    ]
    static let force = SharedOptions.force(replacing: "--trace file")
    static let timeout = SharedOptions.timeout("deadline for finding, connecting and the operation (default 10s)", examples: "10s, 500ms",
                                               positive: true)

    /// What DEVICE named, once found.
    struct Found: Sendable {
        var argument: String
        /// The inventory id, when DEVICE was one (or the inventory has a device at the found address).
        var id: String?
        var address: BluetoothAddress
        var name: String?
        var rssi: Int
        var adapter: String
        /// The inventory's device, for `${…}` in a written value.
        var device: InventoryDevice?
    }

    /// Why a command stops before or while it talks to the device: the message (device text escaped
    /// when printed) and the exit status.
    struct Failure: Error {
        var message: String
        var code: Int32
        /// A usage error also prints the usage line.
        var isUsage = false
    }

    let central: any Central
    let found: Found
    let deadline: ContinuousClock.Instant
    let inventory: Inventory?
    let traces: TraceOutputs
    let output: Output
    /// The device's secrets, hidden in everything printed as `run` hides them (the inventory's
    /// `secrets:` and `--workflow`'s secret variables).
    var secrets: SecretScope

    /// Time left before the deadline (never negative).
    var remaining: Duration { max(.zero, deadline - .now) }

    /// Checks the options, opens the adapter (traced when asked) and finds DEVICE.
    static func open(_ arguments: ParsedArguments, device argument: String, context: CommandContext) async throws(Failure) -> OneDevice {
        let out = context.output
        let choice: AdapterChoice, timeout: Duration
        do throws(UsageError) {
            guard let c = try arguments.value(SharedOptions.adapter) else {
                throw UsageError("`--adapter SPEC` is required (sim, or an HCI adapter such as hci:tcp:127.0.0.1:9000)")
            }
            choice = c
            timeout = try arguments.value(Self.timeout) ?? .seconds(10)
        } catch {
            throw Failure(message: error.message, code: ExitCode.invalidInput, isUsage: true)
        }
        let spec = choice.spec
        let deadline = ContinuousClock.now + timeout

        // The workflow's declarations: its secret variables are hidden like the inventory's.
        var workflow: Workflow?
        if let path = arguments.value("workflow") {
            switch Validator.readFile(ValueSpec.resolve(path: path, baseDirectory: context.currentDirectory), shownAs: path) {
            case .success(let bytes):
                let parsed = WorkflowParser().parse(bytes: bytes, path: path)
                guard let w = parsed.workflow else {
                    let errors = parsed.diagnostics.filter { $0.severity == .error }
                    throw Failure(message: errors.map { ValidateCommand.render($0, output: out) }.joined(separator: "\n"), code: ExitCode.invalidInput)
                }
                workflow = w
            case .failure(let d):
                throw Failure(message: ValidateCommand.render(d, output: out), code: ExitCode.invalidInput)
            }
        }
        var inventory: Inventory?
        if let path = arguments.text(SharedOptions.inventory) {
            let loaded = Validator.loadInventory(path, currentDirectory: context.currentDirectory)
            guard let inv = loaded.inventory, !loaded.diagnostics.contains(where: { $0.severity == .error }) else {
                throw Failure(message: loaded.diagnostics.map { ValidateCommand.render($0, output: out) }.joined(separator: "\n"),
                              code: ExitCode.invalidInput)
            }
            inventory = workflow.map { inv.withSecrets(of: $0) } ?? inv
        } else if spec == "sim" {
            throw Failure(message: "`--adapter sim` needs `--inventory FILE` (the fleet to simulate)", code: ExitCode.invalidInput, isUsage: true)
        }
        let listed = inventory?.devices.first { $0.id == argument }

        // The trace file goes through the same checks as a run's outputs.
        var tracePath: String?
        if let trace = arguments.text(SharedOptions.trace) {
            var plan = OutputPaths(outputs: [OutputPaths.Output(option: "trace", path: trace, kind: .stream)],
                                   inputs: inventory.map { [InputFile(role: "the inventory", path: $0.path)] } ?? [],
                                   currentDirectory: context.currentDirectory)
            plan.force = arguments.flag(Self.force)
            if let problem = plan.problems().first { throw Failure(message: problem, code: ExitCode.invalidInput) }
            tracePath = plan.absolute(trace)
        }
        let traces = TraceOutputs(warn: { out.err(escaping: $0) })

        // The adapter.
        let statePath = arguments.value("sim-state").map { $0.hasPrefix("/") ? $0 : context.currentDirectory + "/" + $0 }
        if statePath != nil && spec != "sim" {
            throw Failure(message: "`--sim-state` goes with `--adapter sim`", code: ExitCode.invalidInput, isUsage: true)
        }
        var central: any Central
        do {
            if spec == "sim", let inventory {
                let sim = try AdapterFactory.simulator(inventory: inventory, seed: 1, latencyScale: 1, statePath: statePath)
                central = sim
                if let tracePath {
                    let names = Dictionary(inventory.devices.compactMap { d in sim.address(of: d.id).map { ($0, d.id) } }, uniquingKeysWith: { a, _ in a })
                    central = try traces.attTraced(sim, path: tracePath, names: names)
                }
            } else {
                var options = HCIAdapter.Options()
                if let tracePath { options.packetTap = try traces.btsnoopTap(path: tracePath) }
                central = try await HCIAdapter.open(spec: spec, options: options)
            }
        } catch let e as AdapterFactory.InputError {
            traces.close()
            throw Failure(message: e.message, code: ExitCode.invalidInput)
        } catch let e as TraceError {
            traces.close()
            throw Failure(message: "\(e)", code: ExitCode.environment)
        } catch {
            traces.close()
            throw Failure(message: "adapter `\(spec)`: \(error)", code: ExitCode.environment)
        }
        if let trace = arguments.text(SharedOptions.trace) { out.err(escaping: TraceOutputs.secretsNote([trace])) }

        // What to listen for.
        var filter = ScanFilter()
        var shown = argument
        if let listed {
            if let sim = (central as? ATTTracingCentral)?.base as? SimulatedCentral ?? central as? SimulatedCentral,
               let a = sim.address(of: listed.id) {
                filter.addresses = [a]
            } else if let a = listed.address {
                filter.addresses = [a]
            } else if let n = listed.name {
                filter.names = [n]
            } else {
                await central.close()
                traces.close()
                throw Failure(message: "inventory device `\(argument)` has neither an address nor a name to find it by", code: ExitCode.invalidInput)
            }
        } else if let a = BluetoothAddress(argument) {
            filter.addresses = [a]
        } else {
            if inventory != nil {
                shown = "`\(argument)` (no inventory device has that id; looked for as an advertised name)"
            }
            filter.names = [argument]
        }
        filter.allowDuplicates = false

        // Listen until it is heard or the deadline passes.
        let heard: Advertisement
        do {
            let central = central, scanFilter = filter
            heard = try await withDeadline(max(.zero, deadline - .now), operation: "finding \(argument)") {
                for try await ad in central.scan(scanFilter) { return ad }
                throw BLEError.adapterFailure("the scan ended")
            }
        } catch {
            await central.close()
            traces.close()
            if case BLEError.timeout = error {
                throw Failure(message: "\(shown) was not heard within \(DurationText.format(timeout))", code: ExitCode.someDevicesFailed)
            }
            throw Failure(message: "scan on `\(spec)` failed: \(error)", code: ExitCode.environment)
        }
        let byAddress = inventory?.devices.first { d in
            d.address.map { $0.sameDevice(as: heard.address) } ?? false
        }
        let device = listed ?? byAddress
        let found = Found(argument: argument, id: device?.id, address: heard.address, name: heard.name, rssi: heard.rssi,
                          adapter: central.id, device: device)
        return OneDevice(central: central, found: found, deadline: deadline, inventory: inventory, traces: traces, output: out,
                         secrets: SecretScope(inventory: inventory, workflow: workflow, device: device))
    }

    /// A session to the device (no reconnects: a one-off check reports a lost link, it does not hide it).
    func session() -> Session {
        Session(central: central, peer: found.address,
                options: SessionOptions(connect: ConnectOptions(timeout: max(.milliseconds(1), remaining)), reconnect: .disabled))
    }

    /// Closes the adapter and the trace.
    func close() async {
        await central.close()
        traces.close()
    }

    /// How the device is called in messages: `SN-0001 (C0:5E:00:00:00:01)`.
    var shown: String {
        found.id.map { "\($0) (\(found.address))" } ?? found.name.map { "\($0) (\(found.address))" } ?? found.address.description
    }

    /// The device's fields for `--json` (its id, address, name, RSSI and adapter).
    var json: [String: JSONScalar] {
        var d: [String: JSONScalar] = ["address": .string(found.address.description), "rssi": .integer(Int64(found.rssi)),
                                       "adapter": .string(found.adapter)]
        if let id = found.id { d["id"] = .string(id) }
        if let n = found.name { d["name"] = .string(n) }
        return d
    }

    /// Prints a failure and returns its exit status.
    static func report(_ failure: Failure, usage: String, output out: Output) -> Int32 {
        for line in failure.message.split(separator: "\n", omittingEmptySubsequences: false) { out.err(escaping: "error: \(line)") }
        if failure.isUsage { out.err("usage: \(usage)") }
        return failure.code
    }

    /// The exit status and message for an error from the device or the adapter: 3 when the adapter
    /// failed, 1 for anything the device did (not found, refused, timed out, dropped the link).
    static func failure(_ error: any Error, doing what: String, on device: String) -> Failure {
        if case BLEError.adapterFailure(let why) = error {
            return Failure(message: "\(device): \(what): adapter failure: \(why)", code: ExitCode.environment)
        }
        return Failure(message: "\(device): \(what): \(error)", code: ExitCode.someDevicesFailed)
    }

    /// The characteristic path from SERVICE and CHARACTERISTIC arguments, or a usage failure.
    static func path(service: String, characteristic: String) throws(Failure) -> CharacteristicPath {
        guard let s = BluetoothUUID(service) else {
            throw Failure(message: "SERVICE `\(service)` is not a UUID (180A, 0x180A, or the 128-bit form)", code: ExitCode.invalidInput, isUsage: true)
        }
        guard let c = BluetoothUUID(characteristic) else {
            throw Failure(message: "CHARACTERISTIC `\(characteristic)` is not a UUID (2A26, 0x2A26, or the 128-bit form)", code: ExitCode.invalidInput, isUsage: true)
        }
        return CharacteristicPath(service: s, characteristic: c)
    }

    /// SERVICE and CHARACTERISTIC (the 2nd and 3rd positionals) and `--as`.
    static func characteristic(_ arguments: ParsedArguments) throws(Failure) -> (CharacteristicPath, ValueFormat) {
        let args = arguments.positionals
        guard args.count >= 3 else { throw Failure(message: "SERVICE and CHARACTERISTIC are required", code: ExitCode.invalidInput, isUsage: true) }
        return (try path(service: args[1], characteristic: args[2]), try format(arguments))
    }

    /// `--as FORMAT` (default `hex`), or a usage failure with a did-you-mean hint.
    static func format(_ arguments: ParsedArguments) throws(Failure) -> ValueFormat {
        guard let name = arguments.value("as") else { return .hex }
        let (format, hint) = ValueFormat.named(name)
        guard let format else {
            throw Failure(message: "`--as \(name)` is not a format\(hint.map { " (\($0))" } ?? "") (\(ValueFormat.allCases.map(\.rawValue).joined(separator: ", ")))",
                          code: ExitCode.invalidInput, isUsage: true)
        }
        return format
    }

    /// One JSON object, keys sorted, on one line.
    static func jsonLine(_ fields: [String: JSONScalar]) -> String {
        "{" + fields.keys.sorted().map { "\(JSONString.quoted($0)):\(fields[$0]?.json ?? "null")" }.joined(separator: ",") + "}"
    }
}
