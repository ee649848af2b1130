import Digests
import Foundation
import BLE
import Support
import YAML

/// Reads an inventory from YAML or CSV (chosen by the `.csv` extension), collecting every problem.
public struct InventoryParser: Sendable {
    /// What an inventory may be: larger than a workflow (a line of 100,000 devices is 13 MB of YAML), up
    /// to 64 MiB (about half a million devices in YAML). Larger is refused before it is parsed.
    public static let limits = YAMLParser.Limits(maxBytes: 64 * 1024 * 1024, maxNodes: 8_000_000)

    public init() {}

    static let topKeys = ["devices", "defaults", "secrets", "simulator", "files", "meta"]
    static let deviceKeys = ["id", "address", "name", "vars", "simulator"]

    /// Parses inventory bytes. `path` names the file in diagnostics and decides the format; relative file
    /// paths in variables resolve against `baseDirectory` (default: the directory of `path`).
    public func parse(bytes: [UInt8], path: String, baseDirectory: String? = nil) -> (inventory: Inventory?, diagnostics: [Diagnostic]) {
        let r = parsePartial(bytes: bytes, path: path, baseDirectory: baseDirectory)
        return (r.diagnostics.contains { $0.severity == .error } ? nil : r.partial, r.diagnostics)
    }

    /// Like `parse`, but also returns what could be read of an invalid inventory: every device without
    /// an error of its own (a bad cell, a duplicate id), so that the cross-checks with the workflow (and
    /// the simulator model's) still run and report their problems in the same pass.
    public func parsePartial(bytes: [UInt8], path: String, baseDirectory: String? = nil) -> (partial: Inventory?, diagnostics: [Diagnostic]) {
        let r = read(bytes: bytes, path: path, baseDirectory: baseDirectory)
        // A file root in error leaves every file value without meaning: nothing is checked against it.
        guard var partial = r.inventory, r.fileRootUsable else { return (nil, r.diagnostics) }
        let flagged = Set(r.diagnostics.filter { $0.severity == .error }.map(\.mark))
        if !flagged.isEmpty { partial.devices.removeAll { flagged.contains($0.mark) } }
        return (partial, r.diagnostics)
    }

    /// The inventory as read (also when some of it is in error) and every problem found.
    private func read(bytes: [UInt8], path: String, baseDirectory: String?) -> (inventory: Inventory?, diagnostics: [Diagnostic], fileRootUsable: Bool) {
        let base = baseDirectory ?? Self.directory(of: path)
        let sha = SHA256.hexDigest(bytes)
        if path.lowercased().hasSuffix(".csv") {
            var sink = DiagnosticSink(path: path)
            let devices = CSVInventory.parse(bytes, sink: &sink)
            var inventory = Inventory(path: path, sha256: sha, baseDirectory: base, devices: devices)
            if devices.isEmpty && !sink.hasErrors {
                sink.error("the inventory has no devices", at: SourceMark(line: 1, column: 1), hint: "add one row per device below the header")
            }
            Self.checkDevices(&inventory, sink: &sink)
            return (inventory, sink.diagnostics, true)
        }
        var reader = NodeReader(path: path)
        guard case .parsed(let root) = reader.document(bytes, limits: Self.limits) else { return (nil, reader.sink.diagnostics, false) }
        guard let root else {
            reader.error("the inventory is empty", at: SourceMark(line: 1, column: 1), hint: "an inventory needs `devices:` with a list of devices")
            return (nil, reader.sink.diagnostics, false)
        }
        guard let pairs = reader.mapping(root, "an inventory") else { return (nil, reader.sink.diagnostics, false) }
        reader.checkKeys(pairs, allowed: Self.topKeys, in: "the inventory")

        var defaultVars: [String: String] = [:]
        if let d = root["defaults"], let dp = reader.mapping(d, "`defaults`") {
            reader.checkKeys(dp, allowed: ["vars"], in: "`defaults`")
            if let v = d["vars"] { defaultVars = Self.vars(v, reader: &reader) }
        }
        var secrets = Set<String>()
        var secretMarks: [(String, SourceMark)] = []
        if let s = root["secrets"], let items = reader.sequence(s, "`secrets`") {
            for item in items {
                if let name = reader.identifier(item, "variable name") {
                    secrets.insert(name)
                    secretMarks.append((name, item.mark))
                }
            }
        }
        var model: String?
        if let s = root["simulator"], let sp = reader.mapping(s, "`simulator`") {
            reader.checkKeys(sp, allowed: ["model"], in: "`simulator`")
            if let m = s["model"] {
                if let text = reader.string(m, "`model`") { model = ValueSpec.resolve(path: text, baseDirectory: base) }
            } else {
                reader.error("`simulator` needs `model`", at: s.mark, hint: "for example `model: models/sensor-v2.yaml`")
            }
        }
        // `files: { root: DIR }`: where file variables resolve (default: the inventory's directory).
        var fileRoot = base
        var fileRootUsable = true
        if let f = root["files"], let fp = reader.mapping(f, "`files`") {
            reader.checkKeys(fp, allowed: ["root"], in: "`files`")
            if let r = f["root"] {
                if let text = reader.string(r, "`root`") {
                    let dir = ValueSpec.resolve(path: text, baseDirectory: base)
                    var isDirectory: ObjCBool = false
                    if text.isEmpty {
                        reader.error("`root` is empty", at: r.mark, hint: "name a directory, relative to the inventory or absolute")
                        fileRootUsable = false
                    } else if !FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory) || !isDirectory.boolValue {
                        reader.error("file root `\(text)` is not a directory (\(dir))", at: r.mark,
                                     hint: "relative roots start from the inventory's directory")
                        fileRootUsable = false
                    } else {
                        fileRoot = dir
                    }
                } else {
                    fileRootUsable = false
                }
            } else {
                reader.error("`files` needs `root`", at: f.mark, hint: "for example `root: /srv/provision/blobs`")
                fileRootUsable = false
            }
        } else if root["files"] != nil {
            fileRootUsable = false
        }
        // `meta:` — the run's metadata (operator, lot, work order): names to text, shown in every report.
        var meta: [String: String] = [:]
        if let m = root["meta"], let mp = reader.mapping(m, "`meta`") {
            for pair in mp {
                guard let key = reader.string(pair.key, "a `meta` name") else { continue }
                if let text = reader.string(pair.value, "`meta.\(key)`") { meta[key] = text }
            }
        }
        var devices: [InventoryDevice] = []
        if let d = root["devices"] {
            if let items = reader.sequence(d, "`devices`") {
                devices.reserveCapacity(items.count)
                if items.isEmpty { reader.error("`devices` is empty", at: d.mark) }
                for item in items {
                    if let device = Self.device(item, defaults: defaultVars, reader: &reader) { devices.append(device) }
                }
            }
        } else if !reader.hasTypo(of: "devices", in: root) {
            reader.error("the inventory needs `devices`", at: root.mark, hint: "add `devices:` with a list of `{ id, address, name, vars }`")
        }
        var sink = reader.sink
        var inventory = Inventory(
            path: path, sha256: sha, baseDirectory: fileRoot, devices: devices, defaultVars: defaultVars, secrets: secrets,
            simulatorModel: model)
        inventory.meta = meta
        Self.checkDevices(&inventory, sink: &sink)
        if !secretMarks.isEmpty {
            let names = inventory.variableNames
            for (name, mark) in secretMarks where !names.contains(name) {
                sink.warning("secret `\(name)` is not a variable of any device", at: mark, hint: Suggestions.hint(for: name, in: names))
            }
        }
        return (inventory, sink.diagnostics, fileRootUsable)
    }

    static func device(_ node: YAMLNode, defaults: [String: String], reader: inout NodeReader) -> InventoryDevice? {
        guard let pairs = reader.mapping(node, "a device") else { return nil }
        reader.checkKeys(pairs, allowed: deviceKeys, in: "a device")
        guard let idNode = node["id"] else {
            reader.error("a device needs an `id`", at: node.mark, hint: "for example `id: SN-0001`")
            return nil
        }
        guard let id = reader.string(idNode, "`id`") else { return nil }
        guard checkID(id, at: idNode.mark, sink: &reader.sink) else { return nil }
        var device = InventoryDevice(id: id, vars: defaults, mark: node.mark)
        if let a = node["address"], !a.isNull {
            if let text = reader.string(a, "`address`") {
                guard checkPrintable(text, "address", of: id, at: a.mark, sink: &reader.sink) else { return nil }
                if let address = BluetoothAddress(text) { device.address = address } else {
                    reader.error("`\(text)` is not a Bluetooth address", at: a.mark, hint: "write six hex pairs: `C0:5E:00:00:00:01`")
                    return nil
                }
            }
        }
        if let n = node["name"], !n.isNull, let name = reader.string(n, "`name`") {
            guard checkPrintable(name, "name", of: id, at: n.mark, sink: &reader.sink) else { return nil }
            device.name = name
        }
        if let v = node["vars"] {
            for (key, value) in Self.vars(v, reader: &reader) { device.vars[key] = value }
        }
        if let s = node["simulator"] {
            if s.mapping != nil { device.simulator = s } else { _ = reader.mapping(s, "a device's `simulator`") }
        }
        return device
    }

    static func vars(_ node: YAMLNode, reader: inout NodeReader) -> [String: String] {
        guard let pairs = reader.mapping(node, "`vars`") else { return [:] }
        var out: [String: String] = [:]
        out.reserveCapacity(pairs.count)
        for pair in pairs {
            guard let key = pair.key.scalar else { continue }
            if Template.builtins.contains(key) {
                reader.error("`\(key)` is a built-in and cannot be a variable", at: pair.key.mark, hint: "set `\(key)` on the device itself, or rename the variable")
                continue
            }
            guard Template.isValidName(key) else {
                reader.error("`\(key)` is not a valid variable name", at: pair.key.mark, hint: "use letters, digits, `_`, `-` or `.`, starting with a letter")
                continue
            }
            if pair.value.isNull { out[key] = ""; continue }
            if let text = reader.string(pair.value, "variable `\(key)`") { out[key] = text }
        }
        return out
    }

    static func checkID(_ id: String, at mark: SourceMark, sink: inout DiagnosticSink) -> Bool {
        if id.isEmpty {
            sink.error("device `id` is empty", at: mark)
            return false
        }
        guard checkPrintable(id, "id", of: nil, at: mark, sink: &sink) else { return false }
        if id.contains(where: { $0 == "," || $0 == " " || $0 == "\t" || $0 == "@" || $0 == "*" || $0 == "?" }) {
            sink.error("device id `\(id)` contains a space, comma, `@`, `*` or `?`", at: mark, hint: "ids are used in `--limit` lists; keep them plain, like `SN-0001`")
            return false
        }
        return true
    }

    /// Ids, names and addresses are printed on progress lines and in reports: a control character (ESC,
    /// BEL, a newline, U+2028, a bidi override, ...) would rewrite the terminal or hide what is shown.
    static func checkPrintable(_ text: String, _ what: String, of id: String?, at mark: SourceMark, sink: inout DiagnosticSink) -> Bool {
        guard let (scalar, position) = ControlCharacters.first(in: text) else { return true }
        let whose = id.map { "device `\(ControlCharacters.escaped($0))`'s \(what)" } ?? "device \(what)"
        sink.error("\(whose) `\(ControlCharacters.escaped(text))` contains the control character \(ControlCharacters.describe(scalar)) at character \(position)",
                   at: mark, hint: "ids, names and addresses are printed on terminals and in reports; remove it")
        return false
    }

    /// Unique ids, addresses and names (a scan by name finds whichever unit advertises it first); a
    /// device needs an address or a name to be found.
    static func checkDevices(_ inventory: inout Inventory, sink: inout DiagnosticSink) {
        var ids: [String: SourceMark] = [:]
        var addresses: [BluetoothAddress: (String, SourceMark)] = [:]
        var names: [String: (String, SourceMark)] = [:]
        ids.reserveCapacity(inventory.devices.count)
        for d in inventory.devices {
            if let first = ids[d.id] {
                sink.error("duplicate device id `\(d.id)` (first at line \(first.line))", at: d.mark, hint: "every device needs its own id")
            } else {
                ids[d.id] = d.mark
            }
            if let a = d.address {
                if let (other, mark) = addresses[a] {
                    sink.error("device `\(d.id)` has the same address \(a) as `\(other)` (line \(mark.line))", at: d.mark)
                } else {
                    addresses[a] = (d.id, d.mark)
                }
            }
            if let n = d.name, !n.isEmpty {
                if let (other, mark) = names[n] {
                    sink.error("device `\(d.id)` has the same name `\(n)` as `\(other)` (at \(mark))", at: d.mark,
                               hint: "a unit is found by its advertised name: two devices with one name could be provisioned at each other's address")
                } else {
                    names[n] = (d.id, d.mark)
                }
            }
            if d.address == nil && (d.name ?? "").isEmpty {
                sink.error("device `\(d.id)` has neither `address` nor `name`", at: d.mark, hint: "give at least one, so the device can be found")
            }
        }
    }

    /// The directory part of a path ("" for a bare file name).
    public static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        if slash == path.startIndex { return "/" }
        return String(path[path.startIndex..<slash])
    }
}

/// CSV inventories: a header row `id,address,name,<var>,...` then one row per device (RFC 4180 quoting).
enum CSVInventory {
    /// One cell with where it starts.
    struct Cell {
        var text: String
        var mark: SourceMark
    }

    static func parse(_ bytes: [UInt8], sink: inout DiagnosticSink) -> [InventoryDevice] {
        do {
            _ = try YAMLParser.checkEncodingForCSV(bytes)
        } catch {
            sink.error(error.message, at: error.mark, hint: error.hint)
            return []
        }
        if bytes.count > InventoryParser.limits.maxBytes {
            sink.error("file is \(bytes.count) bytes; the limit is \(InventoryParser.limits.maxBytes) bytes", at: SourceMark(line: 1, column: 1))
            return []
        }
        // A UTF-8 byte order mark (spreadsheet exports) is not part of the first cell.
        let text = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        guard let rows = rows(text, sink: &sink) else { return [] }
        let nonEmpty = rows.filter { !($0.count == 1 && $0[0].text.isEmpty) && !($0.first?.text.hasPrefix("#") ?? false) }
        guard let header = nonEmpty.first else { return [] }
        let names = header.map { $0.text.trimmingSpaces }
        guard names.first == "id" else {
            sink.error("the first column of a CSV inventory must be `id`", at: header[0].mark, hint: "the header is `id,address,name,<var>,...`")
            return []
        }
        var seen: [String: SourceMark] = [:]
        // A column in error is reported and left out; the rows are still read, so that their cells'
        // problems are reported in the same pass.
        var ignored = Set<Int>()
        for (i, name) in names.enumerated() {
            if let first = seen[name] {
                sink.error("duplicate column `\(name)` (first at column \(first.column))", at: header[i].mark)
                ignored.insert(i)
                continue
            }
            seen[name] = header[i].mark
            if i > 0, !["address", "name"].contains(name) {
                if !Template.isValidName(name) {
                    sink.error("`\(name)` is not a valid variable name", at: header[i].mark,
                               hint: Suggestions.hint(for: name, in: ["address", "name"]) ?? "use letters, digits, `_`, `-` or `.`")
                    ignored.insert(i)
                } else if let guess = Suggestions.closest(to: name, in: ["address", "name"]), guess != name, name.count > 3 {
                    sink.warning("column `\(name)` is read as a variable", at: header[i].mark, hint: "did you mean `\(guess)`?")
                }
            }
        }
        var devices: [InventoryDevice] = []
        devices.reserveCapacity(nonEmpty.count)
        for row in nonEmpty.dropFirst() {
            guard let first = row.first else { continue }
            if row.count != names.count {
                sink.error("row has \(row.count) cells; the header has \(names.count)", at: first.mark, hint: "check for a missing or extra comma")
                continue
            }
            let id = first.text.trimmingSpaces
            var valid = InventoryParser.checkID(id, at: first.mark, sink: &sink)
            var device = InventoryDevice(id: id, mark: first.mark)
            for (i, cell) in row.enumerated().dropFirst() where !ignored.contains(i) {
                let text = cell.text.trimmingSpaces
                if names[i] == "address" || names[i] == "name",
                   !InventoryParser.checkPrintable(text, names[i], of: id, at: cell.mark, sink: &sink) {
                    valid = false
                    continue
                }
                switch names[i] {
                case "address":
                    if text.isEmpty { break }
                    if let a = BluetoothAddress(text) { device.address = a } else {
                        sink.error("`\(text)` is not a Bluetooth address", at: cell.mark, hint: "write six hex pairs: `C0:5E:00:00:00:01`")
                        valid = false
                    }
                case "name":
                    if !text.isEmpty { device.name = text }
                default:
                    if !text.isEmpty { device.vars[names[i]] = text }
                }
            }
            if valid { devices.append(device) }
        }
        return devices
    }

    /// Splits CSV into rows of cells; nil (with a diagnostic) on an unterminated quote.
    static func rows(_ bytes: [UInt8], sink: inout DiagnosticSink) -> [[Cell]]? {
        var rows: [[Cell]] = []
        var row: [Cell] = []
        var cell: [UInt8] = []
        var line = 1
        var column = 1
        var cellMark = SourceMark(line: 1, column: 1)
        var inQuotes = false
        var quoteMark = cellMark
        var i = 0
        func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }
        while i < bytes.count {
            let b = bytes[i]
            if inQuotes {
                if b == UInt8(ascii: "\"") {
                    if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "\"") {
                        cell.append(b)
                        i += 2
                        column += 2
                        continue
                    }
                    inQuotes = false
                } else {
                    cell.append(b)
                    if b == 0x0A {
                        line += 1
                        column = 0
                    }
                }
            } else if b == UInt8(ascii: "\"") && cell.isEmpty {
                inQuotes = true
                quoteMark = SourceMark(line: line, column: column)
            } else if b == UInt8(ascii: ",") {
                row.append(Cell(text: text(cell), mark: cellMark))
                cell.removeAll(keepingCapacity: true)
                cellMark = SourceMark(line: line, column: column + 1)
            } else if b == 0x0A || b == 0x0D {
                row.append(Cell(text: text(cell), mark: cellMark))
                cell.removeAll(keepingCapacity: true)
                rows.append(row)
                row = []
                if b == 0x0D, i + 1 < bytes.count, bytes[i + 1] == 0x0A { i += 1 }
                line += 1
                column = 0
                cellMark = SourceMark(line: line, column: 1)
            } else {
                cell.append(b)
            }
            i += 1
            column += 1
        }
        if inQuotes {
            sink.error("unterminated quoted cell", at: quoteMark, hint: "close the quote with `\"`")
            return nil
        }
        if !cell.isEmpty || !row.isEmpty {
            row.append(Cell(text: text(cell), mark: cellMark))
            rows.append(row)
        }
        return rows
    }
}

extension YAMLParser {
    /// The UTF-8/NUL check, shared with CSV inventories.
    static func checkEncodingForCSV(_ bytes: [UInt8]) throws(YAMLError) -> Bool {
        try YAMLParser.validateEncoding(bytes)
        return true
    }
}
