import Engine
import Foundation
import Workflow

/// Where `provision report` gets a run report. A file today (`ReportFile`); another source (a line
/// database, `--line URL`) plugs in here: the command loads each report from its source, then filters,
/// groups, compares and renders the same way whatever it came from.
protocol ReportSource: Sendable {
    /// How messages name it (`reports/x.json`).
    var label: String { get }
    /// The report, or why it cannot be had (a message in words, for `error: LABEL: MESSAGE`).
    func load() async -> Result<LoadedReport, ReportLoadProblem>
}

/// A report as loaded, with what the reader should know about it.
struct LoadedReport: Sendable {
    var report: RunReport
    /// The source's label.
    var label: String
    /// The schema it was written with (an older one is read as far as it goes).
    var schema: String

    /// True for reports older than typed values (`provision.report/1`): captured values are text.
    var capturesAreUntyped: Bool { report.run.captureTypes == nil }

    /// What to say once about an older report, or nil.
    var note: String? {
        guard schema != RunReport.schemaVersion else { return nil }
        return "note: \(label) is a \(schema) report: its captured values have no types and are read as text"
            + " (compare them with quoted text, e.g. `firmware == \"2.4.1\"`; reports of this version keep their types)"
    }
}

/// Why a report could not be loaded, in words (not Foundation's).
struct ReportLoadProblem: Error, Sendable {
    var message: String
    /// The exit status it means (a line that cannot be reached is an environment failure).
    var code: Int32 = ExitCode.invalidInput
}

/// A report file written by `provision run` (schema `provision.report/2`, or the older `/1`).
struct ReportFile: ReportSource {
    var path: String
    var currentDirectory: String

    var label: String { path }

    /// The schemas this version reads: its own, and version 1 (untyped captured values, no measurements),
    /// which decodes into the same records.
    static let readableSchemas = ["provision.report/1", RunReport.schemaVersion]

    func load() async -> Result<LoadedReport, ReportLoadProblem> {
        let full = path.hasPrefix("/") ? path : currentDirectory + "/" + path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory) else {
            return .failure(ReportLoadProblem(message: "no such file"))
        }
        if isDirectory.boolValue { return .failure(ReportLoadProblem(message: "is a directory, not a report")) }
        guard let data = FileManager.default.contents(atPath: full) else {
            return .failure(ReportLoadProblem(message: "cannot read the file (permissions?)"))
        }
        if data.isEmpty { return .failure(ReportLoadProblem(message: "the file is empty, not a report")) }
        struct Header: Decodable { var schema: String? }
        let header: Header
        do {
            header = try JSONDecoder().decode(Header.self, from: data)
        } catch DecodingError.dataCorrupted(let c) where c.codingPath.isEmpty {
            return .failure(ReportLoadProblem(message: "not JSON (\(Self.jsonSyntaxError(data)))"))
        } catch {
            return .failure(ReportLoadProblem(message: "not a provision report: " + Self.describe(error)))
        }
        guard let schema = header.schema else {
            return .failure(ReportLoadProblem(message: "not a provision report (it has no `schema`)"))
        }
        guard Self.readableSchemas.contains(schema) else {
            return .failure(ReportLoadProblem(message: "schema `\(schema)` is not one this version of provision reads (\(Self.readableSchemas.joined(separator: ", ")))"))
        }
        do {
            let report = try RunReport.read(from: full)
            return .success(LoadedReport(report: report, label: path, schema: schema))
        } catch {
            return .failure(ReportLoadProblem(message: "not a valid \(schema) report: " + Self.describe(error)))
        }
    }

    /// Where JSON text breaks, as `invalid value at line 2, column 7` (the parser counts characters).
    static func jsonSyntaxError(_ data: Data) -> String {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            return "unexpected content"
        } catch {
            let text = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "malformed"
            guard let m = text.firstMatch(of: /(.*) around character ([0-9]+)\.?/), let offset = Int(m.2) else { return text }
            var line = 1, column = 1
            for b in data.prefix(offset) where b & 0xC0 != 0x80 {
                if b == 0x0A { line += 1; column = 1 } else { column += 1 }
            }
            return "\(m.1.prefix(1).lowercased() + m.1.dropFirst()) at line \(line), column \(column)"
        }
    }

    /// A decoding error in words: where in the document and what was wrong.
    static func describe(_ error: any Error) -> String {
        func at(_ path: [any CodingKey]) -> String {
            var text = ""
            for key in path {
                if let i = key.intValue { text += "[\(i)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
            }
            return text.isEmpty ? "the top level" : "`\(text)`"
        }
        guard let e = error as? DecodingError else { return "\(error)" }
        switch e {
        case .dataCorrupted(let c):
            return c.codingPath.isEmpty ? "not JSON" : "\(at(c.codingPath)) has a value this version does not know"
        case .keyNotFound(let key, let c):
            return "\(at(c.codingPath + [key])) is missing"
        case .typeMismatch(let type, let c):
            let expected: String
            switch "\(type)" {
            case "String": expected = "text"
            case "Bool": expected = "true or false"
            case "Int", "Double", "Int64", "UInt64": expected = "a number"
            case let t where t.hasPrefix("Array"): expected = "a list"
            case let t where t.hasPrefix("Dictionary"): expected = "an object"
            default: expected = "an object"
            }
            return "\(at(c.codingPath)) is not \(expected)"
        case .valueNotFound(_, let c):
            return "\(at(c.codingPath)) is null"
        @unknown default:
            return "\(error)"
        }
    }
}
