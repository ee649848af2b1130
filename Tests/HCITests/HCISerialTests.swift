import BLE
import Foundation
import HCI
import Synchronization
import Testing

/// A `FakeController` behind a pseudo-terminal: the adapter opens the pty's device as a UART
/// (`hci:serial:/dev/pts/N?…`), the test plays the controller on the master side. Bytes to the host can
/// be written one at a time (split writes) and garbage put in between.
final class PTYController: Sendable {
    let fake: FakeController
    let path: String
    private let master: Int32
    private let outbox = Mutex<(bytes: [[UInt8]], closed: Bool)>(([], false))
    private let ready = DispatchSemaphore(value: 0)

    init(_ fake: FakeController, splitWrites: Bool) throws {
        self.fake = fake
        // posix_openpt and friends are not visible to Swift: the same by hand, /dev/ptmx and two ioctls
        // (TIOCSPTLCK = _IOW('T', 0x31, int) unlocks the other side, TIOCGPTN = _IOR('T', 0x30, unsigned)
        // names it; the encodings of asm-generic/ioctl.h).
        let fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard fd >= 0, withUnsafeMutablePointer(to: &unlock, { ioctl(fd, 0x4004_5431, $0) }) == 0,
              withUnsafeMutablePointer(to: &number, { ioctl(fd, 0x8004_5430, $0) }) == 0 else {
            throw TransportError("open a pseudo-terminal (/dev/ptmx)", errno: errno)
        }
        master = fd
        path = "/dev/pts/\(number)"
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw TransportError("pipe", errno: errno) }
        let (wakeRead, wakeWrite) = (pipeFDs[0], pipeFDs[1])
        // The controller side holds the device open too (never reading it): the master then waits for
        // the host's bytes instead of reporting a hang-up whenever no host has the port open.
        let keeper = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard keeper >= 0 else { throw TransportError("open \(path)", errno: errno) }
        // Host → controller: the master's reads go to the fake (a thread of its own: blocking poll). The
        // descriptors are closed by this thread, once the writer below has stopped: never while another
        // thread may still use them (a closed number is soon another test's descriptor).
        Thread.detachNewThread { [fake] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            reading: while true {
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
                if poll(&fds, 2, -1) < 0 { if errno == EINTR { continue } else { break } }
                if fds[1].revents != 0 { break }
                guard fds[0].revents != 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 { try? fake.write(Array(buffer[0..<n])) }
                if n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) { break reading }
            }
            _ = Glibc.close(fd)
            _ = Glibc.close(keeper)
            _ = Glibc.close(wakeRead)
        }
        // Controller → host: what the fake sends is written to the master, byte by byte when split.
        Thread.detachNewThread { [self] in
            while true {
                ready.wait()
                let (chunks, closed) = outbox.withLock { o -> ([[UInt8]], Bool) in
                    defer { o.bytes = [] }
                    return (o.bytes, o.closed)
                }
                if closed {
                    var one: UInt8 = 1
                    _ = write(wakeWrite, &one, 1)
                    _ = Glibc.close(wakeWrite)
                    return
                }
                for chunk in chunks {
                    let pieces = splitWrites ? chunk.map { [$0] } : [chunk]
                    for piece in pieces {
                        _ = piece.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    }
                }
            }
        }
        Task { [weak self] in
            do {
                for try await chunk in fake.reads { self?.send(chunk) }
            } catch {}
        }
    }

    /// Bytes to the host as they are (garbage included).
    func send(_ bytes: [UInt8]) {
        outbox.withLock { $0.bytes.append(bytes) }
        ready.signal()
    }

    func close() {
        outbox.withLock { $0.closed = true }
        ready.signal()
        fake.close()
    }

    /// The settings of the pty's device now (speed, flow control), as another opener sees them.
    func settings() -> (speed: speed_t, rtscts: Bool)? {
        let fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var t = termios()
        guard tcgetattr(fd, &t) == 0 else { return nil }
        return (cfgetospeed(&t), t.c_cflag & tcflag_t(CRTSCTS) != 0)
    }
}

private let peer = BluetoothAddress("F0:00:00:00:00:01", kind: .random)!

@Suite(.serialized) struct HCISerialTests {
    @Test func theBaudRateAndFlowControlOfTheSpecAreWhatThePortRunsAt() async throws {
        for (query, speed, rtscts) in [("baud=115200&flow=none", speed_t(B115200), false), ("baud=1000000&flow=rtscts", speed_t(B1000000), true)] {
            let pty = try PTYController(FakeController(), splitWrites: false)
            defer { pty.close() }
            let adapter = try await HCIAdapter.open(spec: "hci:serial:\(pty.path)?\(query)", options: HCIAdapter.Options(log: { _ in }))
            let s = try #require(pty.settings())
            #expect(s.speed == speed && s.rtscts == rtscts, "\(query)")
            await adapter.close()
        }
    }

    @Test func aPortOpenedInTheMiddleOfAPacketFindsTheResetsAnswerAfterAnotherReset() async throws {
        let fake = FakeController()
        let pty = try PTYController(fake, splitWrites: true)
        defer { pty.close() }
        // The controller is half-way through an ACL packet when the port opens: its header promises 27
        // bytes, so the first Reset's answer disappears into it.
        fake.update { $0.silent = [HCIOpcode.reset.rawValue] }
        var options = HCIAdapter.Options(resetTimeout: .seconds(1), log: { _ in })
        options.reopenAttempts = 0
        let opening = Task { try await HCIAdapter.open(spec: "hci:serial:\(pty.path)?baud=1000000&flow=rtscts", options: options) }
        _ = try await firstWritten(fake) { $0.isCommand(.reset) }
        pty.send([0x02, 0x40, 0x00, 0x1B, 0x00, 0x01, 0x02, 0x03])
        pty.send([0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00])
        // The second Reset (after the input was flushed) is answered.
        fake.update { $0.silent = [] }
        let adapter = try await opening.value
        #expect(fake.observed.commands[.reset] == 2)
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(5)))
        #expect(link.peer == peer)
        await adapter.close()
    }

    @Test func garbageInTheStreamIsFollowedByAResetAndTheAdapterCarriesOn() async throws {
        let fake = FakeController()
        let pty = try PTYController(fake, splitWrites: true)
        defer { pty.close() }
        var options = HCIAdapter.Options(log: { _ in })
        options.reopenAttempts = 0
        let adapter = try await HCIAdapter.open(spec: "hci:serial:\(pty.path)?baud=1000000&flow=rtscts", options: options)
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(5)))
        // Line noise: the link is lost (retryably), the controller reset and brought up again.
        pty.send([0xEE, 0x7F, 0x80])
        let reason = await link.waitForDisconnect()
        #expect(reason.text.contains("lost sync"), "\(reason)")
        // A connect waits until the controller is up again, then goes through.
        let second = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(5)))
        #expect(fake.observed.commands[.reset] == 2)
        #expect(await adapter.info?.reinitialisations == 1)
        #expect(adapter.outage == nil, "up again")
        // A Disconnection Complete that lost a byte swallows the next packet's indicator; what is left
        // is no packet: the same again.
        pty.send([0x04, 0x05, 0x04, 0x00, 0x41, 0x13] + [0x04, 0x0E, 0x04, 0x01, 0x00, 0x00, 0x00])
        #expect(await second.waitForDisconnect().text.contains("lost sync"))
        let third = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(5)))
        #expect(fake.observed.commands[.reset] == 3)
        #expect(await adapter.info?.reinitialisations == 2)
        #expect((third as? HCILink)?.disconnectReason == nil)
        #expect(await adapter.failureReason == nil)
        await adapter.close()
    }
}
