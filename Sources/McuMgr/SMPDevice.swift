import AsyncSupport
import BLE

/// One device's SMP endpoint across links: hands out a ready `SMPClient` for the current link
/// (connecting again when the link is down), and drops the link on purpose after a reset.
public protocol SMPDevice: Sendable {
    /// A client on a live link: subscribed, its limits learned (MCUmgr parameters, else conservative).
    func client(within limit: Duration) async throws(SMPError) -> SMPClient
    /// True while the current link is up.
    func isLinkUp() async -> Bool
    /// Drops the current link on purpose (after a reset): the next `client` connects again.
    func dropLink() async
    /// The link under the current client went down: the next `client` is a new one on a new link.
    func discardClient() async
    /// Waits until the link goes down (a device resetting drops it); false when it stayed up for `limit`.
    func awaitLinkLoss(within limit: Duration) async -> Bool
}

/// `SMPDevice` over a `Session`: the session's link and reconnect policy, the SMP characteristic's
/// notifications, MCUmgr parameters asked once per device (a device that does not answer gets
/// conservative limits).
public actor SessionSMPDevice: SMPDevice {
    public nonisolated let session: Session
    private let requestTimeout: Duration
    private let log: @Sendable (String) -> Void
    private var current: SMPClient?
    /// Watches the current link's state: the client learns at once that its link went down.
    private var watcher: Task<Void, Never>?
    /// nil until asked; `.some(nil)` when the device does not answer MCUmgr parameters.
    private var parameters: ParametersResponse??

    public init(session: Session, requestTimeout: Duration = .seconds(5), log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.session = session
        self.requestTimeout = requestTimeout
        self.log = log
    }

    public func isLinkUp() async -> Bool {
        await session.state == .ready
    }

    public func client(within limit: Duration) async throws(SMPError) -> SMPClient {
        if let c = current, await session.state == .ready, await c.isUsable { return c }
        await discardClient()
        do {
            try await withDeadline(limit, operation: "connect for SMP") { try await self.session.connect() }
        } catch {
            throw SMPClient.transportError(error)
        }
        let mtu = await session.mtu
        let transport = SMPGATTTransport(session: session, timeout: requestTimeout)
        let client = SMPClient(transport: transport, limits: .conservative(mtu: mtu), log: log)
        try await client.start()
        if parameters == nil {
            do {
                parameters = .some(try await client.send(ParametersRequest(), timeout: requestTimeout))
            } catch SMPError.device(let e) where e.kind == .notSupported {
                parameters = .some(nil)
            } catch SMPError.timeout {
                // No answer at all: a device without the command may stay silent. Conservative limits.
                parameters = .some(nil)
            }
        }
        if case .some(.some(let p)) = parameters {
            await client.setLimits(.learned(mtu: mtu, parameters: p))
        }
        log("SMP limits: \(await client.limits)")
        current = client
        watcher?.cancel()
        let states = session.connectionStates()
        watcher = Task {
            for await state in states where state != .ready {
                await client.linkLost("the link went down (\(state))")
                return
            }
        }
        return client
    }

    public func awaitLinkLoss(within limit: Duration) async -> Bool {
        let states = session.connectionStates()
        let session = self.session
        do {
            return try await withDeadline(limit, operation: "wait for the link to drop") {
                for await state in states where state != .ready { return true }
                return await session.state != .ready
            }
        } catch {
            return await session.state != .ready
        }
    }

    public func discardClient() async {
        watcher?.cancel()
        watcher = nil
        if let c = current {
            current = nil
            await c.close()
        }
    }

    public func dropLink() async {
        await discardClient()
        await session.disconnect()
    }
}
