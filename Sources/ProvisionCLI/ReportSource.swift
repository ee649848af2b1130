import Engine
import Foundation
import Support
import Workflow

/// Where `provision report` gets a run report: a file (`ReportFile`) or a line database
/// (`LineReportSource`, `--line URL`). The command opens each report from its source, then streams its
/// devices (`OpenedReport.forEachDevice`) through its queries, the same way whatever it came from.
protocol ReportSource: Sendable {
    /// How messages name it (`reports/x.json`).
    var label: String { get }
    /// The report's top level (schema, run, summary), checked, and a way to stream its devices; or why
    /// it cannot be had (a message in words, for `error: LABEL: MESSAGE`).
    func open() async -> Result<OpenedReport, ReportLoadProblem>
}

/// A report whose top level has been read: its run and summary, and its devices to be streamed.
struct OpenedReport: Sendable {
    var label: String
    /// The schema it was written with (an older one is read as far as it goes).
    var schema: String
    var run: RunInfo
    var summary: Summary
    /// Streams the devices: each one decoded and checked, in order.
    let devices: any DeviceStream

    /// The schemas this version reads: its own, and version 1 (untyped captured values, no measurements),
    /// which decodes into the same records.
    static let readableSchemas = ["provision.report/1", RunReport.schemaVersion]

    /// True for reports older than typed values (`provision.report/1`): captured values are text.
    var capturesAreUntyped: Bool { run.captureTypes == nil }

    /// What to say once about an older report, or nil.
    var note: String? {
        guard schema != RunReport.schemaVersion else { return nil }
        return "note: \(label) is a \(schema) report: its captured values have no types and are read as text"
            + " (compare them with quoted text, e.g. `firmware == \"2.4.1\"`; reports of this version keep their types)"
    }

    /// The checks every device goes through (its captured values against this run's types).
    var checks: ReportChecks { ReportChecks(captureTypes: run.captureTypes) }

    /// Calls `visit` with every device, in order, each checked (`ReportChecks`, duplicate ids refused).
    /// Stops at the first device that fails a check, and when the task is cancelled (SIGINT, SIGTERM:
    /// `ReportLoadProblem.interrupted`). May be called again: the second pass reads them again.
    /// `omitting` names the parts of each record a query does not read (`ReportProjection.omitted`):
    /// they are parsed as JSON but neither decoded nor checked.
    func forEachDevice(omitting: [String: RecordDecoder.Omitted] = [:], _ visit: (DeviceRecord) throws -> Void) throws(ReportLoadProblem) {
        try devices.forEach(checks: checks, omitting: omitting) { d in
            if Task.isCancelled { throw CancellationError() }
            try visit(d)
        }
    }

    /// The whole report in memory (for the few who need every record at once: tests, `run --html`).
    func load() throws(ReportLoadProblem) -> RunReport {
        var all: [DeviceRecord] = []
        try forEachDevice { all.append($0) }
        var report = RunReport(run: run, summary: summary, devices: all)
        report.schema = schema
        return report
    }
}

/// Streams the devices of an opened report.
protocol DeviceStream: Sendable {
    func forEach(checks: ReportChecks, omitting: [String: RecordDecoder.Omitted], _ visit: (DeviceRecord) throws -> Void) throws(ReportLoadProblem)
}

/// Why a report could not be loaded, in words (not Foundation's).
struct ReportLoadProblem: Error, Sendable {
    var message: String
    /// The exit status it means (a line that cannot be reached is an environment failure).
    var code: Int32 = ExitCode.invalidInput

    /// Reading stopped because the command was interrupted (SIGINT, SIGTERM).
    static let interrupted = ReportLoadProblem(message: "interrupted", code: ExitCode.interrupted)
}

/// A report file written by `provision run` (schema `provision.report/2`, or the older `/1`), read as
/// a stream (`ReportFileReader`).
struct ReportFile: ReportSource {
    var path: String
    var currentDirectory: String

    var label: String { path }

    private var reader: ReportFileReader {
        ReportFileReader(label: path, path: path.hasPrefix("/") ? path : currentDirectory + "/" + path)
    }

    func open() async -> Result<OpenedReport, ReportLoadProblem> {
        let reader = self.reader
        if !FileManager.default.fileExists(atPath: reader.path) { return .failure(ReportLoadProblem(message: "no such file")) }
        let header: ReportFileReader.Header
        do {
            header = try reader.header()
        } catch {
            return .failure(ReportLoadProblem(message: Self.notJSON(error, reader)))
        }
        guard let schema = header.schema else {
            return .failure(ReportLoadProblem(message: "not a provision report (it has no `schema`)"))
        }
        guard OpenedReport.readableSchemas.contains(schema) else {
            return .failure(ReportLoadProblem(message: "schema `\(schema)` is not one this version of provision reads (\(OpenedReport.readableSchemas.joined(separator: ", ")))"))
        }
        let invalid = "not a valid \(schema) report: "
        guard let runBytes = header.run else { return .failure(ReportLoadProblem(message: invalid + "`run` is missing")) }
        guard let summaryBytes = header.summary else { return .failure(ReportLoadProblem(message: invalid + "`summary` is missing")) }
        guard header.devicesOffset != nil else { return .failure(ReportLoadProblem(message: invalid + "`devices` is missing")) }
        let decoder = RecordDecoder()
        func failure(_ key: String, _ at: (offset: Int, bytes: [UInt8]), _ offset: Int, _ path: [JSONTape.PathComponent], _ message: String) -> ReportLoadProblem {
            let f = ReportFileReader.Failure(message: message, offset: at.offset + offset, path: [.key(key)] + path)
            return ReportLoadProblem(message: invalid + reader.describe(f))
        }
        func decode<T: Decodable>(_ type: T.Type, _ key: String, _ at: (offset: Int, bytes: [UInt8])) -> Result<(T, JSONTape), ReportLoadProblem> {
            do {
                let tape = try JSONTape(at.bytes)
                do {
                    return .success((try decoder.decode(type, from: tape), tape))
                } catch {
                    return .failure(failure(key, at, error.offset, error.path, error.message))
                }
            } catch {
                return .failure(ReportLoadProblem(message: Self.notJSON(ReportFileReader.Failure(message: error.message, offset: at.offset + error.offset), reader)))
            }
        }
        /// `run` or `summary` decoded and checked, or why not.
        func checked<T: Decodable>(_ type: T.Type, _ key: String, _ at: (offset: Int, bytes: [UInt8]),
                                   _ check: (T) -> ReportChecks.Problem?) -> Result<T, ReportLoadProblem> {
            decode(type, key, at).flatMap { value, tape in
                guard let p = check(value) else { return .success(value) }
                return .failure(failure(key, at, tape.locate(p.path).map { tape.offset(of: $0) } ?? 0, p.path, p.message))
            }
        }
        let run: RunInfo, summary: Summary
        switch checked(RunInfo.self, "run", runBytes, ReportChecks.check) {
        case .success(let r): run = r
        case .failure(let f): return .failure(f)
        }
        switch checked(Summary.self, "summary", summaryBytes, ReportChecks.check) {
        case .success(let s): summary = s
        case .failure(let f): return .failure(f)
        }
        return .success(OpenedReport(label: path, schema: schema, run: run, summary: summary,
                                     devices: FileDevices(reader: reader, header: header, schema: schema)))
    }

    /// A syntax error: `not JSON (expected a value, found `o` at line 2, column 3)`.
    static func notJSON(_ f: ReportFileReader.Failure, _ reader: ReportFileReader) -> String {
        guard let offset = f.offset else { return f.message }
        let (line, column) = ReportFileReader.position(of: offset, in: reader.path)
        var message = f.message
        // The reader's messages for syntax say "not JSON (…)"; the others are about a report.
        if message.hasPrefix("not JSON ("), message.hasSuffix(")") {
            message = String(message.dropFirst("not JSON (".count).dropLast())
            return "not JSON (\(message) at line \(line), column \(column))"
        }
        if message.hasPrefix("not JSON") || message.hasPrefix("not a provision report") { return "\(message) (line \(line), column \(column))" }
        return "not JSON (\(message) at line \(line), column \(column))"
    }
}

/// The devices of a report file, read from it again at each pass.
private struct FileDevices: DeviceStream {
    let reader: ReportFileReader
    let header: ReportFileReader.Header
    let schema: String

    func forEach(checks: ReportChecks, omitting: [String: RecordDecoder.Omitted], _ visit: (DeviceRecord) throws -> Void) throws(ReportLoadProblem) {
        do {
            try reader.devices(header, checks: checks, omitting: omitting, visit)
        } catch let f as ReportFileReader.Failure {
            if f.message.hasPrefix("not JSON") {
                throw ReportLoadProblem(message: ReportFile.notJSON(f, reader))
            }
            throw ReportLoadProblem(message: "not a valid \(schema) report: " + reader.describe(f))
        } catch is CancellationError {
            throw .interrupted
        } catch let p as ReportLoadProblem {
            throw p
        } catch {
            throw ReportLoadProblem(message: "\(error)")
        }
    }
}

/// The devices of a report already in memory (a line's merged report), checked as a file's are: a
/// rogue row of a database is as hostile as a file.
struct MemoryDevices: DeviceStream {
    let devices: [DeviceRecord]
    /// How a device is named in a message (`line database, run R`).
    let label: String

    func forEach(checks: ReportChecks, omitting: [String: RecordDecoder.Omitted], _ visit: (DeviceRecord) throws -> Void) throws(ReportLoadProblem) {
        var ids = ReportChecks.DeviceIDs()
        for (i, d) in devices.enumerated() {
            if let p = checks.check(d) ?? ids.insert(d.id, index: i) {
                let at = RecordDecodingError.text([.key("devices"), .index(i)] + p.path)
                throw ReportLoadProblem(message: "\(label): device `\(d.id)`: `\(at)`: \(p.message)")
            }
            do {
                try visit(d)
            } catch is CancellationError {
                throw .interrupted
            } catch let p as ReportLoadProblem {
                throw p
            } catch {
                throw ReportLoadProblem(message: "\(error)")
            }
        }
    }
}
