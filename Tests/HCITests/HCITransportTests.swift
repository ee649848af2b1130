#if canImport(Glibc)
import Glibc
#endif
import BLE
import HCI
import Testing

/// A TCP listener on 127.0.0.1 with a port chosen by the kernel.
private struct Listener {
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 4) == 0 else { throw TransportError("listen", errno: errno) }
        self.fd = fd
        self.port = UInt16(bigEndian: address.sin_port)
    }

    /// Accepts one connection (the client has connected already, so this does not wait).
    func accept() -> Int32 { Glibc.accept(fd, nil, nil) }

    /// Closes an accepted socket with a reset (SO_LINGER 0), as a controller that dies does.
    static func abort(_ peer: Int32) {
        var l = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(peer, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        _ = Glibc.close(peer)
    }
}

@Suite struct HCITransportTests {
    @Test func writingToAControllerThatHasGoneIsAnErrorNotASignal() async throws {
        let listener = try Listener()
        defer { _ = Glibc.close(listener.fd) }
        let transport = try HCITransports.openTCP(host: "127.0.0.1", port: listener.port, timeout: .seconds(2))
        defer { transport.close() }
        let peer = listener.accept()
        try transport.write([0x01, 0x03, 0x0C, 0x00])
        Listener.abort(peer)
        // The I/O thread sees the reset; then every write fails with an error. A plain write(2) here
        // would raise SIGPIPE and end this test process.
        await #expect(throws: TransportError.self) {
            for try await _ in transport.reads {}
        }
        var failure: TransportError?
        for _ in 0..<3 {
            do { try transport.write([0x01, 0x03, 0x0C, 0x00]) } catch let e as TransportError { failure = e }
        }
        let e = try #require(failure)
        #expect(e.errno == EPIPE || e.errno == ECONNRESET, "\(e)")
    }

    @Test func anAdapterWhoseControllerGoesAwayFailsAndTheProcessLivesOn() async throws {
        let listener = try Listener()
        defer { _ = Glibc.close(listener.fd) }
        let fake = FakeController()
        // The adapter reaches the fake controller over a real TCP connection (connected first, so the
        // accept below finds it waiting and does not block).
        let client = try HCITransports.openTCP(host: "127.0.0.1", port: listener.port, timeout: .seconds(2))
        let accepted = listener.accept()
        let server = try FileDescriptorTransport(fd: dup(accepted), name: "test-controller", isSocket: true)
        let toFake = Task { for try await chunk in server.reads { try fake.write(chunk) } }
        let toHost = Task { for try await chunk in fake.reads { try server.write(chunk) } }
        let opening = Task { try await HCIAdapter.open(transport: client, id: "tcp-test", options: HCIAdapter.Options(log: { _ in })) }
        let adapter = try await opening.value
        #expect(await adapter.info != nil)
        // The controller dies: its socket is reset under the adapter.
        server.close()
        Listener.abort(accepted)
        await #expect {
            _ = try await adapter.connect(to: BluetoothAddress("F0:00:00:00:00:01", kind: .random)!, options: ConnectOptions(timeout: .seconds(2)))
        } throws: { error in
            if case BLEError.adapterFailure = error { return true }
            return false
        }
        guard case .adapterFailure? = await adapter.failureReason else {
            Issue.record("the adapter did not fail: \(String(describing: await adapter.failureReason))")
            return
        }
        toFake.cancel()
        toHost.cancel()
        fake.close()
    }
}
