import Foundation
import YAML

/// `--secrets FILE`: values shared by the whole line (a site's Wi-Fi passphrase, a batch's proof of
/// possession), kept out of the inventory. The file is a YAML mapping of variable names to values; it
/// must be readable by its owner only (mode 0600 or stricter) and owned by the user running provision,
/// else it is refused before anything is read. Every name in it is secret; a name the inventory also
/// gives is an error (which value wins would be a guess).
public enum SecretsFile {
    /// The file's values by name, or the diagnostics that refuse it.
    public static func load(_ path: String, shownAs: String) -> (values: [String: String], diagnostics: [Diagnostic]) {
        let start = SourceMark(line: 1, column: 1)
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else {
            return ([:], [Diagnostic(path: shownAs, mark: start, message: "cannot open the secrets file (\(String(cString: strerror(errno))))")])
        }
        var info = stat()
        let statOK = fstat(fd, &info) == 0
        close(fd)
        guard statOK, info.st_mode & S_IFMT == S_IFREG else {
            return ([:], [Diagnostic(path: shownAs, mark: start, message: "the secrets file is not a regular file")])
        }
        if info.st_mode & 0o077 != 0 {
            return ([:], [Diagnostic(path: shownAs, mark: start,
                                     message: "the secrets file can be read or written by other users (mode \(String(info.st_mode & 0o777, radix: 8)))",
                                     hint: "it holds the line's secrets: run chmod 600 \(shownAs)")])
        }
        if info.st_uid != geteuid() {
            return ([:], [Diagnostic(path: shownAs, mark: start, message: "the secrets file belongs to another user (uid \(info.st_uid))",
                                     hint: "keep it in the account that runs provision, mode 0600")])
        }
        let bytes: [UInt8]
        switch Validator.readFile(path, shownAs: shownAs) {
        case .success(let b): bytes = b
        case .failure(let d): return ([:], [d])
        }
        var reader = NodeReader(path: shownAs)
        let root: YAMLNode?
        do {
            root = try YAMLParser().parse(bytes)
        } catch {
            reader.error(error.message, at: error.mark, hint: error.hint)
            return ([:], reader.sink.diagnostics)
        }
        guard let root else {
            reader.error("the secrets file is empty", at: start, hint: "write `name: value` lines, for example `wifi_passphrase: ...`")
            return ([:], reader.sink.diagnostics)
        }
        let values = InventoryParser.vars(root, reader: &reader)
        return (reader.sink.hasErrors ? [:] : values, reader.sink.diagnostics)
    }
}

extension Inventory {
    /// The inventory with the line's secret values given to every device; a name some device (or the
    /// inventory's defaults) already gives is an error at `secretsPath`.
    public func addingLineSecrets(_ values: [String: String], from secretsPath: String) -> (Inventory, [Diagnostic]) {
        var out = self
        var diagnostics: [Diagnostic] = []
        for name in values.keys.sorted() {
            let givers = devices.filter { $0.vars[name] != nil }
            if defaultVars[name] != nil || !givers.isEmpty {
                diagnostics.append(Diagnostic(path: secretsPath, mark: SourceMark(line: 1, column: 1),
                                              message: "`\(name)` is given by both the secrets file and the inventory \(path)",
                                              hint: "give it in one place (the secrets file keeps it out of the inventory)"))
            }
        }
        guard diagnostics.isEmpty else { return (self, diagnostics) }
        for (name, value) in values {
            out.defaultVars[name] = value
            out.secrets.insert(name)
        }
        for i in out.devices.indices {
            for (name, value) in values { out.devices[i].vars[name] = value }
        }
        return (out, [])
    }
}
