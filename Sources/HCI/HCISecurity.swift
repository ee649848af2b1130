import BLE
import BLESecurity

/// The Security Manager of every link of the host, as a value: one `SMPCentral` per link, callers'
/// requests served one at a time per link, and each machine's actions turned into what the host does —
/// PDUs on the SMP channel (CID 6), LE Enable Encryption, the SMP timer, outcomes for callers.
///
/// `HCIHost` feeds it the SMP PDUs its routers deliver, the controller's encryption events and the
/// SMP timer's expiry; the executor attaches each link's machine when the link comes up (with the
/// addresses, the stored bond and the Security Request policy) and asks for levels (`secure`).
/// SMP PDUs that arrive before the link is attached are kept (a few) and replayed on attach.
public struct HCISecurity: Sendable {
    public typealias LinkID = UInt64
    public typealias RequestID = UInt64

    public enum Event: Sendable, Equatable {
        /// A link came up: its Security Manager starts with this configuration.
        case attach(LinkID, SMPCentralConfiguration)
        /// A caller asks for `request` on the link; answered by `.completed` or `.failed` with `RequestID`.
        case secure(LinkID, RequestID, SecurityRequest)
        /// The caller stopped waiting (a procedure it started runs on; its outcome goes to nobody).
        case cancel(LinkID, RequestID)
        /// An SMP PDU from the peer.
        case received(LinkID, [UInt8])
        /// HCI Encryption Change (v1 or v2).
        case encryptionChanged(LinkID, EncryptionChangeEvent)
        /// HCI Encryption Key Refresh Complete.
        case keyRefreshed(LinkID, HCIStatus)
        /// LE Enable Encryption was refused (its Command Status) or got no answer (nil).
        case encryptionRefused(LinkID, HCIStatus?)
        /// The link's SMP timer fired.
        case timerExpired(LinkID)
        /// The link went down.
        case detach(LinkID)
    }

    public enum Action: Sendable, Equatable {
        /// Send this PDU on the link's SMP channel.
        case send(LinkID, [UInt8])
        /// Issue LE Enable Encryption on the link with this key.
        case enableEncryption(LinkID, SMPEncryptionKey)
        /// (Re)arm the link's SMP timer; on expiry feed `.timerExpired`.
        case armTimer(LinkID, Duration)
        case disarmTimer(LinkID)
        /// A procedure ended well; `RequestID` nil when nobody asked for it (a peer's Security Request).
        case completed(LinkID, RequestID?, SMPOutcome)
        case failed(LinkID, RequestID?, SMPFailure)
        /// Show this passkey to an operator (this side displays; the device's user types it).
        case displayPasskey(LinkID, Passkey)
        case note(String)
    }

    /// PDUs kept per link while it is not attached yet.
    static let earlyLimit = 8

    private struct LinkState: Sendable {
        var machine: SMPCentral
        var timer: UInt64?
        var queue: [(id: RequestID, request: SecurityRequest)] = []
        var serving: (id: RequestID, request: SecurityRequest, abandoned: Bool)?
    }

    private let makeRandom: @Sendable () -> any SMPRandomSource
    private var links: [LinkID: LinkState] = [:]
    private var early: [LinkID: [[UInt8]]] = [:]

    public init(random: @escaping @Sendable () -> any SMPRandomSource = { SystemRandom() }) {
        makeRandom = random
    }

    /// Whether the link has a Security Manager attached.
    public func isAttached(_ link: LinkID) -> Bool { links[link] != nil }

    /// The link's security now (none when unknown).
    public func security(of link: LinkID) -> LinkSecurity { links[link]?.machine.security ?? .none }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .attach(let link, let configuration):
            links[link] = LinkState(machine: SMPCentral(configuration: configuration, random: makeRandom()))
            var out: [Action] = []
            for pdu in early.removeValue(forKey: link) ?? [] { out += run(link, .received(pdu)) }
            return out
        case .secure(let link, let id, let request):
            guard links[link] != nil else {
                return [.failed(link, id, SMPFailure(.unspecified, origin: .local, detail: "the link has no Security Manager (it is going down)"))]
            }
            links[link]?.queue.append((id, request))
            return serveNext(link)
        case .cancel(let link, let id):
            links[link]?.queue.removeAll { $0.id == id }
            if links[link]?.serving?.id == id { links[link]?.serving?.abandoned = true }
            return []
        case .received(let link, let pdu):
            guard links[link] != nil else {
                if early[link, default: []].count < Self.earlyLimit { early[link, default: []].append(pdu) }
                return []
            }
            return run(link, .received(pdu))
        case .encryptionChanged(let link, let e):
            if e.status == .success {
                return run(link, .encryptionChanged(enabled: e.enabled != 0, keySize: e.keySize.map(Int.init)))
            }
            return run(link, .encryptionFailed(status: e.status.rawValue))
        case .keyRefreshed(let link, let status):
            return run(link, status == .success ? .keyRefreshComplete : .encryptionFailed(status: status.rawValue))
        case .encryptionRefused(let link, let status):
            return run(link, .encryptionFailed(status: (status ?? .unspecifiedError).rawValue))
        case .timerExpired(let link):
            guard let id = links[link]?.timer else { return [] }
            links[link]?.timer = nil
            return run(link, .timerExpired(id))
        case .detach(let link):
            early[link] = nil
            guard let state = links.removeValue(forKey: link) else { return [] }
            return state.timer == nil ? [] : [.disarmTimer(link)]
        }
    }

    /// Starts the next waiting request when the link's machine is free; a request already met
    /// completes at once, so several may be answered in one call.
    private mutating func serveNext(_ link: LinkID) -> [Action] {
        var out: [Action] = []
        while var state = links[link], state.serving == nil, !state.machine.isBusy, !state.queue.isEmpty {
            let next = state.queue.removeFirst()
            state.machine.reconfigure { c in
                c.passkey = next.request.passkey
                c.oobData = next.request.oob
                c.allowLegacy = next.request.allowLegacy
                c.bondable = next.request.bond
                if next.request.level > .none { c.securityRequestPolicy = .pairOrEncrypt }
            }
            state.serving = (next.id, next.request, false)
            links[link] = state
            let event: SMPCentral.Event = next.request.pairAgain && next.request.level > .none
                ? .pair(next.request.level) : .secure(next.request.level)
            out += run(link, event, serveAfter: false)
        }
        return out
    }

    /// Feeds one event to the link's machine and turns its actions into the host's.
    private mutating func run(_ link: LinkID, _ event: SMPCentral.Event, serveAfter: Bool = true) -> [Action] {
        guard var state = links[link] else { return [] }
        let actions = state.machine.handle(event)
        var out: [Action] = []
        var ended = false
        for action in actions {
            switch action {
            case .send(let pdu):
                out.append(.send(link, pdu.bytes))
            case .startTimer(let t):
                state.timer = t.id
                out.append(.armTimer(link, t.duration))
            case .stopTimer:
                state.timer = nil
                out.append(.disarmTimer(link))
            case .startEncryption(let key):
                out.append(.enableEncryption(link, key))
            case .replyLongTermKey:
                out.append(.note("link \(link): a central never answers a Long Term Key Request; ignored"))
            case .displayPasskey(let passkey):
                out.append(.displayPasskey(link, passkey))
            case .completed(let outcome):
                ended = true
                if let serving = state.serving {
                    state.serving = nil
                    let id = serving.abandoned ? nil : serving.id
                    if outcome.security.level >= serving.request.level {
                        out.append(.completed(link, id, outcome))
                    } else {
                        // A procedure a peer's Security Request started may reach less than asked.
                        if outcome.bond != nil { out.append(.completed(link, nil, outcome)) }
                        out.append(.failed(link, id, SMPFailure(
                            .authenticationRequirements, origin: .local,
                            detail: "the link reached \(outcome.security.level); \(serving.request.level) was asked")))
                    }
                } else {
                    out.append(.completed(link, nil, outcome))
                }
            case .failed(let failure):
                ended = true
                let id = state.serving.flatMap { $0.abandoned ? nil : $0.id }
                state.serving = nil
                out.append(.failed(link, id, failure))
            }
        }
        links[link] = state
        // Inside `serveNext` its loop goes on by itself.
        if ended && serveAfter { out += serveNext(link) }
        return out
    }
}
