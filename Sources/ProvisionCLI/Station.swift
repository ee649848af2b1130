import BLE
import BLESecurity
import BLESimulator
import Dispatch
import Engine
import Foundation
import LineStore
import Support
import SystemIO
import Trace
import Workflow
#if canImport(Glibc)
import Glibc
#endif

/// What a run holds open, from the first signal it catches to the last event it writes: signal
/// handling, event sinks, the bond store, the run store (a journal or the line), the traces and the
/// adapters.
///
/// `run(_:)` is the only way in: it opens them in that order, runs the body, and closes whatever was
/// opened, once each, in reverse order — whichever way the body or the opening ends (a signal, an
/// input the opening finds wrong, an adapter or a store that fails). Nothing else opens or closes them.
final class Station {
    /// Everything the station opens, decided before it opens anything.
    struct Setup {
        /// `--events`, absolute.
        var events: RunCommandOptions.EventsTarget?
        /// The progress display (not `--quiet`), on a terminal or as lines.
        var progress: Bool
        var interactive: Bool
        /// `--bonds`, absolute.
        var bonds: String?
        var store: Store
        /// Each adapter and its trace file (absolute), in `--adapter` order.
        var adapters: [(choice: AdapterChoice, trace: String?)]
        var inventory: Inventory
        var seed: UInt64
        var simLatency: Double
        /// `--sim-state`, `--sim-dump`, absolute.
        var simState: String?
        var simDump: String?
        var slots: Int?
        var verbose: Bool
        /// What the simulated radio hears (`--sim-hears`; nil: the whole inventory).
        var hears: [InventoryDevice]?
        /// `--stop-grace`, for what a first Ctrl-C promises.
        var stopGrace: Duration
        /// The workflow, absolute: the simulator's hint names its model when the inventory names none.
        var workflowPath: String? = nil
        /// `--on-device`: the command run for each finished device.
        var onDevice: OnDeviceHook.Settings? = nil
    }

    /// The run's record.
    enum Store {
        /// A journal file (absolute path): created, or resumed.
        case journal(path: String, fsync: Bool, resume: Bool)
        case line(LineRunStore.Settings)
    }

    /// Why the station stopped before its body could finish: printed once, when it happens.
    struct Failure: Error {
        var code: Int32
    }

    private let setup: Setup
    private let output: Output
    /// Stop requests from signals (and anything else that asks).
    let controller = RunController()
    let events = EventBus()
    let monitor = RunMonitor()
    private var signals: SignalWatcher?
    private(set) var bonds: BondStore?
    /// The open store with what it held when it was opened: the engine records into it.
    private(set) var opened: OpenedRunStore?
    /// The line's store, when the run is on a line (for what it wrote and refused, read after closing).
    private(set) var lineStore: LineRunStore?
    /// A journal this station created: removed on closing if nothing was ever recorded in it.
    private var createdJournal: String?
    private(set) var adapters: [any Central] = []
    /// `--on-device`'s hooks (an event sink): the runner waits for them before writing the report.
    private(set) var onDevice: OnDeviceHook?
    private let traces: TraceOutputs
    private var closed = false

    init(_ setup: Setup, output: Output) {
        self.setup = setup
        self.output = output
        traces = TraceOutputs(warn: { output.err(escaping: $0) })
    }

    /// Opens everything, runs `body`, closes everything: the station's one way in and out.
    func run<T>(_ body: (Station) async throws(Failure) -> T) async -> Result<T, Failure> {
        precondition(!closed, "a station runs once")
        let result: Result<T, Failure>
        do throws(Failure) {
            try await open()
            result = .success(try await body(self))
        } catch {
            result = .failure(error)
        }
        await close()
        return result
    }

    // MARK: Opening

    private func open() async throws(Failure) {
        signals = SignalWatcher(controller: controller, output: output, grace: setup.stopGrace)
        try openEventSinks()
        try checkStop()
        try openBonds()
        try await openStore()
        try checkStop()
        try await openAdapters()
        await recordIdentities()
        try checkStop()
    }

    /// The line learns who the station is on each adapter (`line status`); not knowing it stops nothing.
    private func recordIdentities() async {
        guard let lineStore else { return }
        do {
            try await lineStore.recordIdentities(adapters.map { $0.stationIdentity?.description ?? "" })
        } catch {
            output.err(escaping: "warning: the line did not take the station's identities: \(LineOption.describe(error).message)")
        }
    }

    /// A stop requested while opening ends the opening: nothing has been sent to any device yet.
    private func checkStop() throws(Failure) {
        guard controller.stopRequests > 0 else { return }
        output.err("stopped before the run started: nothing was sent to any device")
        throw Failure(code: ExitCode.interrupted)
    }

    private func openEventSinks() throws(Failure) {
        switch setup.events {
        case .standardOutput?:
            events.add(StandardOutputEventSink(output: output))
        case .file(let path)?:
            do { events.add(try JSONLinesEventSink(path: path)) } catch {
                output.err("error: cannot write events to \(path): \(error)")
                throw Failure(code: ExitCode.environment)
            }
        case nil:
            break
        }
        if let settings = setup.onDevice {
            let controller = self.controller
            let hook = OnDeviceHook(settings, output: output, stopRequested: { controller.stopRequests > 0 })
            onDevice = hook
            events.add(hook)
        }
        if setup.progress {
            let monitor = self.monitor, controller = self.controller
            events.add(ProgressDisplay(output: output, interactive: setup.interactive, color: output.colorEnabled,
                                       slots: { monitor.slotUsage() }, operatorStopped: { controller.stopRequests > 0 }))
        }
    }

    /// The bond store: read, and its permissions checked, before any adapter opens.
    private func openBonds() throws(Failure) {
        guard let path = setup.bonds else { return }
        do {
            bonds = try BondStore(path: path)
        } catch {
            output.err(escaping: "error: \(error)")
            if case .io = error.kind { throw Failure(code: ExitCode.environment) }
            throw Failure(code: ExitCode.invalidInput)
        }
    }

    /// The run store, opened once: a journal, or the line (a station that cannot join it touches no radio).
    private func openStore() async throws(Failure) {
        switch setup.store {
        case .journal(let path, let fsync, let resume):
            if !FileManager.default.fileExists(atPath: path) { createdJournal = path }
            do {
                // A journal that cannot be opened is closed again by `fileJournal` itself.
                opened = try await OpenedRunStore.fileJournal(path: path, fsync: fsync, resume: resume)
            } catch {
                output.err(escaping: "error: \(error)")
                throw Failure(code: ExitCode.invalidInput)
            }
        case .line(let settings):
            let line = LineRunStore(settings)
            lineStore = line
            do {
                opened = OpenedRunStore(store: line, mode: .start, contents: try await line.open(.start))
            } catch {
                await line.close()
                let (message, code) = LineOption.describe(error)
                output.err(escaping: "error: cannot join the line: \(message); nothing was touched")
                throw Failure(code: code)
            }
        }
    }

    /// The adapters, each with its trace when asked.
    private func openAdapters() async throws(Failure) {
        for (choice, tracePath) in setup.adapters {
            do {
                let tap = try tracePath.map { p throws(TraceError) in choice.isSimulator ? nil : try traces.btsnoopTap(path: p) } ?? nil
                let central = try await AdapterFactory.open(choice, inventory: setup.inventory, seed: setup.seed, latencyScale: setup.simLatency,
                                                            statePath: setup.simState, slots: setup.slots, bonds: bonds,
                                                            verbose: setup.verbose, packetTap: tap, hears: setup.hears, workflowPath: setup.workflowPath)
                adapters.append(central)
                if let tracePath, let sim = central as? SimulatedCentral {
                    let names = Dictionary(setup.inventory.devices.compactMap { d in sim.address(of: d.id).map { ($0, d.id) } },
                                           uniquingKeysWith: { a, _ in a })
                    adapters[adapters.count - 1] = try traces.attTraced(sim, path: tracePath, names: names)
                }
            } catch let e as TraceError {
                output.err(escaping: "error: \(e)")
                throw Failure(code: ExitCode.environment)
            } catch let e as AdapterFactory.InputError {
                output.err("error: \(e.message)")
                throw Failure(code: ExitCode.invalidInput)
            } catch {
                output.err(escaping: "error: adapter `\(choice.spec)`: \(error)")
                throw Failure(code: ExitCode.environment)
            }
        }
    }

    // MARK: Closing

    /// Closes what was opened, in reverse order, once: the adapters (a simulator's dump written first),
    /// the traces (after the adapters, so their last packets are in), the store (the line left), the
    /// event sinks (flushed and closed, after everything that emits; `--on-device`'s hooks were waited
    /// for by the runner before it wrote the report, so closing them only says their count), the signal
    /// handling.
    private func close() async {
        guard !closed else { return }
        closed = true
        if let path = setup.simDump {
            for case let sim as SimulatedCentral in adapters.map({ ($0 as? ATTTracingCentral)?.base ?? $0 }) {
                do {
                    try AtomicFile.write(Data(await sim.dump().json().utf8), to: path, mode: 0o600)
                } catch {
                    output.err(escaping: "error: cannot write the simulator dump: \(error)")
                }
            }
        }
        for c in adapters { await c.close() }
        traces.close()
        if let store = opened?.store { await store.close() }
        if let path = createdJournal, let attributes = try? FileManager.default.attributesOfItem(atPath: path),
           (attributes[.size] as? Int) == 0 {
            // Nothing was ever recorded: the journal goes as it came, leaving no empty file behind.
            try? FileManager.default.removeItem(atPath: path)
        }
        // The bond store has nothing to close: every bond is on disk when its `save` returns.
        await events.finish()
        signals?.cancel()
    }
}

/// Turns SIGINT (Ctrl-C), SIGTERM and SIGHUP into stop requests: the first stops new work, the second
/// cuts. It says so once each: this is the one place a stop the operator asked for is acknowledged
/// (the progress display only reports stops the run decided itself).
final class SignalWatcher {
    private let sources: [any DispatchSourceSignal]

    init(controller: RunController, output: Output, grace: Duration) {
        var sources: [any DispatchSourceSignal] = []
        // SIGHUP: the terminal or SSH session is gone; stop as for Ctrl-C (the messages go nowhere).
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                let n = controller.requestStop()
                if n == 1 {
                    output.err("\nstopping: no new devices; in-flight devices may finish for up to \(DurationText.format(grace)) (press Ctrl-C again to cut them)")
                } else if n == 2 {
                    output.err("\ncutting in-flight devices; they will be marked interrupted")
                }
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    func cancel() {
        for s in sources { s.cancel() }
    }
}
