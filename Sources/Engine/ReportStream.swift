import Dispatch
import Foundation
import Synchronization
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// A run's device records on their way to the report (and JUnit), kept on disk instead of in memory:
/// memory stays bounded by one record, however many devices the run has.
///
/// When a device ends, its record is written once as the report will hold it (pretty JSON at its
/// depth in the document) and as its JUnit test suite, to a scratch file beside the report (unlinked as
/// soon as it is open: nothing is left behind by a crash); the summary and the JUnit totals are counted
/// then. At the end the report is streamed in plan order from the scratch file, with the records that
/// were not run (carried over, needs review, skipped) encoded then: the same bytes as `RunReport.write`
/// of the whole report (`RecordGoldenTests`). Files are written on a queue of their own, never on the
/// cooperative thread pool.
final class ReportStream: Sendable {
    /// A device of the report, in plan order: one that ran (its record is in the scratch file) or a
    /// record the plan holds.
    enum Item: Sendable {
        case ran(String)
        /// Boxed: a record is some 450 bytes inline, and a run of 100,000 devices holds one item each
        /// (most of them `ran`) at its end.
        indirect case record(DeviceRecord)
    }

    /// A device that did not succeed, for the retry file.
    typealias Brief = DeviceBrief

    /// Where a device's record is in the scratch file.
    private struct Spilled {
        var offset: Int
        var reportLength: Int
        var junitLength: Int
    }

    /// What the end needs of a device that ran, besides its bytes (a device run twice — cut, then
    /// claimed again — counts once, with its last record).
    private struct Kept {
        var tally: SummaryTally.Entry
        var junit: JUnitReport.Counts
        var brief: DeviceBrief
    }

    private struct State {
        var fd: Int32
        var end = 0
        var spilled: [String: Spilled] = [:]
        var kept: [String: Kept] = [:]
        var failure: String?
    }

    private let state: Mutex<State>
    private let queue = DispatchQueue(label: "provision.report")
    private let reportPath: String
    private let junitPath: String?
    private let junit: JUnitReport

    /// Opens the scratch file beside `reportPath`. `run`: what every device's JUnit suite names (its
    /// id, station, workflow).
    init(reportPath: String, junitPath: String?, run: RunInfo) throws {
        self.reportPath = reportPath
        self.junitPath = junitPath
        junit = JUnitReport(run: run)
        let scratch = reportPath + ".records.\(getpid())"
        let fd = try FileIO.open(scratch, O_RDWR | O_CREAT | O_TRUNC)
        unlink(scratch)
        state = Mutex(State(fd: fd))
    }

    deinit {
        state.withLock { s in
            if s.fd >= 0 { _ = Glibc.close(s.fd) }
        }
    }

    /// Whether a device's record was kept.
    func ran(_ id: String) -> Bool { state.withLock { $0.kept[id] != nil } }

    /// Keeps a device's record: written here (by the caller's task) as the report holds it — from its
    /// compact JSON when the journal line already made it — then stored on the stream's queue.
    func add(_ record: DeviceRecord, compact: ArraySlice<UInt8>? = nil) {
        let report = compact.map { RecordEncoder.prettify($0, depth: 2) } ?? RecordEncoder.element(record, pretty: true, depth: 2)
        let (suite, counts) = junitPath == nil ? ("", JUnitReport.Counts()) : junit.suite(record)
        let junitBytes = Array(suite.utf8)
        state.withLock { s in
            s.kept[record.id] = Kept(tally: SummaryTally.Entry(record), junit: counts, brief: DeviceBrief(record))
        }
        let id = record.id
        queue.async { [self] in
            state.withLock { s in
                guard s.failure == nil else { return }
                do {
                    try Self.write(report + junitBytes, at: s.end, fd: s.fd)
                    s.spilled[id] = Spilled(offset: s.end, reportLength: report.count, junitLength: junitBytes.count)
                    s.end += report.count + junitBytes.count
                } catch {
                    s.failure = "\(error)"
                }
            }
        }
    }

    /// What the end of a run wrote.
    struct Finished: Sendable {
        var summary: Summary
        var notSucceeded: [DeviceBrief]
        /// Why the report (or JUnit) could not be written, if it could not.
        var error: String?
    }

    /// Writes the report (and JUnit) of `items`, in their order. `info` is the run's metadata; `wall`
    /// the run's time. The summary is counted even when the report cannot be written.
    func finish(_ items: [Item], info: RunInfo, wall: Duration) async -> Finished {
        await withCheckedContinuation { (c: CheckedContinuation<Finished, Never>) in
            queue.async { [self] in c.resume(returning: self.write(items, info: info, wall: wall)) }
        }
    }

    /// On the queue: every record is in the scratch file.
    private func write(_ items: [Item], info: RunInfo, wall: Duration) -> Finished {
        let (fd, spilled, kept, failure) = state.withLock { ($0.fd, $0.spilled, $0.kept, $0.failure) }
        // The summary, the JUnit totals and the devices that did not succeed, over the items in order.
        var tally = SummaryTally()
        var totals = JUnitReport.Counts()
        var notSucceeded: [DeviceBrief] = []
        for item in items {
            switch item {
            case .ran(let id):
                guard let k = kept[id] else { continue }
                tally.add(k.tally)
                totals += k.junit
                if k.brief.outcome != .succeeded { notSucceeded.append(k.brief) }
            case .record(let r):
                tally.add(r)
                if junitPath != nil { totals += junit.suite(r).counts }
                if r.outcome != .succeeded { notSucceeded.append(DeviceBrief(r)) }
            }
        }
        var finished = Finished(summary: tally.summary(wall: wall), notSucceeded: notSucceeded)
        do {
            if let failure { throw ReportError(description: "the report's records could not be kept: \(failure)") }
            try write(items, info: info, summary: finished.summary, totals: totals, fd: fd, spilled: spilled)
        } catch {
            finished.error = "\(error)"
        }
        return finished
    }

    private func write(_ items: [Item], info: RunInfo, summary: Summary, totals: JUnitReport.Counts, fd: Int32,
                       spilled: [String: Spilled]) throws {
        func read(_ id: String, junit: Bool) throws -> [UInt8] {
            guard let e = spilled[id] else { throw ReportError(description: "no record of device \(id)") }
            return try Self.read(fd: fd, at: junit ? e.offset + e.reportLength : e.offset, count: junit ? e.junitLength : e.reportLength)
        }
        let devices = Devices(count: items.count) { i in
            switch items[i] {
            case .ran(let id): return EncodedJSON(bytes: try read(id, junit: false))
            case .record(let r): return EncodedJSON(bytes: RecordEncoder.element(r, pretty: true, depth: 2))
            }
        }
        let report = StreamedReport(devices: devices, run: info, summary: summary)
        try AtomicFile.write(to: reportPath) { file in
            try RecordEncoder.stream(report, pretty: true, chunk: 1 << 20) { try file.write($0) }
            // A record that could not be read leaves no report in place (the encoder cannot throw).
            if let failure = devices.failure { throw failure }
            try file.write([0x0A])
        }
        if let junitPath {
            let junit = JUnitReport(run: info)
            try AtomicFile.write(to: junitPath) { file in
                var chunk = Array(junit.header(totals: totals, wallMs: summary.wallMs).utf8)
                for item in items {
                    switch item {
                    case .ran(let id): chunk += try read(id, junit: true)
                    case .record(let r): chunk += Array(junit.suite(r).xml.utf8)
                    }
                    if chunk.count >= 1 << 20 {
                        try file.write(chunk)
                        chunk.removeAll(keepingCapacity: true)
                    }
                }
                chunk += Array(JUnitReport.footer.utf8)
                try file.write(chunk)
            }
        }
    }

    private static func write(_ bytes: [UInt8], at offset: Int, fd: Int32) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { raw in pwrite(fd, raw.baseAddress.map { $0 + done }, bytes.count - done, off_t(offset + done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(path: "the report's scratch file", operation: "write", errno: errno)
            }
            done += n
        }
    }

    private static func read(fd: Int32, at offset: Int, count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = out.withUnsafeMutableBytes { raw in pread(fd, raw.baseAddress.map { $0 + done }, count - done, off_t(offset + done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(path: "the report's scratch file", operation: "read", errno: errno)
            }
            if n == 0 { throw ReportError(description: "the report's scratch file ended early") }
            done += n
        }
        return out
    }

    struct ReportError: Error, CustomStringConvertible {
        var description: String
    }

    /// The report's devices, made one at a time as they are written (the first failure is kept: the
    /// encoder cannot throw).
    private final class Devices: Encodable {
        let count: Int
        let element: (Int) throws -> EncodedJSON
        var failure: (any Error)?

        init(count: Int, element: @escaping (Int) throws -> EncodedJSON) {
            self.count = count
            self.element = element
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.unkeyedContainer()
            for i in 0..<count {
                do {
                    try c.encode(try element(i))
                } catch {
                    failure = error
                    return
                }
            }
        }
    }

    /// `RunReport`'s JSON with its devices streamed (the same keys, in the same sorted order).
    private struct StreamedReport: Encodable, SortedRecordKeys {
        let devices: Devices
        let run: RunInfo
        let summary: Summary

        enum CodingKeys: String, CodingKey {
            case devices, run, schema, summary
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(devices, forKey: .devices)
            try c.encode(run, forKey: .run)
            try c.encode(RunReport.schemaVersion, forKey: .schema)
            try c.encode(summary, forKey: .summary)
        }
    }
}

/// A device that did not succeed, as the retry file needs it.
public struct DeviceBrief: Sendable, Equatable {
    public var id: String
    public var outcome: DeviceOutcome
    public var errorKind: FailureKind?

    public init(id: String, outcome: DeviceOutcome, errorKind: FailureKind?) {
        self.id = id
        self.outcome = outcome
        self.errorKind = errorKind
    }

    public init(_ record: DeviceRecord) {
        self.init(id: record.id, outcome: record.outcome, errorKind: record.error?.kind)
    }
}
