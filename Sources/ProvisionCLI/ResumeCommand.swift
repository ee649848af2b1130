import Foundation

/// The command that continues a stopped run, printed in its summary (`resume: provision run …`): the
/// words the run was given, with `--resume JOURNAL` instead of `--journal` (and without `--dry-run`).
/// The files a run writes per process — `--events`, `--trace`, `--sim-dump` — are never replaced
/// without `--force`; those this run left get a new name (`events-2.jsonl`), so the command works as
/// printed and keeps what the stopped run wrote.
enum ResumeCommand {
    /// Options whose file belongs to one process.
    static let perProcess: Set<String> = ["events", "trace", "sim-dump"]

    /// The words of the resume command (without `provision run`). `options` tells which options take a
    /// value; `taken(option, path)` whether a path of that option is already written.
    static func words(_ original: [String], journal: String, options: [OptionSpec], taken: (String, String) -> Bool) -> [String] {
        var out: [String] = []
        var i = 0
        func option(_ word: String) -> (spec: OptionSpec, inline: String?)? {
            if word.hasPrefix("--") {
                let body = word.dropFirst(2)
                let name = body.split(separator: "=", maxSplits: 1).first.map(String.init) ?? String(body)
                let inline = body.contains("=") ? String(body.drop { $0 != "=" }.dropFirst()) : nil
                return options.first { $0.name == name }.map { ($0, inline) }
            }
            guard word.count >= 2, word.hasPrefix("-"), let short = word.dropFirst().first,
                  let spec = options.first(where: { $0.short == short }) else { return nil }
            return (spec, word.count > 2 ? String(word.dropFirst(2)) : nil)
        }
        while i < original.count {
            let word = original[i]
            i += 1
            if word == "--" {
                out += original[(i - 1)...]
                break
            }
            guard let (spec, inline) = option(word) else {
                out.append(word)
                continue
            }
            var value = inline
            if value == nil, spec.kind != .flag, i < original.count {
                value = original[i]
                i += 1
            }
            switch spec.name {
            case "journal", "resume", "dry-run":
                continue
            case let name where perProcess.contains(name):
                guard let path = value else { continue }
                out += ["--\(name)", path == "-" || !taken(name, path) ? path : renamed(path) { !taken(name, $0) }]
            default:
                out.append(inline == nil ? word : "--\(spec.name)")
                if let value { out.append(value) }
            }
        }
        return out + ["--resume", journal]
    }

    /// `events.jsonl` → `events-2.jsonl` (or `-3`, … the first that is `free`).
    static func renamed(_ path: String, free: (String) -> Bool) -> String {
        let ns = path as NSString
        let ext = ns.pathExtension
        let stem = ext.isEmpty ? path : ns.deletingPathExtension
        func candidate(_ n: Int) -> String { ext.isEmpty ? "\(stem)-\(n)" : "\(stem)-\(n).\(ext)" }
        var n = 2
        while !free(candidate(n)) { n += 1 }
        return candidate(n)
    }

    /// The words as one line a POSIX shell reads back as the same words.
    static func shellLine(_ words: [String]) -> String {
        words.map { word in
            let safe = !word.isEmpty && word.unicodeScalars.allSatisfy {
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "@%+=:,./_-".unicodeScalars.contains($0))
            }
            return safe ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }
}
