import AsyncSupport
import Dispatch
import Engine
import Foundation
import Support
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `provision run --on-device CMD`: a command run for every device that finished (succeeded or failed),
/// for a label printer or an MES — `/bin/sh -c CMD` with the device's record as JSON on standard input
/// and `PROVISION_DEVICE`, `PROVISION_OUTCOME` in its environment. One at a time, in the order devices
/// finish, beside the line (never in its way): a hook that fails, hangs past `timeout` (it is stopped)
/// or cannot start is recorded — in the report (`run.on_device`), a warning naming the device and why,
/// and the count at the end — and never stops the run. An event sink of the station: it sees each
/// `device_finished` with its record; the runner waits for it (`settle`) before writing the report.
///
/// Once the run's devices are done, the hooks still waiting all run, each bounded by its timeout —
/// unless the operator stopped the run (Ctrl-C): then those not started yet are not started (the
/// report lists them as not run), so the report waits at most for the one running.
final class OnDeviceHook: DeviceHooks {
    struct Settings: Sendable {
        var command: String
        var timeout: Duration
    }

    private let settings: Settings
    private let output: Output
    private let queue: AsyncStream<DeviceRecord>.Continuation
    private let worker: Task<Void, Never>
    private let state: Shared

    /// What the hooks did so far, shared by the worker and the sink.
    private final class Shared: Sendable {
        struct State {
            var info: OnDeviceInfo
            /// The run's devices are done (`settle`).
            var settling = false
            /// The count was said (`finish`).
            var said = false
        }

        let state: Mutex<State>

        init(_ info: OnDeviceInfo) { state = Mutex(State(info: info)) }
    }

    /// `stopRequested`: whether the operator has stopped the run.
    init(_ settings: Settings, output: Output, stopRequested: @escaping @Sendable () -> Bool) {
        self.settings = settings
        self.output = output
        let (stream, continuation) = AsyncStream.makeStream(of: DeviceRecord.self)
        queue = continuation
        let state = Shared(OnDeviceInfo(command: settings.command, timeoutMs: settings.timeout.milliseconds))
        self.state = state
        worker = Task {
            for await record in stream {
                if state.state.withLock({ $0.settling }), stopRequested() {
                    state.state.withLock { $0.info.notRun = ($0.info.notRun ?? []) + [record.id] }
                    continue
                }
                let failure = await Self.run(settings, record: record)
                if let failure {
                    output.err(escaping: "warning: --on-device for \(record.id) failed: \(failure) (the run goes on)")
                }
                state.state.withLock { s in
                    s.info.run += 1
                    if let failure { s.info.failed.append(OnDeviceInfo.Failure(device: record.id, message: failure)) }
                }
            }
        }
    }

    func emit(_ event: RunEvent) {
        guard case .deviceFinished(let f) = event.kind, let record = f.record,
              record.outcome == .succeeded || record.outcome == .failed else { return }
        queue.yield(record)
    }

    /// Waits for the hooks still to run (each bounded by its timeout; none started once the operator
    /// has stopped the run) and says what they did. Safe to call again: later calls wait for nothing.
    func settle() async -> OnDeviceInfo {
        state.state.withLock { $0.settling = true }
        queue.finish()
        await worker.value
        return state.state.withLock { $0.info }
    }

    /// Settles, then says how the hooks went, once.
    func finish() async {
        let info = await settle()
        let say = state.state.withLock { s in
            defer { s.said = true }
            return !s.said
        }
        guard say, info.run > 0 || info.notRun != nil else { return }
        output.err(escaping: "on-device: \(info.sentence)")
    }

    /// Runs the hook for one record; nil when it exited 0, else why not.
    static func run(_ settings: Settings, record: DeviceRecord) async -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", settings.command]
        var environment = ProcessInfo.processInfo.environment
        environment["PROVISION_DEVICE"] = record.id
        environment["PROVISION_OUTCOME"] = record.outcome.rawValue
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        // The hook's own output goes to standard error: standard output may carry the run's events.
        process.standardOutput = FileHandle.standardError
        let exited = OneShot<Int32>()
        process.terminationHandler = { p in exited.fulfill(p.terminationStatus) }
        do {
            try process.run()
        } catch {
            return "cannot start /bin/sh: \(error.localizedDescription)"
        }
        // The record, written off the cooperative pool (a hook that does not read its input blocks the
        // write until it exits; the write then fails, which is not the hook's failure).
        let json = Data(RecordEncoder.compact(record)) + Data([0x0A])
        let writer = input.fileHandleForWriting
        DispatchQueue.global().async {
            try? writer.write(contentsOf: json)
            try? writer.close()
        }
        if case .finished(.success(let status?)) = await withTimeLimit(settings.timeout, { await exited.wait() }) {
            return status == 0 ? nil : (process.terminationReason == .uncaughtSignal ? "killed by signal \(status)" : "exit status \(status)")
        }
        // Past its time: stopped (SIGTERM, then SIGKILL if it does not go).
        let pid = process.processIdentifier
        process.terminate()
        if case .finished(.success(_?)) = await withTimeLimit(.seconds(2), { await exited.wait() }) {} else { kill(pid, SIGKILL) }
        return "did not finish within \(DurationText.format(settings.timeout)) (stopped)"
    }
}
