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
/// or cannot start is recorded — a warning naming the device and why, and the count at the end — and
/// never stops the run. An event sink of the station: it sees each `device_finished` with its record.
final class OnDeviceHook: RunEventSink {
    struct Settings: Sendable {
        var command: String
        var timeout: Duration
    }

    /// How one hook ended (nil `failure`: it exited 0).
    struct Outcome: Sendable, Equatable {
        var device: String
        var failure: String?
    }

    private let settings: Settings
    private let output: Output
    private let queue: AsyncStream<DeviceRecord>.Continuation
    private let worker: Task<Void, Never>
    private let outcomes = Outcomes()

    /// The hooks' outcomes so far, shared by the worker and the sink.
    private final class Outcomes: Sendable {
        let list = Mutex<[Outcome]>([])
    }

    init(_ settings: Settings, output: Output) {
        self.settings = settings
        self.output = output
        let (stream, continuation) = AsyncStream.makeStream(of: DeviceRecord.self)
        queue = continuation
        let outcomes = self.outcomes
        worker = Task {
            for await record in stream {
                let failure = await Self.run(settings, record: record)
                if let failure {
                    output.err(escaping: "warning: --on-device for \(record.id) failed: \(failure) (the run goes on)")
                }
                outcomes.list.withLock { $0.append(Outcome(device: record.id, failure: failure)) }
            }
        }
    }

    func emit(_ event: RunEvent) {
        guard case .deviceFinished(let f) = event.kind, let record = f.record,
              record.outcome == .succeeded || record.outcome == .failed else { return }
        queue.yield(record)
    }

    /// Waits for the hooks still to run (each bounded by its timeout), then says how they went.
    func finish() async {
        queue.finish()
        await worker.value
        let all = outcomes.list.withLock { $0 }
        guard !all.isEmpty else { return }
        let failed = all.filter { $0.failure != nil }
        output.err("on-device: \(all.count) run, \(failed.count) failed"
                   + (failed.isEmpty ? "" : " (" + failed.map(\.device).joined(separator: ", ") + ")"))
    }

    /// What happened to each device's hook, in order.
    var results: [Outcome] { outcomes.list.withLock { $0 } }

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
