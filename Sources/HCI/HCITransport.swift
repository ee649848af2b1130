#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CBlueZ
import Foundation
import Synchronization

/// A byte stream to a controller carrying H4 packets.
public protocol HCITransport: AnyObject, Sendable {
    /// Bytes as they arrive, in chunks of any size; finishes (or throws) when the transport closes.
    var reads: AsyncThrowingStream<[UInt8], any Error> { get }
    /// Queues bytes (one or more whole H4 packets) for the controller, in order. Never blocks; throws
    /// when the transport has failed or closed.
    func write(_ bytes: [UInt8]) throws
    /// Closes the transport; `reads` finishes. Idempotent.
    func close()
}

/// An operating-system failure of a transport, with its errno.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var errno: Int32
    public var hint: String?

    public init(_ operation: String, errno: Int32, hint: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.hint = hint
    }

    public var description: String {
        let text = errno == 0 ? "" : ": \(String(cString: strerror(errno))) (errno \(errno))"
        return "\(operation)\(text)" + (hint.map { "; \($0)" } ?? "")
    }
}

/// Retries a system call on EINTR; throws with errno when it fails.
@discardableResult
func posixCall(_ operation: String, _ body: () -> Int32) throws(TransportError) -> Int32 {
    while true {
        let r = body()
        if r >= 0 { return r }
        let e = errno
        if e == EINTR { continue }
        throw TransportError(operation, errno: e)
    }
}

/// A transport over one non-blocking file descriptor (TCP socket, tty, HCI user-channel socket).
///
/// One I/O thread per transport blocks in poll(2) on the descriptor and a wake-up pipe: it feeds
/// `reads`, and drains the outbound buffer when the descriptor becomes writable. `write` never
/// blocks the caller: it sends what the descriptor takes now and leaves the rest to the I/O thread.
/// Sockets send with MSG_NOSIGNAL, so a peer that has gone away is an error (EPIPE, ECONNRESET) and
/// never a SIGPIPE; the library does not depend on how the process handles signals.
public final class FileDescriptorTransport: HCITransport {
    /// Bytes queued for the controller beyond which the transport fails (the controller stopped reading).
    public static let outboundLimit = 4 << 20

    private struct State {
        var fd: Int32
        var wakeRead: Int32
        var wakeWrite: Int32
        /// `close()` was called.
        var closed = false
        /// The I/O thread has ended.
        var threadDone = false
        var failure: TransportError?
        var outbound: [UInt8] = []
        var sent = 0

        var pending: Int { outbound.count - sent }

        /// Wakes the I/O thread (the pipe's read end stays open until both sides are done, so this
        /// never raises SIGPIPE).
        func poke() {
            var one: UInt8 = 1
            _ = Glibc.write(wakeWrite, &one, 1)
        }

        /// Closes every descriptor once `close()` was called and the I/O thread has ended.
        mutating func releaseIfDone() {
            guard closed && threadDone, fd >= 0 else { return }
            _ = Glibc.close(fd)
            _ = Glibc.close(wakeRead)
            _ = Glibc.close(wakeWrite)
            fd = -1
        }
    }

    /// The descriptor, the outbound buffer and the transport's fate, shared with the I/O thread.
    private final class Shared: Sendable {
        let state: Mutex<State>
        let isSocket: Bool
        init(fd: Int32, wakeRead: Int32, wakeWrite: Int32, isSocket: Bool) {
            state = Mutex(State(fd: fd, wakeRead: wakeRead, wakeWrite: wakeWrite))
            self.isSocket = isSocket
        }

        /// Sends as much of the outbound buffer as the descriptor takes now (lock held by the caller).
        func flush(_ s: inout State) throws(TransportError) {
            while s.pending > 0 {
                let n = s.outbound.withUnsafeBytes { raw -> Int in
                    let base = raw.baseAddress.map { $0 + s.sent }
                    return isSocket ? Glibc.send(s.fd, base, s.pending, Int32(MSG_NOSIGNAL)) : Glibc.write(s.fd, base, s.pending)
                }
                if n < 0 {
                    let e = errno
                    if e == EINTR { continue }
                    if e == EAGAIN || e == EWOULDBLOCK { break }
                    let error = TransportError(e == EPIPE || e == ECONNRESET ? "the controller closed the connection" : "write", errno: e)
                    s.failure = error
                    throw error
                }
                s.sent += n
            }
            if s.pending == 0 {
                s.outbound.removeAll(keepingCapacity: s.outbound.count <= 65536)
                s.sent = 0
            } else if s.sent > 65536 {
                s.outbound.removeFirst(s.sent)
                s.sent = 0
            }
        }
    }

    private let shared: Shared
    public let reads: AsyncThrowingStream<[UInt8], any Error>

    /// Takes ownership of `fd` (made non-blocking). `isSocket`: send with MSG_NOSIGNAL.
    public init(fd: Int32, name: String, isSocket: Bool) throws(TransportError) {
        var pipeFDs: [Int32] = [0, 0]
        try posixCall("pipe") { pipe(&pipeFDs) }
        let wakeRead = pipeFDs[0]
        let wakeWrite = pipeFDs[1]
        for d in [fd, wakeRead, wakeWrite] {
            let flags = fcntl(d, F_GETFL)
            _ = fcntl(d, F_SETFL, flags | O_NONBLOCK)
        }
        let shared = Shared(fd: fd, wakeRead: wakeRead, wakeWrite: wakeWrite, isSocket: isSocket)
        self.shared = shared
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        reads = stream
        let thread = Thread {
            Self.ioLoop(shared: shared, fd: fd, wake: wakeRead, continuation: continuation)
            shared.state.withLock { s in
                s.threadDone = true
                s.releaseIfDone()
            }
        }
        thread.name = "hci-io \(name)"
        thread.start()
    }

    private static func ioLoop(shared: Shared, fd: Int32, wake: Int32,
                               continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var drain = [UInt8](repeating: 0, count: 64)
        while true {
            let (closed, wantsOut) = shared.state.withLock { s in (s.closed, s.pending > 0) }
            if closed {
                continuation.finish()
                return
            }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN) | (wantsOut ? Int16(POLLOUT) : 0), revents: 0),
                       pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, -1)
            if n < 0 {
                if errno == EINTR { continue }
                continuation.finish(throwing: TransportError("poll", errno: errno))
                return
            }
            if fds[1].revents != 0 {
                // A wake-up: closed, or bytes queued for POLLOUT. Drain it and look again.
                _ = drain.withUnsafeMutableBytes { read(wake, $0.baseAddress, $0.count) }
                continue
            }
            if fds[0].revents & Int16(POLLOUT) != 0 {
                let failed = shared.state.withLock { s -> TransportError? in
                    do throws(TransportError) { try shared.flush(&s) } catch { return error }
                    return nil
                }
                if let failed {
                    continuation.finish(throwing: failed)
                    return
                }
            }
            if fds[0].revents & ~Int16(POLLOUT) != 0 {
                let r = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if r > 0 {
                    continuation.yield(Array(buffer[0..<r]))
                } else if r == 0 {
                    continuation.finish(throwing: TransportError("the controller closed the connection", errno: 0))
                    return
                } else {
                    let e = errno
                    if e == EINTR || e == EAGAIN || e == EWOULDBLOCK { continue }
                    continuation.finish(throwing: TransportError("read", errno: e))
                    return
                }
            }
        }
    }

    public func write(_ bytes: [UInt8]) throws {
        try shared.state.withLock { s throws(TransportError) in
            if let failure = s.failure { throw failure }
            guard !s.closed, s.fd >= 0 else { throw TransportError("write on a closed transport", errno: EBADF) }
            let hadPending = s.pending > 0
            s.outbound.append(contentsOf: bytes)
            if !hadPending { try shared.flush(&s) }
            if s.pending > Self.outboundLimit {
                let error = TransportError("the controller is not reading (\(s.pending) bytes waiting)", errno: 0)
                s.failure = error
                throw error
            }
            // Bytes left over: the I/O thread must watch for POLLOUT.
            if !hadPending && s.pending > 0 { s.poke() }
        }
    }

    public func close() {
        shared.state.withLock { s in
            guard !s.closed else { return }
            s.closed = true
            s.poke()
            s.releaseIfDone()
        }
    }

    deinit {
        close()
    }
}

/// Opening the three kinds of transport.
public enum HCITransports {
    public static func open(_ spec: AdapterSpec, connectTimeout: Duration = .seconds(5)) throws -> FileDescriptorTransport {
        switch spec {
        case .tcp(let host, let port): return try openTCP(host: host, port: port, timeout: connectTimeout)
        case .serial(let path, let baud, let flow): return try openSerial(path: path, baud: baud, flowControl: flow)
        case .user(let index): return try openUserChannel(index: index)
        }
    }

    /// Connects to HOST:PORT with a deadline (non-blocking connect, then poll).
    public static func openTCP(host: String, port: UInt16, timeout: Duration) throws -> FileDescriptorTransport {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw TransportError("cannot resolve '\(host)': \(String(cString: gai_strerror(rc)))", errno: 0)
        }
        defer { freeaddrinfo(list) }
        var lastError = TransportError("connect to \(host):\(port)", errno: ECONNREFUSED)
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        let ms = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        while let ai = cursor {
            cursor = ai.pointee.ai_next
            let fd = socket(ai.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd < 0 { lastError = TransportError("socket", errno: errno); continue }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            var r = connect(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen)
            if r < 0 && errno == EINPROGRESS {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                var n: Int32
                repeat { n = poll(&p, 1, ms) } while n < 0 && errno == EINTR
                if n == 0 {
                    _ = Glibc.close(fd)
                    lastError = TransportError("connect to \(host):\(port) timed out after \(timeout)", errno: ETIMEDOUT)
                    continue
                }
                var soError: Int32 = 0
                var len = socklen_t(MemoryLayout<Int32>.size)
                _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len)
                if soError != 0 { errno = soError; r = -1 } else { r = 0 }
            }
            if r < 0 {
                lastError = TransportError("connect to \(host):\(port)", errno: errno,
                                           hint: "is the controller (e.g. the Bumble fleet) running?")
                _ = Glibc.close(fd)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            return try FileDescriptorTransport(fd: fd, name: "tcp:\(host):\(port)", isSocket: true)
        }
        throw lastError
    }

    private static func speed(for baud: Int) -> speed_t? {
        switch baud {
        case 9600: return speed_t(B9600)
        case 19200: return speed_t(B19200)
        case 38400: return speed_t(B38400)
        case 57600: return speed_t(B57600)
        case 115200: return speed_t(B115200)
        case 230400: return speed_t(B230400)
        case 460800: return speed_t(B460800)
        case 500000: return speed_t(B500000)
        case 576000: return speed_t(B576000)
        case 921600: return speed_t(B921600)
        case 1_000_000: return speed_t(B1000000)
        case 1_500_000: return speed_t(B1500000)
        case 2_000_000: return speed_t(B2000000)
        case 3_000_000: return speed_t(B3000000)
        case 4_000_000: return speed_t(B4000000)
        default: return nil
        }
    }

    /// Opens a UART raw, 8N1, at `baud`, with RTS/CTS hardware flow control unless `flowControl` is
    /// false, and checks that the port took those settings (a port that cannot run at that speed, or
    /// without flow control lines, says so instead of garbling every byte).
    public static func openSerial(path: String, baud: Int, flowControl: Bool = true) throws -> FileDescriptorTransport {
        guard let speed = speed(for: baud) else { throw TransportError("baud rate \(baud) is not supported", errno: EINVAL) }
        let fd = Glibc.open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        if fd < 0 {
            let e = errno
            let hint: String? = e == EACCES ? "add the user to the 'dialout' group" : e == ENOENT ? "is the dongle plugged in?" : nil
            throw TransportError("open \(path)", errno: e, hint: hint)
        }
        var t = termios()
        if tcgetattr(fd, &t) != 0 {
            let e = errno
            _ = Glibc.close(fd)
            throw TransportError("\(path) is not a serial port (tcgetattr)", errno: e)
        }
        cfmakeraw(&t)
        t.c_cflag &= ~(tcflag_t(CSTOPB | PARENB | CSIZE) | tcflag_t(CRTSCTS))
        t.c_cflag |= tcflag_t(CS8 | CLOCAL | CREAD) | (flowControl ? tcflag_t(CRTSCTS) : 0)
        withUnsafeMutableBytes(of: &t.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        cfsetispeed(&t, speed)
        cfsetospeed(&t, speed)
        if tcsetattr(fd, TCSANOW, &t) != 0 {
            let e = errno
            _ = Glibc.close(fd)
            throw TransportError("configure \(path) (tcsetattr)", errno: e)
        }
        // tcsetattr succeeds when any of the changes took: read them back.
        var back = termios()
        if tcgetattr(fd, &back) != 0 {
            let e = errno
            _ = Glibc.close(fd)
            throw TransportError("read back the settings of \(path) (tcgetattr)", errno: e)
        }
        if cfgetospeed(&back) != speed || cfgetispeed(&back) != speed {
            _ = Glibc.close(fd)
            throw TransportError("\(path) did not take \(baud) baud", errno: EINVAL,
                                 hint: "use a speed the port and the controller's firmware both support")
        }
        if (back.c_cflag & tcflag_t(CRTSCTS) != 0) != flowControl {
            _ = Glibc.close(fd)
            throw TransportError("\(path) did not take flow=\(flowControl ? "rtscts" : "none")", errno: EINVAL,
                                 hint: flowControl ? "a port without RTS/CTS lines needs flow=none (and firmware built without hardware flow control)" : nil)
        }
        // Whatever the port held from before (a controller talking to a previous host) is thrown away;
        // the host's Reset and its decoder deal with the rest (a packet already under way).
        _ = tcflush(fd, TCIOFLUSH)
        return try FileDescriptorTransport(fd: fd, name: path, isSocket: false)
    }

    /// Opens the Linux HCI user channel of hci`index`: the device is brought down (the kernel lets go
    /// of it) and the socket bound with HCI_CHANNEL_USER, so this host owns the controller.
    public static func openUserChannel(index: UInt16) throws -> FileDescriptorTransport {
        let fd = cbluez_hci_socket()
        if fd < 0 {
            let e = errno
            if e == EAFNOSUPPORT || e == EPROTONOSUPPORT {
                throw TransportError("this kernel has no Bluetooth support (AF_BLUETOOTH)", errno: e,
                                     hint: "load the bluetooth module (modprobe bluetooth) or use hci:serial:/hci:tcp:")
            }
            throw TransportError("socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)", errno: e)
        }
        if cbluez_hci_dev_down(fd, Int32(index)) < 0 {
            let e = errno
            _ = Glibc.close(fd)
            throw userChannelError("bring hci\(index) down (HCIDEVDOWN)", index: index, errno: e)
        }
        if cbluez_hci_bind_user_channel(fd, Int32(index)) < 0 {
            let e = errno
            _ = Glibc.close(fd)
            throw userChannelError("bind hci\(index) to the HCI user channel", index: index, errno: e)
        }
        return try FileDescriptorTransport(fd: fd, name: "hci\(index)", isSocket: true)
    }

    private static func userChannelError(_ operation: String, index: UInt16, errno e: Int32) -> TransportError {
        switch e {
        case EPERM, EACCES:
            return TransportError(operation, errno: e,
                                  hint: "needs CAP_NET_ADMIN: run as root or `sudo setcap cap_net_admin+eip $(which provision)`")
        case ENODEV:
            return TransportError(operation, errno: e, hint: "there is no hci\(index); list adapters with `hciconfig -a` or `ls /sys/class/bluetooth`")
        case EBUSY:
            return TransportError(operation, errno: e, hint: "hci\(index) is in use; stop bluetoothd or run `hciconfig hci\(index) down`")
        default:
            return TransportError(operation, errno: e)
        }
    }
}
