import BLE
import Synchronization

/// A central whose first `connect(to:)` to `peer` returns a link already made — by a `scan` step that
/// was satisfied by connecting to a known address — and that defers to the adapter's own central for
/// everything else (reconnects included). The session of the `connect` step runs over it unchanged.
final class HeldLinkCentral: Central {
    let base: any Central
    private let peer: BluetoothAddress
    private let held: Mutex<(any Link)?>

    init(base: any Central, link: any Link) {
        self.base = base
        self.peer = link.peer
        self.held = Mutex(link)
    }

    var id: String { base.id }
    var connectionSlots: Int { base.connectionSlots }
    var isSimulated: Bool { base.isSimulated }
    var connectsByAddress: Bool { base.connectsByAddress }
    var stationIdentity: BluetoothAddress? { base.stationIdentity }
    var outage: String? { base.outage }

    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> { base.scan(filter) }

    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        if peer.sameDevice(as: self.peer), let link = held.withLock({ l -> (any Link)? in
            defer { l = nil }
            return l
        }) {
            return link
        }
        return try await base.connect(to: peer, options: options)
    }

    /// Drops the held link if nobody took it; the adapter itself stays open (it is the run's).
    func close() async {
        let link = held.withLock { l -> (any Link)? in
            defer { l = nil }
            return l
        }
        await link?.disconnect()
    }
}
