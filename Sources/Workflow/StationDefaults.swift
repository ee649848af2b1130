import Foundation
import YAML

/// A station's defaults file: what `provision run` uses where its command line says nothing — the
/// adapters, the concurrency, the bond store, the line and the station's name. `.provision.yaml` beside the workflow is read
/// when it exists; `--config PATH` names another. The command line always wins (and for the line,
/// `PROVISION_LINE` wins over the file too).
///
/// ```yaml
/// adapter: hci:tcp:127.0.0.1:9000      # or a list: [hci:serial:/dev/ttyACM0, hci:serial:/dev/ttyACM1]
/// concurrency: 8
/// bonds: station.bonds                 # relative to this file
/// line: host=line-db dbname=provision  # a libpq connection string
/// station: bench-2                     # this station's name (default: the host name)
/// ```
///
/// Read with positions like every input: a problem is `file:line:column` with a hint, and every problem
/// of the file is reported at once. The values' own syntax (an adapter spec, a connection string) is
/// checked by the command that uses them, at the value's position (`Located.mark`); so is the station's
/// name.
public struct StationDefaults: Sendable, Equatable {
    /// A value and where the file says it.
    public struct Located: Sendable, Equatable {
        public var value: String
        public var mark: SourceMark
    }

    /// The name of the file read beside a workflow.
    public static let fileName = ".provision.yaml"
    static let keys = ["adapter", "concurrency", "bonds", "line", "station"]

    /// The file, as given or found (messages name it so).
    public var path: String
    public var adapters: [Located] = []
    public var concurrency: Int?
    /// The bond store, as a path relative to the file's directory made absolute.
    public var bonds: String?
    public var line: Located?
    /// The station's name, as `--station` gives one.
    public var station: Located?

    /// The defaults file beside `workflowPath`, if there is one.
    public static func beside(workflow workflowPath: String, currentDirectory: String) -> String? {
        let directory = InventoryParser.directory(of: ValueSpec.resolve(path: workflowPath, baseDirectory: currentDirectory))
        let path = (directory.isEmpty ? "." : directory) + "/" + fileName
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    /// Reads the file at `path` (relative to `currentDirectory`): the defaults and every problem (with
    /// problems, what could be read, for checks that report theirs alongside).
    public static func load(_ path: String, currentDirectory: String) -> (defaults: StationDefaults?, diagnostics: [Diagnostic]) {
        let full = ValueSpec.resolve(path: path, baseDirectory: currentDirectory)
        var reader = NodeReader(path: path)
        guard let data = FileManager.default.contents(atPath: full) else {
            reader.error("cannot read the defaults file \(path)", at: SourceMark(line: 1, column: 1),
                         hint: FileManager.default.fileExists(atPath: full) ? "check its permissions" : "no such file")
            return (nil, reader.sink.diagnostics)
        }
        return parse([UInt8](data), path: path, baseDirectory: InventoryParser.directory(of: full))
    }

    /// Parses the file's bytes; relative paths in it resolve against `baseDirectory`. With problems the
    /// defaults are what could be read (nil when nothing could).
    public static func parse(_ bytes: [UInt8], path: String, baseDirectory: String) -> (defaults: StationDefaults?, diagnostics: [Diagnostic]) {
        var reader = NodeReader(path: path)
        var d = StationDefaults(path: path)
        guard case .parsed(let root) = reader.document(bytes) else { return (nil, reader.sink.diagnostics) }
        // An empty file sets nothing.
        guard let root else { return (d, []) }
        guard let pairs = reader.mapping(root, "a defaults file") else { return (nil, reader.sink.diagnostics) }
        reader.checkKeys(pairs, allowed: keys, in: "the defaults file")
        if let node = root["adapter"] {
            let items = node.sequence ?? [node]
            for item in items {
                if let text = reader.string(item, "`adapter`") { d.adapters.append(Located(value: text, mark: item.mark)) }
            }
            if items.isEmpty { reader.error("`adapter` names no adapter", at: node.mark, hint: "write `adapter: sim` or a radio such as `hci:tcp:127.0.0.1:9000`") }
        }
        if let node = root["concurrency"] { d.concurrency = reader.integer(node, "`concurrency`", in: 1...10_000) }
        if let node = root["bonds"], let text = reader.string(node, "`bonds`") {
            d.bonds = ValueSpec.resolve(path: text, baseDirectory: baseDirectory)
        }
        if let node = root["line"], let text = reader.string(node, "`line`") { d.line = Located(value: text, mark: node.mark) }
        if let node = root["station"], let text = reader.string(node, "`station`") { d.station = Located(value: text, mark: node.mark) }
        return (d, reader.sink.diagnostics)
    }
}
