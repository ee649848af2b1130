import BLE
import Support

/// Where an HCI controller is reached, parsed from a spec string:
///
/// - `hci:tcp:HOST:PORT` — a TCP stream carrying H4 (Bumble's `tcp-server`, Zephyr native_sim, …)
/// - `hci:serial:/dev/ttyACM0?baud=1000000&flow=rtscts` (or `hci:serial:/dev/ttyACM0@BAUD`) — a UART
///   with HCI firmware: 8N1, `baud` (default 1000000), `flow` `rtscts` (default) or `none`
/// - `hci:user:INDEX` — the Linux HCI user channel of `hciINDEX`
public enum AdapterSpec: Sendable, Equatable, CustomStringConvertible {
    case tcp(host: String, port: UInt16)
    /// `flowControl`: RTS/CTS hardware flow control.
    case serial(path: String, baud: Int, flowControl: Bool = true)
    case user(index: UInt16)

    public static let defaultBaud = 1_000_000
    public static let supportedBauds = [9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 576000,
                                        921600, 1_000_000, 1_500_000, 2_000_000, 3_000_000, 4_000_000]

    public init(parsing text: String) throws(AdapterSpecError) {
        let hint = "expected hci:tcp:HOST:PORT, hci:serial:/dev/ttyX[@BAUD] or hci:user:INDEX"
        guard text.hasPrefix("hci:") else {
            throw AdapterSpecError(spec: text, reason: "does not start with 'hci:'; \(hint)")
        }
        let rest = text.dropFirst(4)
        if rest.hasPrefix("tcp:") {
            let body = rest.dropFirst(4)
            guard let colon = body.lastIndex(of: ":") else {
                throw AdapterSpecError(spec: text, reason: "missing ':PORT'; expected hci:tcp:HOST:PORT")
            }
            var host = String(body[..<colon])
            let portText = body[body.index(after: colon)...]
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { throw AdapterSpecError(spec: text, reason: "empty host; expected hci:tcp:HOST:PORT") }
            guard let port = UInt16(portText), port > 0 else {
                throw AdapterSpecError(spec: text, reason: "port '\(portText)' is not a number in 1...65535")
            }
            self = .tcp(host: host, port: port)
        } else if rest.hasPrefix("serial:") {
            var body = rest.dropFirst(7)
            var query: Substring?
            if let mark = body.firstIndex(of: "?") {
                query = body[body.index(after: mark)...]
                body = body[..<mark]
            }
            var path = String(body)
            var baud: Int?
            var flow = true
            func parseBaud(_ baudText: Substring) throws(AdapterSpecError) -> Int {
                guard let b = Int(baudText) else {
                    throw AdapterSpecError(spec: text, reason: "baud rate '\(baudText)' is not a number")
                }
                guard Self.supportedBauds.contains(b) else {
                    throw AdapterSpecError(spec: text, reason: "baud rate \(b) is not supported; use one of \(Self.supportedBauds.map(String.init).joined(separator: ", "))")
                }
                return b
            }
            if let at = body.lastIndex(of: "@") {
                path = String(body[..<at])
                baud = try parseBaud(body[body.index(after: at)...])
            }
            if let query {
                var seen: Set<String> = []
                for pair in query.split(separator: "&", omittingEmptySubsequences: false) {
                    guard let eq = pair.firstIndex(of: "="), !pair[..<eq].isEmpty else {
                        throw AdapterSpecError(spec: text, reason: "'\(pair)' is not name=value; the serial options are baud and flow (e.g. ?baud=1000000&flow=rtscts)")
                    }
                    let name = pair[..<eq].lowercased()
                    let value = pair[pair.index(after: eq)...]
                    guard seen.insert(name).inserted else { throw AdapterSpecError(spec: text, reason: "'\(name)' is given twice") }
                    switch name {
                    case "baud":
                        guard baud == nil else { throw AdapterSpecError(spec: text, reason: "the baud rate is given twice (@ and ?baud=)") }
                        baud = try parseBaud(value)
                    case "flow":
                        switch value.lowercased() {
                        case "rtscts", "hw", "hardware", "on": flow = true
                        case "none", "off": flow = false
                        default: throw AdapterSpecError(spec: text, reason: "flow '\(value)' is not rtscts or none")
                        }
                    default:
                        let hint = Suggestions.hint(for: name, in: ["baud", "flow"]).map { " (\($0))" } ?? ""
                        throw AdapterSpecError(spec: text, reason: "unknown serial option '\(name)'\(hint); the serial options are baud and flow")
                    }
                }
            }
            guard path.hasPrefix("/") else {
                throw AdapterSpecError(spec: text, reason: "serial device '\(path)' is not an absolute path such as /dev/ttyACM0")
            }
            self = .serial(path: path, baud: baud ?? Self.defaultBaud, flowControl: flow)
        } else if rest.hasPrefix("user:") {
            var body = rest.dropFirst(5)
            if body.hasPrefix("hci") { body = body.dropFirst(3) }
            guard let index = UInt16(body) else {
                throw AdapterSpecError(spec: text, reason: "'\(body)' is not an adapter index; expected hci:user:0 for hci0")
            }
            self = .user(index: index)
        } else {
            let kind = rest.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            throw AdapterSpecError(spec: text, reason: "unknown transport '\(kind)'; \(hint)")
        }
    }

    public var description: String {
        switch self {
        case .tcp(let host, let port): return host.contains(":") ? "hci:tcp:[\(host)]:\(port)" : "hci:tcp:\(host):\(port)"
        case .serial(let path, let baud, let flow): return "hci:serial:\(path)?baud=\(baud)&flow=\(flow ? "rtscts" : "none")"
        case .user(let index): return "hci:user:\(index)"
        }
    }

    /// The adapter's name for what is kept about it between runs (its generated station identity): the
    /// transport without its speed settings, `hci:serial:/dev/ttyACM0`, `hci:tcp:HOST:PORT`, `hci:user:0`.
    /// (A dongle that may come back as another ttyACM is best named by /dev/serial/by-id/….)
    public var identityKey: String {
        switch self {
        case .serial(let path, _, _): return "hci:serial:\(path)"
        default: return description
        }
    }
}

/// A spec string that could not be parsed: the text and what is wrong with it.
public struct AdapterSpecError: Error, Sendable, Equatable, CustomStringConvertible {
    public var spec: String
    public var reason: String
    public var description: String { "invalid adapter '\(spec)': \(reason)" }
}

/// An adapter spec with its options: `hci:tcp:127.0.0.1:9000,slots=16,phy=1m`. Options follow the
/// transport after commas, each `name=value`:
///
/// | option | values | default |
/// |---|---|---|
/// | `slots` | links held at once, 1–64 | 8 (or `--slots`) |
/// | `scan-interval`, `scan-window` | 2.5ms–10.24s, window ≤ interval | 60ms, 60ms |
/// | `scan` | `active`, `passive` | `active` |
/// | `conn-interval` | `MIN-MAX` or one value, 7.5ms–4s | `15ms-30ms` |
/// | `supervision-timeout` | 100ms–32s | `5s` |
/// | `data-length` | `on`, `off` | `on` (where supported) |
/// | `phy` | `2m`, `1m` | `2m` (where supported) |
/// | `accept-list` | `auto`, `on`, `off` | `auto` |
/// | `scan-while-connecting` | `auto`, `on`, `off` | `auto` (LE Read Supported States) |
/// | `rotation` | 100ms–60s | `2s` |
/// | `address` | the station's identity: a static random address (`C0:…`–`FF:…`) | the controller's, else kept with the bonds |
public struct AdapterConfiguration: Sendable, Equatable {
    public var spec: AdapterSpec
    public var slots: Int?
    public var scanInterval: Duration?
    public var scanWindow: Duration?
    public var activeScan: Bool?
    public var connectionInterval: (min: Duration, max: Duration)?
    public var supervisionTimeout: Duration?
    public var dataLength: Bool?
    public var twoMegabitPHY: Bool?
    public var acceptList: HCIHost.AcceptListMode?
    /// `.some(nil)`: `auto`.
    public var scanWhileConnecting: Bool??
    public var rotation: Duration?
    /// `address=`: the station's identity on this adapter.
    public var address: BluetoothAddress?

    public static let optionNames = ["slots", "scan-interval", "scan-window", "scan", "conn-interval", "supervision-timeout",
                                     "data-length", "phy", "accept-list", "scan-while-connecting", "rotation", "address"]

    public init(parsing text: String) throws(AdapterSpecError) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        spec = try AdapterSpec(parsing: parts.first ?? text)
        func fail(_ reason: String) -> AdapterSpecError { AdapterSpecError(spec: text, reason: reason) }
        var given: Set<String> = []
        for option in parts.dropFirst() {
            guard let eq = option.firstIndex(of: "="), !option[..<eq].isEmpty else {
                throw fail("option '\(option)' is not name=value; options: \(Self.optionNames.joined(separator: ", "))")
            }
            let name = String(option[..<eq]).lowercased()
            // `slots=1,slots=2`: which one was meant cannot be known.
            guard given.insert(name).inserted else { throw fail("option '\(name)' is given twice") }
            let value = String(option[option.index(after: eq)...]).lowercased()
            func duration(_ range: ClosedRange<Double>) throws(AdapterSpecError) -> Duration {
                guard let ms = Self.milliseconds(value), range.contains(ms) else {
                    throw fail("\(name) '\(value)' is not a duration from \(Self.text(range.lowerBound)) to \(Self.text(range.upperBound)) (write e.g. 30ms or 2s)")
                }
                return .microseconds(Int64((ms * 1000).rounded()))
            }
            func onOff() throws(AdapterSpecError) -> Bool {
                switch value {
                case "on", "true", "yes": return true
                case "off", "false", "no": return false
                default: throw fail("\(name) '\(value)' is not on or off")
                }
            }
            switch name {
            case "slots":
                guard let n = Int(value), (1...64).contains(n) else { throw fail("slots '\(value)' is not a whole number from 1 to 64") }
                slots = n
            case "scan-interval":
                scanInterval = try duration(2.5...10240)
            case "scan-window":
                scanWindow = try duration(2.5...10240)
            case "scan":
                switch value {
                case "active": activeScan = true
                case "passive": activeScan = false
                default: throw fail("scan '\(value)' is not active or passive")
                }
            case "conn-interval":
                let bounds = value.split(separator: "-", maxSplits: 1).map(String.init)
                var parsed: [Duration] = []
                for b in bounds {
                    guard let ms = Self.milliseconds(b), (7.5...4000).contains(ms) else {
                        throw fail("conn-interval '\(value)' is not MIN-MAX or one duration from 7.5ms to 4s")
                    }
                    parsed.append(.microseconds(Int64((ms * 1000).rounded())))
                }
                guard let lo = parsed.first, let hi = parsed.last, lo <= hi else {
                    throw fail("conn-interval '\(value)': the minimum is above the maximum")
                }
                connectionInterval = (lo, hi)
            case "supervision-timeout":
                supervisionTimeout = try duration(100...32000)
            case "data-length":
                dataLength = try onOff()
            case "phy":
                switch value {
                case "2m": twoMegabitPHY = true
                case "1m": twoMegabitPHY = false
                default: throw fail("phy '\(value)' is not 2m or 1m")
                }
            case "accept-list":
                guard let mode = HCIHost.AcceptListMode(rawValue: value) else { throw fail("accept-list '\(value)' is not auto, on or off") }
                acceptList = mode
            case "scan-while-connecting":
                scanWhileConnecting = value == "auto" ? .some(nil) : .some(try onOff())
            case "rotation":
                rotation = try duration(100...60000)
            case "address":
                guard let a = BluetoothAddress(value, kind: .random) else {
                    throw fail("address '\(value)' is not an address such as C4:5A:00:00:00:01")
                }
                guard a.isValidStaticAddress else {
                    throw fail("address '\(a)' is not a static random address: its first byte must be C0–FF and the rest not all 0 or all 1 bits")
                }
                address = a
            default:
                throw fail("unknown option '\(name)'; options: \(Self.optionNames.joined(separator: ", "))")
            }
        }
        if let i = scanInterval ?? (scanWindow != nil ? .milliseconds(60) : nil), let w = scanWindow, w > i {
            throw fail("scan-window \(w) is longer than scan-interval \(i)")
        }
    }

    /// Applies the options given over `options`.
    public func apply(to options: inout HCIAdapter.Options) {
        if let v = slots { options.connectionSlots = v }
        if let v = scanInterval { options.scanInterval = v }
        if let v = scanWindow { options.scanWindow = v }
        if options.scanWindow > options.scanInterval { options.scanWindow = options.scanInterval }
        if let v = activeScan { options.activeScan = v }
        if let v = connectionInterval {
            options.connectionIntervalMin = v.min
            options.connectionIntervalMax = v.max
        }
        if let v = supervisionTimeout { options.supervisionTimeout = v }
        if let v = dataLength { options.dataLength = v }
        if let v = twoMegabitPHY { options.twoMegabitPHY = v }
        if let v = acceptList { options.acceptList = v }
        if let v = scanWhileConnecting { options.scanWhileConnecting = v }
        if let v = rotation { options.rotation = v }
        if let v = address { options.staticRandomAddress = v }
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.spec == b.spec && a.slots == b.slots && a.scanInterval == b.scanInterval && a.scanWindow == b.scanWindow
            && a.activeScan == b.activeScan && a.connectionInterval?.min == b.connectionInterval?.min
            && a.connectionInterval?.max == b.connectionInterval?.max && a.supervisionTimeout == b.supervisionTimeout
            && a.dataLength == b.dataLength && a.twoMegabitPHY == b.twoMegabitPHY && a.acceptList == b.acceptList
            && a.scanWhileConnecting == b.scanWhileConnecting && a.rotation == b.rotation && a.address == b.address
    }

    /// `30ms`, `7.5ms`, `2s` → milliseconds; nil when malformed.
    static func milliseconds(_ text: String) -> Double? {
        let (number, scale): (Substring, Double)
        if text.hasSuffix("ms") {
            (number, scale) = (text.dropLast(2), 1)
        } else if text.hasSuffix("s") {
            (number, scale) = (text.dropLast(1), 1000)
        } else {
            return nil
        }
        guard let v = Double(number), v.isFinite, v >= 0, number.allSatisfy({ $0.isNumber || $0 == "." }) else { return nil }
        return v * scale
    }

    private static func text(_ ms: Double) -> String {
        ms >= 1000 ? "\(ms / 1000)s".replacingOccurrences(of: ".0s", with: "s") : "\(ms)ms".replacingOccurrences(of: ".0ms", with: "ms")
    }
}
