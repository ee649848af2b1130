/// Where an HCI controller is reached, parsed from a spec string:
///
/// - `hci:tcp:HOST:PORT` — a TCP stream carrying H4 (Bumble's `tcp-server`, Zephyr native_sim, …)
/// - `hci:serial:/dev/ttyACM0[@BAUD]` — a UART with HCI firmware (8N1, RTS/CTS, default 1000000)
/// - `hci:user:INDEX` — the Linux HCI user channel of `hciINDEX`
public enum AdapterSpec: Sendable, Equatable, CustomStringConvertible {
    case tcp(host: String, port: UInt16)
    case serial(path: String, baud: Int)
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
            let body = rest.dropFirst(7)
            var path = String(body)
            var baud = Self.defaultBaud
            if let at = body.lastIndex(of: "@") {
                path = String(body[..<at])
                let baudText = body[body.index(after: at)...]
                guard let b = Int(baudText) else {
                    throw AdapterSpecError(spec: text, reason: "baud rate '\(baudText)' is not a number")
                }
                guard Self.supportedBauds.contains(b) else {
                    throw AdapterSpecError(spec: text, reason: "baud rate \(b) is not supported; use one of \(Self.supportedBauds.map(String.init).joined(separator: ", "))")
                }
                baud = b
            }
            guard path.hasPrefix("/") else {
                throw AdapterSpecError(spec: text, reason: "serial device '\(path)' is not an absolute path such as /dev/ttyACM0")
            }
            self = .serial(path: path, baud: baud)
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
        case .serial(let path, let baud): return "hci:serial:\(path)@\(baud)"
        case .user(let index): return "hci:user:\(index)"
        }
    }
}

/// A spec string that could not be parsed: the text and what is wrong with it.
public struct AdapterSpecError: Error, Sendable, Equatable, CustomStringConvertible {
    public var spec: String
    public var reason: String
    public var description: String { "invalid adapter '\(spec)': \(reason)" }
}
