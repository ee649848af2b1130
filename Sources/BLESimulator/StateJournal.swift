import BLE
import Foundation
import Support
import Synchronization
import SystemIO

/// The simulator's state file (`--sim-state PATH`): one JSON line per device state change, appended as
/// it happens, so a resumed run meets the devices as a crashed run left them.
///
/// No fsync: the simulated devices live in this process, so only a crash of the process matters, and a
/// SIGKILL keeps what `write(2)` handed to the page cache. The process may die mid-line: on open the
/// file is replayed up to the last complete line and cut there.
///
/// Several processes may share one file (the stations of a line on the simulator): it is opened with
/// `O_APPEND`, so each line is written whole at the end by one write(2), and the read-and-cut on open
/// holds an exclusive lock (`flock`) that keeps another process from cutting what it just read. Each
/// process replays what was there when it opened; the file holds every process's events, so a fold of
/// it (a process opening it later) is the device side of the whole line.
///
/// Line format: `{"id":"SN-0001","event":"control","hex":"010a0b0c","busy":false}`; events are
/// `connect_attempt`, `connected`, `control` (hex, busy, and `link` when the link was encrypted),
/// `blob` (hex), `fault` (fault), `paired` (central, method, level, sc, key_size, and `key_sha256` when
/// the device kept the bond — a digest, never the key), `pairing_failed` (reason), `encrypted` and
/// `forgot_bond` (central), and `smp` for an MCUmgr device (`smp`: `upload_started` with len, image and
/// sha; `upload_chunk` with off and hex; `erase`; `mark_test` with permanent; `confirm`; `reset`;
/// `setting_write` with name and hex; `setting_delete` with name; `settings_save`; `settings_load`;
/// `file_write` with name, off and hex).
final class StateJournal: Sendable {
    let path: String
    private let fd: Mutex<Int32>

    /// Opens (creating it readable by its owner only: it holds what devices received, secrets
    /// included) the file, returns it with the events to replay in order.
    static func open(path: String) throws(SimulatorError) -> (StateJournal, [(String, DeviceEvent)]) {
        let fd: Int32
        do throws(FileError) {
            fd = try FileIO.open(path, O_RDWR | O_APPEND | O_CREAT, mode: 0o600)
        } catch {
            throw SimulatorError("cannot open the simulator state file: \(String(cString: strerror(error.errno)))", file: path)
        }
        // Another process opening the file waits here until this one has read it and cut a torn line.
        while flock(fd, LOCK_EX) != 0 && errno == EINTR {}
        defer { _ = flock(fd, LOCK_UN) }
        let existing = FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
        var events: [(String, DeviceEvent)] = []
        var start = 0
        var line = 1
        var complete = 0
        while start < existing.count {
            guard let nl = existing[start...].firstIndex(of: 0x0A) else { break }  // a truncated last line
            let bytes = Array(existing[start..<nl])
            if !bytes.isEmpty {
                guard let e = decode(bytes) else {
                    Glibc.close(fd)
                    throw SimulatorError("unreadable simulator state line", file: path, at: .init(line: line, column: 1),
                                         hint: "the file is written by the simulator; delete it to start from fresh devices")
                }
                events.append(e)
            }
            start = nl + 1
            complete = start
            line += 1
        }
        // Cut a partial last line so that new lines start clean.
        if complete < existing.count, ftruncate(fd, off_t(complete)) != 0 {
            let why = String(cString: strerror(errno))
            close(fd)
            throw SimulatorError("cannot cut the partial last line of the simulator state file: \(why)", file: path)
        }
        return (StateJournal(path: path, fd: fd), events)
    }

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = Mutex(fd)
    }

    deinit {
        fd.withLock { fd in
            if fd >= 0 { Glibc.close(fd) }
        }
    }

    /// Appends one event line. A failed write is reported once on stderr and the simulation goes on:
    /// the state file is a test aid, not the run's journal.
    func append(id: String, _ event: DeviceEvent) {
        let bytes = Array(Self.line(id: id, event).utf8)
        fd.withLock { fd in
            guard fd >= 0 else { return }
            do throws(FileError) {
                try FileIO.writeAll(fd, bytes, path: path)
            } catch {
                let message = "provision: simulator state file \(path): write failed: \(String(cString: strerror(error.errno))); no longer recording\n"
                try? FileHandle.standardError.write(contentsOf: Data(message.utf8))
                FileIO.close(fd)
                fd = -1
            }
        }
    }

    /// One event as a JSON line (with its newline).
    static func line(id: String, _ event: DeviceEvent) -> String {
        var line = "{\"id\":" + JSONString.quoted(id) + ",\"event\":"
        switch event {
        case .connectAttempt: line += "\"connect_attempt\""
        case .connected: line += "\"connected\""
        case .control(let bytes, let busy, let link):
            line += "\"control\",\"hex\":\"\(bytes.hexString)\",\"busy\":\(busy)"
            if link != .none { line += ",\"link\":\"\(link.name)\"" }
        case .blob(let bytes): line += "\"blob\",\"hex\":\"\(bytes.hexString)\""
        case .fault(let name): line += "\"fault\",\"fault\":" + JSONString.quoted(name)
        case .paired(let p):
            line += "\"paired\",\"central\":" + JSONString.quoted(p.central) + ",\"method\":\"\(p.method.rawValue)\",\"level\":\"\(p.level.name)\""
                + ",\"sc\":\(p.secureConnections),\"key_size\":\(p.keySize)"
            if let digest = p.keyDigest { line += ",\"key_sha256\":\"\(digest)\"" }
        case .pairingFailed(let reason): line += "\"pairing_failed\",\"reason\":" + JSONString.quoted(reason)
        case .encrypted(let central): line += "\"encrypted\",\"central\":" + JSONString.quoted(central)
        case .forgotBond(let central): line += "\"forgot_bond\",\"central\":" + JSONString.quoted(central)
        case .store(let path, let bytes):
            line += "\"store\",\"service\":\"\(path.service)\",\"characteristic\":\"\(path.characteristic)\",\"hex\":\"\(bytes.hexString)\""
        case .smp(let e):
            line += "\"smp\",\"smp\":"
            switch e {
            case .uploadStarted(let sha, let length, let image):
                line += "\"upload_started\",\"len\":\(length),\"image\":\(image)"
                if let sha { line += ",\"sha\":\"\(sha.hexString)\"" }
            case .uploadChunk(let offset, let data): line += "\"upload_chunk\",\"off\":\(offset),\"hex\":\"\(data.hexString)\""
            case .erase: line += "\"erase\""
            case .markTest(let permanent): line += "\"mark_test\",\"permanent\":\(permanent)"
            case .confirm: line += "\"confirm\""
            case .reset: line += "\"reset\""
            case .settingWrite(let name, let value): line += "\"setting_write\",\"name\":" + JSONString.quoted(name) + ",\"hex\":\"\(value.hexString)\""
            case .settingDelete(let name): line += "\"setting_delete\",\"name\":" + JSONString.quoted(name)
            case .settingsSave: line += "\"settings_save\""
            case .settingsLoad: line += "\"settings_load\""
            case .fileWrite(let name, let offset, let data):
                line += "\"file_write\",\"name\":" + JSONString.quoted(name) + ",\"off\":\(offset),\"hex\":\"\(data.hexString)\""
            }
        }
        line += "}\n"
        return line
    }

    private struct Line: Decodable {
        var id: String
        var event: String
        var hex: String?
        var busy: Bool?
        var fault: String?
        var link: String?
        var central: String?
        var method: String?
        var level: String?
        var sc: Bool?
        var key_size: Int?
        var key_sha256: String?
        var reason: String?
        var service: String?
        var characteristic: String?
        var smp: String?
        var len: Int?
        var image: Int?
        var sha: String?
        var off: Int?
        var permanent: Bool?
        var name: String?
    }

    private static func smpEvent(_ l: Line) -> SMPDeviceEvent? {
        let bytes = l.hex.flatMap { [UInt8](hex: $0) }
        switch l.smp {
        case "upload_started":
            guard let len = l.len, let image = l.image else { return nil }
            var sha: [UInt8]?
            if let text = l.sha {
                guard let b = [UInt8](hex: text) else { return nil }
                sha = b
            }
            return .uploadStarted(sha: sha, length: len, image: image)
        case "upload_chunk":
            guard let off = l.off, let bytes else { return nil }
            return .uploadChunk(offset: off, data: bytes)
        case "erase": return .erase
        case "mark_test": return l.permanent.map { .markTest(permanent: $0) }
        case "confirm": return .confirm
        case "reset": return .reset
        case "setting_write":
            guard let name = l.name, let bytes else { return nil }
            return .settingWrite(name: name, value: bytes)
        case "setting_delete": return l.name.map { .settingDelete(name: $0) }
        case "settings_save": return .settingsSave
        case "settings_load": return .settingsLoad
        case "file_write":
            guard let name = l.name, let off = l.off, let bytes else { return nil }
            return .fileWrite(name: name, offset: off, data: bytes)
        default: return nil
        }
    }

    private static func level(_ name: String?) -> SecurityLevel? {
        guard let name else { return SecurityLevel.none }
        return SecurityLevel.allCases.first { $0.name == name }
    }

    static func decode(_ bytes: [UInt8]) -> (String, DeviceEvent)? {
        if let fast = FastLine(bytes) { return fast.event }
        guard let l = try? JSONDecoder().decode(Line.self, from: Data(bytes)) else { return nil }
        switch l.event {
        case "connect_attempt": return (l.id, .connectAttempt)
        case "connected": return (l.id, .connected)
        case "control":
            guard let h = l.hex, let b = [UInt8](hex: h), let link = level(l.link) else { return nil }
            return (l.id, .control(b, busy: l.busy ?? false, link: link))
        case "blob":
            guard let h = l.hex, let b = [UInt8](hex: h) else { return nil }
            return (l.id, .blob(b))
        case "fault":
            guard let f = l.fault else { return nil }
            return (l.id, .fault(f))
        case "paired":
            guard let central = l.central, let method = l.method.flatMap(SecurityMethod.init(rawValue:)),
                  let level = level(l.level), let sc = l.sc, let size = l.key_size else { return nil }
            return (l.id, .paired(PairingRecord(central: central, method: method, level: level, secureConnections: sc,
                                                keySize: size, keyDigest: l.key_sha256)))
        case "pairing_failed":
            guard let reason = l.reason else { return nil }
            return (l.id, .pairingFailed(reason))
        case "encrypted":
            guard let central = l.central else { return nil }
            return (l.id, .encrypted(central: central))
        case "forgot_bond":
            guard let central = l.central else { return nil }
            return (l.id, .forgotBond(central: central))
        case "store":
            guard let h = l.hex, let b = [UInt8](hex: h), let s = l.service.flatMap(BluetoothUUID.init),
                  let c = l.characteristic.flatMap(BluetoothUUID.init) else { return nil }
            return (l.id, .store(CommandBehaviour.Path(service: s, characteristic: c), b))
        case "smp":
            return smpEvent(l).map { (l.id, .smp($0)) }
        default: return nil
        }
    }
}

/// Reads the lines `StateJournal.append` writes (fixed key order, no escapes in values) without
/// JSONDecoder, which is ten times slower on a large state file. Anything else falls back to the
/// decoder.
private struct FastLine {
    let event: (String, DeviceEvent)

    init?(_ b: [UInt8]) {
        var i = 0
        func expect(_ literal: StaticString) -> Bool {
            let n = literal.utf8CodeUnitCount
            guard i + n <= b.count else { return false }
            let ok = literal.withUTF8Buffer { lit in
                for k in 0..<n where b[i + k] != lit[k] { return false }
                return true
            }
            if ok { i += n }
            return ok
        }
        /// A string value up to the next quote; nil on an escape.
        func string() -> String? {
            let start = i
            while i < b.count, b[i] != 0x22 {
                if b[i] == 0x5C { return nil }
                i += 1
            }
            guard i < b.count else { return nil }
            defer { i += 1 }
            return String(decoding: b[start..<i], as: UTF8.self)
        }
        guard expect("{\"id\":\""), let id = string(), expect(",\"event\":\""), let kind = string() else { return nil }
        switch kind {
        case "connect_attempt":
            guard expect("}"), i == b.count else { return nil }
            event = (id, .connectAttempt)
        case "connected":
            guard expect("}"), i == b.count else { return nil }
            event = (id, .connected)
        case "control", "blob":
            guard expect(",\"hex\":\""), let h = string(), let bytes = [UInt8](hex: h) else { return nil }
            if kind == "blob" {
                guard expect("}"), i == b.count else { return nil }
                event = (id, .blob(bytes))
            } else {
                let busy: Bool
                if expect(",\"busy\":true") { busy = true } else if expect(",\"busy\":false") { busy = false } else { return nil }
                var link = SecurityLevel.none
                if expect(",\"link\":\"") {
                    guard let name = string(), let l = SecurityLevel.allCases.first(where: { $0.name == name }) else { return nil }
                    link = l
                }
                guard expect("}"), i == b.count else { return nil }
                event = (id, .control(bytes, busy: busy, link: link))
            }
        case "fault":
            guard expect(",\"fault\":\""), let f = string(), expect("}"), i == b.count else { return nil }
            event = (id, .fault(f))
        default:
            return nil
        }
    }
}
