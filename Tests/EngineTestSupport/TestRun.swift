import BLE
import Engine
import Workflow

/// A run's options as the tests give them: the engine's (`RunOptions`, reached through this value's
/// members) and what the station decides around a run — the file journal to open at `journalPath`, as a
/// resume or not, or a store of the test's own (`store`).
@dynamicMemberLookup
public struct TestRunOptions: Sendable {
    public var run: RunOptions
    public var journalPath: String
    public var fsync = false
    public var resume = false
    /// A store to run on instead of the file journal.
    public var store: (any RunStore)?

    public init(journalPath: String, reportPath: String) {
        self.journalPath = journalPath
        run = RunOptions(reportPath: reportPath)
    }

    public subscript<T>(dynamicMember path: WritableKeyPath<RunOptions, T>) -> T {
        get { run[keyPath: path] }
        set { run[keyPath: path] = newValue }
    }
}

extension Runner {
    /// What the station does around a run, for tests: opens the store once (the file journal at
    /// `options.journalPath`, or `options.store`), runs, and closes it once, whatever happened. Returns
    /// the report as the run wrote it to `options.reportPath` (read back: the tests check the file).
    public static func run(workflow: Workflow, inventory: Inventory, devices: [InventoryDevice], adapters: [any Central],
                           options: TestRunOptions, events: EventBus = EventBus(), controller: RunController = RunController(),
                           monitor: RunMonitor? = nil) async throws -> RunReport {
        let mode: RunStoreMode = options.resume ? .resume : .start
        let opened: OpenedRunStore
        if let store = options.store {
            opened = try await OpenedRunStore.open(store, mode)
        } else {
            opened = try await OpenedRunStore.fileJournal(path: options.journalPath, fsync: options.fsync, resume: options.resume)
        }
        do {
            let result = try await run(workflow: workflow, inventory: inventory, devices: devices, adapters: adapters, store: opened,
                                       options: options.run, events: events, controller: controller, monitor: monitor)
            await opened.store.close()
            let report = try RunReport.read(from: options.reportPath)
            guard report.run == result.run, report.summary == result.summary else {
                throw TestLineError(message: "the run's result is not what its report says: \(result.summary) / \(report.summary)")
            }
            return report
        } catch {
            await opened.store.close()
            throw error
        }
    }
}

/// A time written in a test as the records write it (`2026-11-30T05:00:00.000Z`); a typo stops the test.
public func wallTime(_ iso: String) -> WallTime {
    guard let t = WallTime(iso: iso) else { preconditionFailure("not an ISO 8601 time: \(iso)") }
    return t
}

extension TestLine {
    /// A journal as an earlier run of `loaded` left it, closed again before a run resumes it: its header
    /// (run `run-x`, written `at`), then `lines`.
    public static func writeJournal(_ path: String, for loaded: Loaded, at: WallTime, _ lines: [JournalLine]) async throws {
        let journal = try FileJournal(path: path, fsync: false)
        _ = try await journal.open(.start)
        let header = JournalHeader(runId: "run-x", workflow: FileRef(name: loaded.workflow.name, path: loaded.workflow.path, sha256: loaded.workflow.sha256),
                                   inventory: FileRef(path: loaded.inventory.path, sha256: loaded.inventory.sha256), adapters: ["sim"],
                                   options: [:], started: at, toolVersion: "test", resumed: false)
        try await journal.record(.header(header, at: at))
        for line in lines { try await journal.record(line) }
        await journal.close()
    }
}
