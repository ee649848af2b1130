/// One advertisement (or an advertisement merged with its scan response) as heard by an adapter.
public struct Advertisement: Sendable, Equatable {
    public var address: BluetoothAddress
    public var rssi: Int
    public var data: AdvertisingData
    public var connectable: Bool
    /// Monotonic time of reception.
    public var time: ContinuousClock.Instant
    /// Which adapter heard it (`Central.id`).
    public var adapter: String
    /// The device's identity address when `address` is a resolvable private address that an IRK the
    /// adapter holds (a bond's) resolves; nil otherwise.
    public var identity: BluetoothAddress?

    public init(address: BluetoothAddress, rssi: Int, data: AdvertisingData, connectable: Bool = true,
                time: ContinuousClock.Instant = .now, adapter: String = "", identity: BluetoothAddress? = nil) {
        self.address = address
        self.rssi = rssi
        self.data = data
        self.connectable = connectable
        self.time = time
        self.adapter = adapter
        self.identity = identity
    }

    public var name: String? { data.localName }

    /// True when the advertisement comes from the device with this address: its own, or the identity
    /// behind its resolvable private address.
    public func isFrom(_ device: BluetoothAddress) -> Bool {
        device.sameDevice(as: address) || (identity.map { device.sameDevice(as: $0) } ?? false)
    }
}

/// What a scan is looking for. Empty lists match everything. An advertisement passes when it matches
/// every non-empty criterion.
public struct ScanFilter: Sendable, Equatable {
    public var addresses: Set<BluetoothAddress>
    public var names: Set<String>
    public var services: [BluetoothUUID]
    public var minimumRSSI: Int?
    /// Deliver every report, not only the first per address.
    public var allowDuplicates: Bool

    public init(addresses: Set<BluetoothAddress> = [], names: Set<String> = [], services: [BluetoothUUID] = [],
                minimumRSSI: Int? = nil, allowDuplicates: Bool = true) {
        self.addresses = addresses
        self.names = names
        self.services = services
        self.minimumRSSI = minimumRSSI
        self.allowDuplicates = allowDuplicates
    }

    public func matches(_ ad: Advertisement) -> Bool {
        if !addresses.isEmpty && !addresses.contains(where: { ad.isFrom($0) }) { return false }
        if !names.isEmpty && !(ad.name.map { names.contains($0) } ?? false) { return false }
        if !services.isEmpty {
            let listed = ad.data.serviceUUIDs
            if !services.allSatisfy({ listed.contains($0) }) { return false }
        }
        if let m = minimumRSSI, ad.rssi < m { return false }
        return true
    }
}

/// How to connect.
public struct ConnectOptions: Sendable, Equatable {
    /// Deadline for the link to be established (LE Create Connection cancelled after it).
    public var timeout: Duration
    /// ATT MTU to ask for in Exchange MTU (23 means do not exchange).
    public var preferredMTU: Int
    /// What the link will be asked for (the session secures it after connecting): tells the adapter how
    /// to answer a device's Security Request that comes first. Nil: nothing will be asked, so a Security
    /// Request is answered only with a stored bond, never by pairing.
    public var security: SecurityRequest?
    /// What the link should get from the radio (interval, PHY, data length); nil: the adapter's defaults.
    public var link: LinkPreferences?

    public init(timeout: Duration = .seconds(10), preferredMTU: Int = 247, security: SecurityRequest? = nil,
                link: LinkPreferences? = nil) {
        self.timeout = timeout
        self.preferredMTU = preferredMTU
        self.security = security
        self.link = link
    }
}

/// A Bluetooth adapter (radio) in the central role: the seam between the engine and real or simulated
/// controllers. Implementations serialize LE connection creation (a controller accepts one at a time)
/// and never hold more links than `connectionSlots`.
public protocol Central: AnyObject, Sendable {
    /// A stable name for reports and logs, e.g. `sim`, `hci:tcp:127.0.0.1:9000`.
    var id: String { get }
    /// How many links the adapter can hold at once.
    var connectionSlots: Int { get }
    /// True for the in-process simulator (reports mark simulated runs).
    var isSimulated: Bool { get }
    /// True when `connect(to:)` reaches a device by its address without a scan first (the controller's
    /// initiator hears it advertise) and concurrent connects do not wait for one another's device, so a
    /// scan that only waits to hear a known address can be satisfied by connecting. Default false.
    var connectsByAddress: Bool { get }
    /// The address this adapter connects from — the station's identity, under which devices keep their
    /// bonds — when it has one it keeps across runs (default nil).
    var stationIdentity: BluetoothAddress? { get }
    /// Why the adapter cannot work right now while it tries to come back (its controller reset or went
    /// away and is being brought up again), or why it stopped for good; nil while it works (default).
    var outage: String? { get }

    /// Advertisements that pass `filter`, until the consumer stops iterating (which stops the scan) or
    /// the adapter fails (the stream throws).
    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error>

    /// Establishes a link, or throws `BLEError.timeout`/`.connectFailed`/`.cancelled`. Honours task
    /// cancellation (the pending connection is cancelled and the controller left consistent).
    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link

    /// Releases the adapter: every link is dropped, scans end.
    func close() async
}

/// One connection to a peripheral.
public protocol Link: AnyObject, Sendable {
    var peer: BluetoothAddress { get }
    /// The adapter that holds the link.
    var adapterID: String { get }
    /// The ATT bearer on the fixed ATT channel of this link.
    var bearer: any ATTBearer { get }
    /// Waits until the link goes down, and says why. Returns at once if it already has; returns
    /// `DisconnectReason.waitCancelled` if the waiting task is cancelled first.
    func waitForDisconnect() async -> DisconnectReason
    /// Drops the link (a local, intended disconnect). Idempotent.
    func disconnect() async
    /// The link's received signal strength in dBm, when the adapter can tell (default nil).
    func readRSSI() async -> Int?
    /// Secures the link as `request` asks: encrypts with a stored bond that meets the level, else pairs
    /// (and bonds when asked); a link already at the level is left as it is. Throws
    /// `BLEError.security` when pairing or encryption fails, `.disconnected` when the link goes down.
    /// Default: a link that cannot be secured (only `none` succeeds).
    func secure(_ request: SecurityRequest) async throws -> SecurityOutcome
    /// What the link got from the radio (interval, PHY, data length), as its controller last reported it;
    /// nil when the adapter cannot tell (default).
    var parameters: LinkParameters? { get }
}

extension Central {
    public var connectsByAddress: Bool { false }
    public var stationIdentity: BluetoothAddress? { nil }
    public var outage: String? { nil }
}

extension Link {
    public func readRSSI() async -> Int? { nil }
    public var parameters: LinkParameters? { nil }

    public func secure(_ request: SecurityRequest) async throws -> SecurityOutcome {
        guard request.level == .none else {
            throw BLEError.security(SecurityFailure(.pairingFailed, reason: "pairing not supported",
                                                    detail: "adapter \(adapterID) cannot pair or encrypt links"))
        }
        return .none
    }
}

/// The seam between ATT and a transport: sends and receives whole ATT PDUs for one link.
///
/// `send` suspends while the transport has no room (link credits), which is how write-without-response
/// gets its backpressure; it throws `BLEError.disconnected` once the link is down. `incoming` yields
/// every PDU the peer sends, in order, and finishes when the link closes; it has one consumer.
public protocol ATTBearer: AnyObject, Sendable {
    func send(_ pdu: [UInt8]) async throws
    var incoming: AsyncStream<[UInt8]> { get }
    /// Largest ATT_MTU this side can receive on this link.
    var localMaxMTU: Int { get }
    /// Drops the link underneath (e.g. after an ATT transaction timeout).
    func close(reason: DisconnectReason) async
}

/// A bearer whose PDUs can be received one at a time, without an `AsyncStream` in between: `ATTClient`
/// reads such a bearer with `receive()` (the same queue as `incoming`; one consumer).
package protocol ATTBearerReceiving: ATTBearer {
    /// The peer's next PDU, in order; nil once the link has closed and everything before the close was
    /// received, or when the receiving task is cancelled.
    func receive() async -> [UInt8]?
}

/// Why a link went down: an HCI reason code where there is one, and text.
public struct DisconnectReason: Sendable, Hashable, CustomStringConvertible {
    public var code: UInt8
    public var text: String

    public init(code: UInt8, text: String) {
        self.code = code
        self.text = text
    }

    public var description: String { "\(text) (0x\(String(code, radix: 16)))" }

    /// Remote User Terminated Connection (0x13).
    public static let remoteUserTerminated = DisconnectReason(code: 0x13, text: "remote user terminated the connection")
    /// Connection Terminated By Local Host (0x16): a manual disconnect.
    public static let localHostTerminated = DisconnectReason(code: 0x16, text: "connection terminated by local host")
    /// Connection Timeout (0x08): supervision timeout, the usual "link lost".
    public static let supervisionTimeout = DisconnectReason(code: 0x08, text: "supervision timeout (link lost)")
    /// Connection Failed to be Established (0x3E).
    public static let failedToEstablish = DisconnectReason(code: 0x3E, text: "connection failed to be established")
    /// The ATT transaction timer expired (Vol 3 Part F 3.3.3); the host drops the link.
    public static let attTimeout = DisconnectReason(code: 0x16, text: "ATT transaction timeout")
    /// Returned by `Link.waitForDisconnect()` when the waiting task was cancelled before the link went
    /// down: the link may still be up.
    public static let waitCancelled = DisconnectReason(code: 0x00, text: "stopped waiting (task cancelled); the link may still be up")
    /// The adapter's transport went away (socket closed, dongle unplugged).
    public static let transportClosed = DisconnectReason(code: 0x1F, text: "adapter transport closed")
}
