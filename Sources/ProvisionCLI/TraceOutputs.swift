import BLE
import BLESimulator
import Foundation
import HCI
import Synchronization
import Trace
import Workflow

/// `--trace PATH`: a protocol trace per adapter, written as the run goes.
///
/// - An HCI adapter gets a btsnoop file (H4, every packet both ways) that Wireshark opens.
/// - The simulator gets an ATT-level trace (every PDU both ways, per link, named by device id): JSON
///   lines, or text when PATH ends in `.txt` or `.log`.
///
/// With one adapter the file is PATH. With several, each adapter's file is PATH with the adapter's
/// 1-based position among the `--adapter` options before the extension: `--trace line.btsnoop` with
/// two adapters writes `line.1.btsnoop` and `line.2.btsnoop`.
///
/// A trace holds raw bytes, secrets sent to devices included: every file is created readable by its
/// owner only (0600) and the command says so on stderr. A trace that cannot be written (a full disk)
/// stops tracing, with one warning, never the run.
final class TraceOutputs: Sendable {
    /// One adapter's trace file.
    struct File: Sendable {
        var adapter: String
        var path: String
        var isBTSnoop: Bool
    }

    /// The file of each adapter spec, in order (see the type's comment for the naming).
    static func paths(for path: String, adapters: [String]) -> [String] {
        guard adapters.count > 1 else { return adapters.map { _ in path } }
        let ns = path as NSString
        let ext = ns.pathExtension
        let stem = ext.isEmpty ? path : ns.deletingPathExtension
        return adapters.indices.map { i in ext.isEmpty ? "\(stem).\(i + 1)" : "\(stem).\(i + 1).\(ext)" }
    }

    /// The ATT trace's format for a path: text for `.txt`/`.log`, JSON lines otherwise.
    static func attFormat(_ path: String) -> ATTTraceWriter.Format {
        ["txt", "log"].contains((path as NSString).pathExtension.lowercased()) ? .text : .jsonLines
    }

    private let warn: @Sendable (String) -> Void
    private let failed = Mutex<Set<String>>([])
    private let writers = Mutex<[String: any TraceCloser]>([:])

    /// `warn` prints one line to stderr (a write error, once per file).
    init(warn: @escaping @Sendable (String) -> Void) {
        self.warn = warn
    }

    /// A tap that writes a btsnoop file at `path` (absolute), for an HCI adapter's options.
    func btsnoopTap(path: String) throws(TraceError) -> HCIPacketTap {
        let writer = try BTSnoopWriter(path: path)
        writers.withLock { $0[path] = writer }
        return HCIPacketTap { [self] packet, received in
            do throws(TraceError) {
                try writer.write(packet, direction: received ? .received : .sent)
            } catch {
                report(error)
            }
        }
    }

    /// `central` with every ATT PDU of its links written to `path` (absolute); links are named by the
    /// inventory id of the device at their address, else by the address.
    func attTraced(_ central: any Central, path: String, names: [BluetoothAddress: String]) throws(TraceError) -> any Central {
        let writer = try ATTTraceWriter(path: path, format: Self.attFormat(path))
        writers.withLock { $0[path] = writer }
        let byValue = Dictionary(names.map { ($0.key.value, $0.value) }, uniquingKeysWith: { a, _ in a })
        return ATTTracingCentral(central, writer: writer, linkName: { byValue[$0.value] ?? $0.description },
                                 onError: { [self] in report($0) })
    }

    /// Flushes and closes every trace; a failure is warned about (once per file).
    func close() {
        let all = writers.withLock { w -> [any TraceCloser] in
            defer { w = [:] }
            return Array(w.values)
        }
        for w in all {
            do throws(TraceError) { try w.closeTrace() } catch { report(error) }
        }
    }

    private func report(_ error: TraceError) {
        let first = failed.withLock { $0.insert(error.path).inserted }
        if first { warn("warning: \(error); the trace stops there, the run goes on") }
    }

    /// The note printed where a trace is written.
    static func secretsNote(_ paths: [String]) -> String {
        "note: \(paths.joined(separator: ", ")) (--trace) holds the raw traffic both ways, any secret sent to a device included"
            + " (written readable by its owner only)"
    }
}

/// What `TraceOutputs.close` needs of a writer.
protocol TraceCloser: Sendable {
    func closeTrace() throws(TraceError)
}

extension BTSnoopWriter: TraceCloser {
    func closeTrace() throws(TraceError) { try close() }
}

extension ATTTraceWriter: TraceCloser {
    func closeTrace() throws(TraceError) { try close() }
}
