import Foundation
import Support
import YAML

/// `--limit`: which inventory devices a command works on.
///
/// A comma-separated list of items; each is an exact id (`SN-0001`), a glob (`SN-00*`, `SN-000?`),
/// or `@file` (one id or glob a line; blank lines and `#` comments ignored). The selection keeps
/// inventory order; an item that selects nothing is an error.
public enum DeviceSelection {
    /// Selects devices. `currentDirectory` resolves a relative `@file`.
    public static func select(
        _ spec: String, from devices: [InventoryDevice], currentDirectory: String = ""
    ) -> (devices: [InventoryDevice], diagnostics: [Diagnostic]) {
        var diagnostics: [Diagnostic] = []
        var patterns: [(text: String, path: String, mark: SourceMark)] = []
        var column = 1
        for item in spec.split(separator: ",", omittingEmptySubsequences: false) {
            let text = item.trimmingSpaces
            let mark = SourceMark(line: 1, column: column)
            column += item.count + 1
            if text.isEmpty { continue }
            if text.hasPrefix("@") {
                let file = ValueSpec.resolve(path: String(text.dropFirst()), baseDirectory: currentDirectory)
                guard let data = FileManager.default.contents(atPath: file) else {
                    diagnostics.append(Diagnostic(path: "--limit", mark: mark, message: "cannot read the id list `\(text.dropFirst())`"))
                    continue
                }
                for (n, line) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let id = line.trimmingSpaces.trimmingCharacters(in: .whitespacesAndNewlines)
                    if id.isEmpty || id.hasPrefix("#") { continue }
                    patterns.append((id, String(text.dropFirst()), SourceMark(line: n + 1, column: 1)))
                }
            } else {
                patterns.append((text, "--limit", mark))
            }
        }
        if patterns.isEmpty && diagnostics.isEmpty {
            diagnostics.append(Diagnostic(path: "--limit", mark: SourceMark(line: 1, column: 1), message: "`--limit` selects no devices", hint: "give ids, globs like `SN-00*`, or `@file`"))
        }
        var exact = Set<String>()
        var globs: [(String, String, SourceMark)] = []
        let ids = Set(devices.map(\.id))
        for (text, path, mark) in patterns {
            if text.contains("*") || text.contains("?") || text.contains("[") {
                globs.append((text, path, mark))
            } else if ids.contains(text) {
                exact.insert(text)
            } else {
                diagnostics.append(Diagnostic(
                    path: path, mark: mark, message: "no device with id `\(text)` in the inventory",
                    hint: Suggestions.hint(for: text, in: ids)))
            }
        }
        var matchedGlobs = Set<Int>()
        var selected: [InventoryDevice] = []
        for device in devices {
            var take = exact.contains(device.id)
            for (i, g) in globs.enumerated() where glob(g.0, matches: device.id) {
                take = true
                matchedGlobs.insert(i)
            }
            if take { selected.append(device) }
        }
        for (i, g) in globs.enumerated() where !matchedGlobs.contains(i) {
            diagnostics.append(Diagnostic(path: g.1, mark: g.2, message: "`\(g.0)` matches no device in the inventory"))
        }
        return (selected, diagnostics)
    }

    /// Shell-style glob: `*` any run, `?` one character, `[abc]`/`[a-z]` a class.
    public static func glob(_ pattern: String, matches text: String) -> Bool {
        let p = Array(pattern.unicodeScalars)
        let t = Array(text.unicodeScalars)
        var pi = 0, ti = 0
        var starP = -1, starT = 0
        while ti < t.count {
            if pi < p.count, p[pi] == "*" {
                starP = pi
                starT = ti
                pi += 1
                continue
            }
            if pi < p.count, let next = matchOne(p, pi, t[ti]) {
                pi = next
                ti += 1
                continue
            }
            if starP >= 0 {
                pi = starP + 1
                starT += 1
                ti = starT
                continue
            }
            return false
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    /// If `p[i]` matches `c`, the index after the pattern element; else nil.
    private static func matchOne(_ p: [Unicode.Scalar], _ i: Int, _ c: Unicode.Scalar) -> Int? {
        if p[i] == "?" { return i + 1 }
        if p[i] == "[", let close = p[(i + 1)...].firstIndex(of: "]"), close > i + 1 {
            var j = i + 1
            var negate = false
            if p[j] == "!" || p[j] == "^" { negate = true; j += 1 }
            var hit = false
            while j < close {
                if j + 2 < close, p[j + 1] == "-" {
                    if p[j] <= c && c <= p[j + 2] { hit = true }
                    j += 3
                } else {
                    if p[j] == c { hit = true }
                    j += 1
                }
            }
            return hit != negate ? close + 1 : nil
        }
        return p[i] == c ? i + 1 : nil
    }
}
