import BLE

/// Where SMP frames travel: writes without response to the device, and the device's notifications.
public protocol SMPTransport: Sendable {
    /// The link's ATT_MTU now.
    func mtu() async -> Int
    /// Subscribes to the device's responses; the stream ends (or throws) when the link goes down.
    func responses() async throws -> AsyncThrowingStream<[UInt8], any Error>
    /// Writes one piece without response, waiting for link credits.
    func write(_ piece: [UInt8]) async throws
    /// Ends the subscription.
    func close() async
}

/// The SMP service on GATT (Zephyr, "SMP transport specification", Bluetooth): one characteristic,
/// written without response and notifying the responses.
public enum SMPGATT {
    /// 8D53DC1D-1DB7-4CD3-868B-8A527460AA84
    public static let service = uuid([0x8D, 0x53, 0xDC, 0x1D, 0x1D, 0xB7, 0x4C, 0xD3, 0x86, 0x8B, 0x8A, 0x52, 0x74, 0x60, 0xAA, 0x84])
    /// DA2E7828-FBCE-4E01-AE9E-261174997C48
    public static let characteristic = uuid([0xDA, 0x2E, 0x78, 0x28, 0xFB, 0xCE, 0x4E, 0x01, 0xAE, 0x9E, 0x26, 0x11, 0x74, 0x99, 0x7C, 0x48])

    /// A 128-bit UUID from its 16 bytes (the literals above always have 16).
    private static func uuid(_ bytes: [UInt8]) -> BluetoothUUID { BluetoothUUID(bytes128: bytes) ?? BluetoothUUID(0) }
}

/// The SMP transport over a `Session`: the SMP characteristic's notifications, and writes without
/// response to it (the session waits for link credits).
public final class SMPGATTTransport: SMPTransport {
    public let session: Session
    public let timeout: Duration
    private let subscription = SubscriptionHolder()

    public init(session: Session, timeout: Duration = .seconds(10)) {
        self.session = session
        self.timeout = timeout
    }

    public func mtu() async -> Int { await session.mtu }

    public func responses() async throws -> AsyncThrowingStream<[UInt8], any Error> {
        let stream = try await session.notifications(service: SMPGATT.service, characteristic: SMPGATT.characteristic, timeout: timeout)
        await subscription.set(stream)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await value in stream { continuation.yield(value) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    public func write(_ piece: [UInt8]) async throws {
        try await session.write(service: SMPGATT.service, characteristic: SMPGATT.characteristic, value: piece, withResponse: false,
                                timeout: timeout)
    }

    public func close() async {
        await subscription.take()?.cancel()
    }
}

/// The current notification stream, so `close` can end it.
private actor SubscriptionHolder {
    private var stream: NotificationStream?
    func set(_ s: NotificationStream) { stream = s }
    func take() -> NotificationStream? {
        defer { stream = nil }
        return stream
    }
}
