import Engine
import Foundation
import SystemIO
import Workflow
#if canImport(Glibc)
import Glibc
#endif

/// The files a run writes, checked together before any device is touched: the one place every output
/// path goes through (an option that writes a file is declared with `OptionSpec.Role.output` and listed
/// in `RunCommand.outputs`; a test checks the two agree).
///
/// Each output must not be an input (workflow, inventory, device models, `--limit @file`, the files the
/// workflow sends) nor another output, compared by real path and by file identity (so `./x` and `x`, a
/// symbolic link and a hard link are all caught); its directory must exist and be writable; it must not
/// be a directory. What may already exist depends on the kind (see `Kind`); `--force` allows replacing
/// documents and event files, never the journal.
struct OutputPaths {
    /// How an output is written, which decides what may already be there.
    enum Kind: Equatable {
        /// Written whole at the end, replacing what was there (report, JUnit, simulator dump): an
        /// existing regular file needs `--force`, except the report or JUnit of the very run being resumed.
        /// (A FIFO, a device or a standard stream is fine for a document or a stream: it is written as it is.)
        case document
        /// The journal: appended to. Without `--resume` it must not exist (or be empty); with it, it must.
        case journal
        /// Written as the run goes (`--events`, `--trace`): an existing regular file needs `--force`.
        case stream
        /// Read and written (`--sim-state`, `--bonds`): may exist; it is kept from run to run (the state a
        /// resumed run continues from, the bonds a later run encrypts with).
        case state
        /// A line station's spool (`--spool`): appended to; it must not exist (or be empty) — one that
        /// holds outcomes is written to the line first (`provision line flush`).
        case spool
    }

    struct Output {
        /// The option that names it (`report`), for messages.
        var option: String
        /// As the user gave it (or the default).
        var path: String
        var kind: Kind
        /// A default path whose directory (`reports/`) is created when missing.
        var isDefault = false
        /// How messages name an output that no option names (`the retry file reports/x.retry`).
        var shownAs: String?
    }

    var outputs: [Output]
    var inputs: [InputFile]
    var currentDirectory: String
    var force = false
    var resume = false
    /// With `--resume`: the journal's run id; a report of this run may be replaced by its continuation.
    var resumedRunID: String?

    /// `path` made absolute against `currentDirectory`.
    func absolute(_ path: String) -> String {
        ValueSpec.resolve(path: path, baseDirectory: currentDirectory)
    }

    /// Every problem, one message each (empty when the run may start).
    func problems() -> [String] {
        var out: [String] = []
        let inputIDs = inputs.map { (input: $0, id: FileIdentity(absolute($0.path))) }
        var seen: [(Output, FileIdentity)] = []
        for o in outputs {
            let shown = o.shownAs ?? "`--\(o.option) \(o.path)`"
            if o.path == "-" {
                out.append("\(shown): only `--events` can write to standard output (`-`)")
                continue
            }
            let full = absolute(o.path)
            let id = FileIdentity(full)
            if let clash = inputIDs.first(where: { $0.id.sameFile(as: id) }) {
                out.append("\(shown) is \(clash.input.role) (\(clash.input.path)): a run never writes over what it reads")
                continue
            }
            if let (other, _) = seen.first(where: { $0.1.sameFile(as: id) }) {
                out.append("\(shown) and \(other.shownAs ?? "`--\(other.option) \(other.path)`") are the same file: every output needs its own path")
                continue
            }
            seen.append((o, id))
            if let problem = place(o, full: full, shown: shown) { out.append(problem) }
        }
        return out
    }

    /// Directory and existing-file rules for one output, by the output-path rule (`OutputPath`): a FIFO,
    /// a character device or a standard stream is written as it is (a document or a stream may go
    /// there; what is read back, the journal, the spool and state files, may not); anything else is a
    /// regular file written beside its target (symbolic links followed), whose directory must take it.
    private func place(_ o: Output, full: String, shown: String) -> String? {
        var st = stat()
        let exists = stat(full, &st) == 0
        let type = exists ? st.st_mode & S_IFMT : 0
        if exists, type == S_IFDIR { return "\(shown) is a directory" }
        if (exists && (type == S_IFIFO || type == S_IFCHR)) || OutputPath.isStandardStream(full) {
            let what = type == S_IFIFO ? "a FIFO" : type == S_IFCHR ? "a device" : "a standard stream"
            switch o.kind {
            case .document, .stream:
                return exists ? nil : "\(shown): \(full) is not open"
            case .journal, .spool, .state:
                return "\(shown) is \(what): it is read back, so it must be a regular file"
            }
        }
        if exists, type != S_IFREG { return "\(shown) is not a regular file, a FIFO or a character device" }
        let target: String
        do {
            target = try OutputPath.target(of: full)
        } catch where error.errno == ELOOP {
            return "\(shown): \(error)"
        } catch {
            target = full  // a missing or unusable directory: said below
        }
        let found = InventoryParser.directory(of: target)
        let dir = found.isEmpty ? "." : found
        var dst = stat()
        if stat(dir, &dst) != 0 {
            if o.isDefault { return nil }  // `reports/` is created before the run
            return "\(shown): directory \(dir) does not exist"
        }
        if dst.st_mode & S_IFMT != S_IFDIR { return "\(shown): \(dir) is not a directory" }
        if access(dir, W_OK | X_OK) != 0 { return "\(shown): directory \(dir) is not writable (\(String(cString: strerror(errno))))" }
        guard exists else {
            return o.kind == .journal && resume ? "\(shown): no such journal to resume" : nil
        }
        switch o.kind {
        case .state:
            return nil
        case .spool:
            if st.st_size == 0 { return nil }
            return "\(shown) already exists and may hold outcomes not yet on the line: write them with `provision line flush \(o.path) --line URL`, or choose another `--spool` path"
        case .journal:
            if resume || st.st_size == 0 { return nil }
            return "\(shown) already exists: resume it with `--resume \(o.path)`, or choose another `--journal` path (a journal is never replaced)"
        case .document, .stream:
            if force { return nil }
            if resume, o.kind == .document, isResumedRunsOwn(o, full: full) { return nil }
            return "\(shown) already exists; it is not replaced unless you add `--force`"
        }
    }

    /// On `--resume`, the report and the JUnit, HTML and retry files of the run being resumed are its view of the journal;
    /// the continuation's replace them, carrying every earlier outcome over. A report of another run is
    /// not: it needs `--force`.
    private func isResumedRunsOwn(_ o: Output, full: String) -> Bool {
        switch o.option {
        case "report":
            guard let id = resumedRunID, let report = try? RunReport.read(from: full) else { return false }
            return report.run.id == id
        case "junit", "html", "retry":
            return resumedRunID != nil
        default:
            return false
        }
    }
}

extension OutputPaths {
    /// Where the files kept beside the report go (the journal, the spool, the retry file): the report's
    /// path with another extension, unless the report is written as it is (a FIFO, a device, a standard
    /// stream), whose directory is no place for files (`/dev`): then `fallback` with that extension, in
    /// the default `reports/` directory.
    struct Beside {
        var report: String?
        var fallback: String
        var currentDirectory: String

        /// True when the given report is written as it is.
        var reportIsAsIs: Bool {
            guard let report else { return false }
            if case .asIs? = try? OutputPath.resolve(ValueSpec.resolve(path: report, baseDirectory: currentDirectory)) { return true }
            return false
        }

        /// The file with extension `ext` beside `report` (the given one when nil).
        func path(_ ext: String, report given: String? = nil) -> String {
            guard let base = given ?? report, !reportIsAsIs else { return fallback + "." + ext }
            return RunPaths.replacingExtension(base, with: ext)
        }

        /// Whether a file beside the report is in the default directory (created before the run).
        func isDefault(_ given: String?) -> Bool { given == nil || reportIsAsIs }
    }
}

/// A path's real location and, when it exists, its device and inode: two paths name the same file when
/// either matches (`./x` and `x`, a link and its target, two hard links).
struct FileIdentity {
    var realPath: String
    var inode: (dev: UInt64, ino: UInt64)?

    init(_ absolute: String) {
        var st = stat()
        if stat(absolute, &st) == 0 {
            inode = (UInt64(st.st_dev), UInt64(st.st_ino))
        }
        // The real path of the file, or of its directory joined with its name when it does not exist yet.
        let name = (absolute as NSString).lastPathComponent
        let dir = InventoryParser.directory(of: absolute)
        if let real = FileRoot.realPath(absolute) {
            realPath = real
        } else if let realDir = FileRoot.realPath(dir.isEmpty ? "." : dir) {
            realPath = realDir == "/" ? "/" + name : realDir + "/" + name
        } else {
            realPath = (absolute as NSString).standardizingPath
        }
    }

    func sameFile(as other: FileIdentity) -> Bool {
        if realPath == other.realPath { return true }
        if let a = inode, let b = other.inode { return a == b }
        return false
    }
}
