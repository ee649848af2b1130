import Testing
@testable import BLE

/// Golden event → action sequences of the session machine: no central, no link, no clock.
private typealias M = SessionMachine

private let peer = BluetoothAddress(value: 0xC0FFEE000001)
private let acks = SubscriptionKey(service: BluetoothUUID(0xFFF0), characteristic: BluetoothUUID(0xFFF3))
private let status = SubscriptionKey(service: BluetoothUUID(0xFFF0), characteristic: BluetoothUUID(0xFFF6))
private let lost = DisconnectReason.supervisionTimeout
private let manual = BLEError.disconnected(.localHostTerminated)
private let refused = BLEError.connectFailed("refused")
private let connectTimeout = BLEError.timeout(operation: "connect \(peer)", limit: .seconds(2))

private func configuration(reconnect: ReconnectPolicy = .limited(maxAttempts: 3, delays: [.seconds(1), .seconds(2)]),
                           security: SecurityRequest? = nil, upgrade: SecurityRequest? = nil) -> M.Configuration {
    M.Configuration(peer: peer, connectTimeout: .seconds(2), reconnect: reconnect, security: security, upgrade: upgrade)
}

/// Feeds events one at a time and checks each step's actions.
private struct Script {
    var machine: M

    init(_ configuration: M.Configuration = configuration()) { machine = M(configuration) }

    mutating func on(_ event: M.Event, _ expected: [M.Action], sourceLocation: SourceLocation = #_sourceLocation) {
        let actions = machine.handle(event)
        #expect(actions == expected, "after \(event)", sourceLocation: sourceLocation)
    }

    /// The first connect, up to `ready` on link 1 (attempt 1), waiter 1.
    mutating func ready(sourceLocation: SourceLocation = #_sourceLocation) {
        on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)], sourceLocation: sourceLocation)
        on(.linkUp(1), [.adopt(1, 1), .publish(.connected), .prepare(1, 1, security: nil)], sourceLocation: sourceLocation)
        on(.prepared(1), [.disarm(.attempt(1)), .publish(.ready), .resume(1, .success(1))], sourceLocation: sourceLocation)
    }

    /// Link 1, ready with `restore` subscribed, is lost; attempt 2 (after its 1 s backoff) brings up link 2,
    /// which starts restoring them.
    mutating func restoringOnLink2(_ restore: [M.Restore], sourceLocation: SourceLocation = #_sourceLocation) {
        on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)), .arm(.backoff(2), .seconds(1))],
           sourceLocation: sourceLocation)
        on(.deadline(.backoff(2)), [.arm(.attempt(2), .seconds(2)), .connect(2, security: nil)], sourceLocation: sourceLocation)
        on(.linkUp(2), [.adopt(2, 2), .publish(.connected), .prepare(2, 2, security: nil)], sourceLocation: sourceLocation)
        on(.prepared(2), [.publish(.discovering), .restore(2, 2, restore)], sourceLocation: sourceLocation)
    }

    /// Consumer `id` subscribes to `key` on link `g` as the first consumer and enables it.
    mutating func subscribe(_ id: UInt64, _ key: SubscriptionKey, on g: UInt64, cccd: UInt16,
                            sourceLocation: SourceLocation = #_sourceLocation) {
        on(.subscribe(id, key, indicate: false, on: g), [.enable(id, key, indicate: false, g)], sourceLocation: sourceLocation)
        on(.enabled(id, key, g, M.Handles(value: cccd - 1, cccd: cccd)), [.resume(id, .success(g))], sourceLocation: sourceLocation)
    }
}

@Suite struct SessionMachineTests {
    // MARK: - Connecting

    @Test func aFirstConnectGoesThroughConnectingAndConnectedToReady() {
        var s = Script()
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)])
        // Callers that come meanwhile wait for the same link.
        s.on(.awaitReady(2), [])
        s.on(.connect(3), [.arm(.connectWait(3), .seconds(2))])
        s.on(.linkUp(1), [.adopt(1, 1), .publish(.connected), .prepare(1, 1, security: nil)])
        s.on(.prepared(1), [.disarm(.attempt(1)), .publish(.ready), .resume(1, .success(1)), .resume(2, .success(1)),
                            .disarm(.connectWait(3)), .resume(3, .success(1))])
        #expect(s.machine.state == .ready)
        s.on(.connect(4), [.resume(4, .success(1))])
        s.on(.awaitReady(5), [.resume(5, .success(1))])
    }

    @Test func aFailedFirstConnectFailsEveryoneWaitingAndMayBeTriedAgain() {
        var s = Script()
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)])
        s.on(.awaitReady(2), [])
        s.on(.connectFailed(1, refused), [.disarm(.attempt(1)), .publish(.failed(refused)), .resume(1, .failure(refused)),
                                          .resume(2, .failure(refused))])
        s.on(.awaitReady(3), [.resume(3, .failure(refused))])
        s.on(.connect(4), [.publish(.connecting), .arm(.attempt(2), .seconds(2)), .connect(2, security: nil)])
        s.on(.connectFailed(1, refused), [])
    }

    @Test func aLinkDeliveredJustAsItsDeadlinePassedIsDroppedNotLeaked() {
        var s = Script()
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)])
        // The deadline gives the attempt up; it fails once its connect has reported back.
        s.on(.deadline(.attempt(1)), [.cancelAttempt(1)])
        #expect(s.machine.state == .connecting)
        // The connect completed as it was cancelled: that link belongs to nobody.
        s.on(.linkUp(1), [.dropLink(1), .publish(.failed(connectTimeout)), .resume(1, .failure(connectTimeout))])
        s.on(.connectFailed(1, .cancelled), [])
        s.on(.linkUp(1), [.dropLink(1)])
        #expect(s.machine.currentLink == nil)

        // Or the cancelled connect ends without a link.
        var t = Script()
        t.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)])
        t.on(.deadline(.attempt(1)), [.cancelAttempt(1)])
        t.on(.connectFailed(1, .cancelled), [.publish(.failed(connectTimeout)), .resume(1, .failure(connectTimeout))])
    }

    @Test func aDeviceThatConnectsButNeverAnswersFailsAtTheConnectDeadlineAndItsLinkIsClosed() {
        var s = Script()
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)])
        s.on(.linkUp(1), [.adopt(1, 1), .publish(.connected), .prepare(1, 1, security: nil)])
        s.on(.deadline(.attempt(1)), [.cancelAttempt(1), .closeLink(1, manual)])
        // The closed link's news changes nothing; the cancelled preparation ends the attempt.
        s.on(.linkLost(1, .localHostTerminated), [])
        s.on(.establishFailed(1, .cancelled), [.publish(.failed(connectTimeout)), .resume(1, .failure(connectTimeout))])
        s.on(.prepared(1), [])
    }

    @Test func aJoinedConnectEndsAtItsOwnDeadline() {
        var s = Script()
        s.ready()
        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)), .arm(.backoff(2), .seconds(1))])
        s.on(.connect(7), [.arm(.connectWait(7), .seconds(2))])
        s.on(.deadline(.connectWait(7)), [.resume(7, .failure(connectTimeout))])
        s.on(.deadline(.connectWait(7)), [])
    }

    // MARK: - Reconnect

    @Test func anUnexpectedLossReconnectsAndRestoresEverySubscriptionBeforeReady() {
        var s = Script()
        s.ready()
        s.on(.subscribe(10, acks, indicate: false, on: 1), [.enable(10, acks, indicate: false, 1)])
        // A second consumer of the same characteristic waits for the first one's enable.
        s.on(.subscribe(11, acks, indicate: false, on: 1), [])
        s.on(.enabled(10, acks, 1, M.Handles(value: 0x20, cccd: 0x21)), [.resume(10, .success(1)), .resume(11, .success(1))])
        s.subscribe(12, status, on: 1, cccd: 0x25)

        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)), .arm(.backoff(2), .seconds(1))])
        #expect(s.machine.lastReason == lost)
        // An operation issued while reconnecting waits for ready.
        s.on(.awaitReady(20), [])
        s.on(.deadline(.backoff(2)), [.arm(.attempt(2), .seconds(2)), .connect(2, security: nil)])
        s.on(.linkUp(2), [.adopt(2, 2), .publish(.connected), .prepare(2, 2, security: nil)])
        s.on(.prepared(2), [.publish(.discovering), .restore(2, 2, [M.Restore(key: acks, indicate: false), M.Restore(key: status, indicate: false)])])
        s.on(.rebound(acks, 2, M.Handles(value: 0x30, cccd: 0x31)), [])
        s.on(.rebound(status, 2, M.Handles(value: 0x34, cccd: 0x35)), [])
        s.on(.restored(2), [.disarm(.attempt(2)), .publish(.ready), .resume(20, .success(2))])

        // The last consumer out disables the subscription on the new link's handle.
        s.on(.leave(acks, 10), [])
        s.on(.leave(acks, 11), [.unbind(acks), .disable(acks, cccd: 0x31, 2)])
        s.on(.leave(acks, 11), [])
    }

    @Test func eventsAboutAnOlderLinkCannotTouchTheNewOne() {
        var s = Script()
        s.ready()
        s.subscribe(10, acks, on: 1, cccd: 0x21)
        s.restoringOnLink2([M.Restore(key: acks, indicate: false)])
        s.on(.rebound(acks, 2, M.Handles(value: 0x30, cccd: 0x31)), [])
        s.on(.restored(2), [.disarm(.attempt(2)), .publish(.ready)])
        // Link 1's late news.
        s.on(.linkLost(1, .remoteUserTerminated), [])
        s.on(.prepared(1), [])
        s.on(.restored(1), [])
        s.on(.rebound(acks, 1, M.Handles(value: 0x20, cccd: 0x99)), [])
        s.on(.serviceChanged(1), [])
        s.on(.establishFailed(1, .cancelled), [])
        s.on(.subscribe(30, status, indicate: false, on: 1), [.resume(30, .failure(.disconnected(lost)))])
        #expect(s.machine.state == .ready)
        s.on(.leave(acks, 10), [.unbind(acks), .disable(acks, cccd: 0x31, 2)])
    }

    @Test func aLinkLostRightAfterItsRestoreStartsAnotherReconnectWhicheverNewsComesFirst() {
        // The restore's last CCCD write is answered and the link drops at once: the session hears
        // `restored` and `linkLost` in either order. Either way it never stays ready without a link.
        func restoring() -> Script {
            var s = Script()
            s.ready()
            s.subscribe(10, acks, on: 1, cccd: 0x21)
            s.restoringOnLink2([M.Restore(key: acks, indicate: false)])
            s.on(.awaitReady(20), [])
            return s
        }
        // Ready first: the loss starts a new reconnect, from attempt 1.
        var a = restoring()
        a.on(.restored(2), [.disarm(.attempt(2)), .publish(.ready), .resume(20, .success(2))])
        a.on(.linkLost(2, lost), [.closeLink(2, .disconnected(lost)), .publish(.reconnecting(attempt: 1)), .arm(.backoff(3), .seconds(1))])
        // The loss first: attempt 1 failed, attempt 2 follows, and the waiter keeps waiting.
        var b = restoring()
        b.on(.linkLost(2, lost), [.closeLink(2, .disconnected(lost)), .cancelAttempt(2), .disarm(.attempt(2))])
        b.on(.restored(2), [.log("reconnect attempt 1 to \(peer) failed: \(BLEError.disconnected(lost))"),
                            .publish(.reconnecting(attempt: 2)), .arm(.backoff(3), .seconds(2))])
        b.on(.restored(2), [])
        for (s, waiter) in [(a, [M.Action]()), (b, [.resume(20, .success(3))])] {
            var s = s
            s.on(.deadline(.backoff(3)), [.arm(.attempt(3), .seconds(2)), .connect(3, security: nil)])
            s.on(.linkUp(3), [.adopt(3, 3), .publish(.connected), .prepare(3, 3, security: nil)])
            s.on(.prepared(3), [.publish(.discovering), .restore(3, 3, [M.Restore(key: acks, indicate: false)])])
            s.on(.restored(3), [.disarm(.attempt(3)), .publish(.ready)] + waiter)
        }
    }

    @Test func aFailedRestoreIsAFailedReconnectAndTheLastOneFailsTheSession() {
        var s = Script(configuration(reconnect: .limited(maxAttempts: 2, delays: [])))
        s.ready()
        s.subscribe(10, acks, on: 1, cccd: 0x21)
        // No delays: each attempt starts at once.
        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)),
                                  .arm(.attempt(2), .seconds(2)), .connect(2, security: nil)])
        s.on(.awaitReady(20), [])
        s.on(.linkUp(2), [.adopt(2, 2), .publish(.connected), .prepare(2, 2, security: nil)])
        s.on(.prepared(2), [.publish(.discovering), .restore(2, 2, [M.Restore(key: acks, indicate: false)])])
        let attTimeout = BLEError.timeout(operation: "ATT Write Request", limit: .seconds(1))
        s.on(.establishFailed(2, attTimeout), [.disarm(.attempt(2)), .closeLink(2, manual),
                                               .log("reconnect attempt 1 to \(peer) failed: \(attTimeout)"),
                                               .publish(.reconnecting(attempt: 2)), .arm(.attempt(3), .seconds(2)), .connect(3, security: nil)])
        s.on(.connectFailed(3, refused), [.disarm(.attempt(3)), .log("reconnect attempt 2 to \(peer) failed: \(refused)"),
                                          .publish(.failed(refused)), .resume(20, .failure(refused)), .endStreams([acks], refused)])
        s.on(.awaitReady(21), [.resume(21, .failure(refused))])
        s.on(.leave(acks, 10), [])
    }

    @Test func anAttemptPastItsDeadlineIsAFailedAttempt() {
        var s = Script(configuration(reconnect: .limited(maxAttempts: 1, delays: [])))
        s.ready()
        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)),
                                  .arm(.attempt(2), .seconds(2)), .connect(2, security: nil)])
        s.on(.deadline(.attempt(2)), [.cancelAttempt(2)])
        s.on(.connectFailed(2, .cancelled), [.log("reconnect attempt 1 to \(peer) failed: \(connectTimeout)"),
                                             .publish(.failed(connectTimeout))])
        s.on(.linkUp(2), [.dropLink(2)])
    }

    @Test func withReconnectDisabledALossEndsTheSessionWithTheReason() {
        var s = Script(configuration(reconnect: .disabled))
        s.ready()
        s.subscribe(10, acks, on: 1, cccd: 0x21)
        s.on(.linkLost(1, .remoteUserTerminated), [.closeLink(1, .disconnected(.remoteUserTerminated)), .publish(.disconnected),
                                                   .endStreams([acks], .disconnected(.remoteUserTerminated))])
        s.on(.awaitReady(2), [.resume(2, .failure(.disconnected(.remoteUserTerminated)))])
    }

    // MARK: - Disconnect

    @Test func aManualDisconnectNeverReconnectsAndEndsEveryWait() {
        var s = Script()
        s.ready()
        s.subscribe(10, acks, on: 1, cccd: 0x21)
        s.on(.subscribe(11, status, indicate: true, on: 1), [.enable(11, status, indicate: true, 1)])
        s.on(.subscribe(12, status, indicate: true, on: 1), [])
        s.on(.disconnect, [.closeLink(1, manual), .publish(.disconnected), .endStreams([acks, status], nil), .resume(12, .failure(manual))])
        // The link's own news of the disconnect, and the enable that was under way, change nothing.
        s.on(.linkLost(1, .localHostTerminated), [])
        s.on(.enabled(11, status, 1, M.Handles(value: 0x40, cccd: 0x41)), [.resume(11, .failure(manual))])
        s.on(.awaitReady(2), [.resume(2, .failure(manual))])
        #expect(s.machine.state == .disconnected)
    }

    @Test func aDisconnectDuringAReconnectStopsIt() {
        var s = Script()
        s.ready()
        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)), .arm(.backoff(2), .seconds(1))])
        s.on(.awaitReady(20), [])
        s.on(.disconnect, [.cancelAttempt(2), .disarm(.backoff(2)), .publish(.disconnected), .resume(20, .failure(manual))])
        s.on(.deadline(.backoff(2)), [])
        s.on(.linkUp(2), [.dropLink(2)])
    }

    @Test func aDisconnectDuringTheFirstConnectEndsIt() {
        var s = Script()
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)])
        s.on(.linkUp(1), [.adopt(1, 1), .publish(.connected), .prepare(1, 1, security: nil)])
        s.on(.disconnect, [.cancelAttempt(1), .disarm(.attempt(1)), .closeLink(1, manual), .publish(.disconnected),
                           .resume(1, .failure(manual))])
        s.on(.prepared(1), [])
        s.on(.connect(2), [.publish(.connecting), .arm(.attempt(2), .seconds(2)), .connect(2, security: nil)])
    }

    // MARK: - Waiting

    @Test func aCallerThatGivesUpIsAnsweredCancelledOnceAndTheFirstConnectEndsWithItsLastCaller() {
        var s = Script()
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: nil)])
        s.on(.awaitReady(2), [])
        s.on(.cancelWait(2), [.resume(2, .failure(.cancelled))])
        s.on(.cancelWait(2), [])
        s.on(.linkUp(1), [.adopt(1, 1), .publish(.connected), .prepare(1, 1, security: nil)])
        // Nobody else waits for the first connect: it is given up, its link closed, and its caller is
        // answered once the attempt's work has ended.
        s.on(.cancelWait(1), [.cancelAttempt(1), .disarm(.attempt(1)), .closeLink(1, manual)])
        s.on(.establishFailed(1, .cancelled), [.publish(.failed(.cancelled)), .resume(1, .failure(.cancelled))])
        s.on(.prepared(1), [])
    }

    @Test func aReconnectGoesOnWhenTheCallersWaitingForItGiveUp() {
        var s = Script()
        s.ready()
        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)), .arm(.backoff(2), .seconds(1))])
        s.on(.awaitReady(2), [])
        s.on(.cancelWait(2), [.resume(2, .failure(.cancelled))])
        s.on(.deadline(.backoff(2)), [.arm(.attempt(2), .seconds(2)), .connect(2, security: nil)])
    }

    // MARK: - Subscriptions

    @Test func aFailedEnableFailsEveryConsumerWaitingForIt() {
        var s = Script()
        s.ready()
        s.on(.subscribe(10, acks, indicate: false, on: 1), [.enable(10, acks, indicate: false, 1)])
        s.on(.subscribe(11, acks, indicate: false, on: 1), [])
        s.on(.subscribe(12, acks, indicate: false, on: 1), [])
        s.on(.cancelWait(12), [.resume(12, .failure(.cancelled))])
        let missing = BLEError.attributeNotFound("client characteristic configuration of characteristic FFF3 in service FFF0")
        s.on(.enableFailed(10, acks, 1, missing), [.unbind(acks), .resume(11, .failure(missing)), .resume(10, .failure(missing))])
        // The next consumer starts over.
        s.on(.subscribe(13, acks, indicate: false, on: 1), [.enable(13, acks, indicate: false, 1)])
    }

    @Test func anEnableOnALinkLostMeanwhileFailsAndIsNotRestored() {
        var s = Script()
        s.ready()
        s.on(.subscribe(10, acks, indicate: false, on: 1), [.enable(10, acks, indicate: false, 1)])
        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)), .arm(.backoff(2), .seconds(1))])
        s.on(.enabled(10, acks, 1, M.Handles(value: 0x20, cccd: 0x21)), [.unbind(acks), .resume(10, .failure(.disconnected(lost)))])
        s.on(.deadline(.backoff(2)), [.arm(.attempt(2), .seconds(2)), .connect(2, security: nil)])
        s.on(.linkUp(2), [.adopt(2, 2), .publish(.connected), .prepare(2, 2, security: nil)])
        s.on(.prepared(2), [.disarm(.attempt(2)), .publish(.ready)])
    }

    @Test func aJoinerThatLeavesIsAnsweredAndTheEnablerKeepsTheSubscription() {
        var s = Script()
        s.ready()
        s.on(.subscribe(10, acks, indicate: false, on: 1), [.enable(10, acks, indicate: false, 1)])
        s.on(.subscribe(11, acks, indicate: false, on: 1), [])
        s.on(.leave(acks, 11), [.resume(11, .failure(.cancelled))])
        s.on(.enabled(10, acks, 1, M.Handles(value: 0x20, cccd: 0x21)), [.resume(10, .success(1))])
        s.on(.leave(acks, 10), [.unbind(acks), .disable(acks, cccd: 0x21, 1)])
    }

    @Test func aSubscriptionWithoutACCCDIsNotDisabled() {
        var s = Script()
        s.ready()
        s.on(.subscribe(10, acks, indicate: false, on: 1), [.enable(10, acks, indicate: false, 1)])
        s.on(.enabled(10, acks, 1, M.Handles(value: 0x20, cccd: nil)), [.resume(10, .success(1))])
        s.on(.leave(acks, 10), [.unbind(acks)])
    }

    @Test func serviceChangedFindsEveryActiveSubscriptionAgainOnTheCurrentLink() {
        var s = Script()
        s.ready()
        s.subscribe(10, acks, on: 1, cccd: 0x21)
        s.on(.subscribe(11, status, indicate: true, on: 1), [.enable(11, status, indicate: true, 1)])
        s.on(.serviceChanged(1), [.log("\(peer): Service Changed indicated; rediscovering"), .rediscover(1, [M.Restore(key: acks, indicate: false)])])
        s.on(.rebound(acks, 1, M.Handles(value: 0x50, cccd: 0x51)), [])
        s.on(.leave(acks, 10), [.unbind(acks), .disable(acks, cccd: 0x51, 1)])
    }

    // MARK: - Security

    @Test func everyLinkIsSecuredBeforeReadyAtTheLevelLastAskedFor() {
        let encrypted = SecurityRequest(level: .encrypted)
        let authenticated = SecurityRequest(level: .authenticated, passkey: Passkey(123456))
        var s = Script(configuration(reconnect: .limited(maxAttempts: 1, delays: []), security: encrypted))
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: encrypted)])
        s.on(.linkUp(1), [.adopt(1, 1), .publish(.connected), .prepare(1, 1, security: encrypted)])
        let outcome = SecurityOutcome(security: LinkSecurity(level: .encrypted, keySize: 16, secureConnections: true), method: .justWorks, bond: .made)
        s.on(.secured(1, outcome, keep: nil), [])
        s.on(.prepared(1), [.disarm(.attempt(1)), .publish(.ready), .resume(1, .success(1))])
        #expect(s.machine.linkSecurity.level == .encrypted)
        // `secure` raised the level; later links get it (never the one-off "pair again").
        var asked = authenticated
        asked.pairAgain = true
        let raised = SecurityOutcome(security: LinkSecurity(level: .authenticated, keySize: 16, secureConnections: true), method: .passkeyEntry, bond: .made)
        s.on(.secured(1, raised, keep: asked), [])
        #expect(s.machine.security == outcome.followed(by: raised))
        s.on(.linkLost(1, lost), [.closeLink(1, .disconnected(lost)), .publish(.reconnecting(attempt: 1)),
                                  .arm(.attempt(2), .seconds(2)), .connect(2, security: authenticated)])
        s.on(.linkUp(2), [.adopt(2, 2), .publish(.connected), .prepare(2, 2, security: authenticated)])
        #expect(s.machine.linkSecurity == .none, "a new link starts plain")
        // A lower level asked later does not lower what later links get.
        s.on(.secured(2, outcome, keep: encrypted), [])
        #expect(s.machine.securityWanted == authenticated)
    }

    @Test func aRefusalForInsufficientSecurityUpgradesOnceAsItAsks() {
        let refusal = { (code: ATTErrorCode) in BLEError.att(ATTError(code: code, handle: 3, requestOpcode: 0x0A)) }
        let allowed = SecurityRequest(level: .none)
        var s = Script(configuration(upgrade: allowed))
        #expect(s.machine.upgrade(after: refusal(.insufficientEncryption)) == nil, "no link to secure")
        s.on(.connect(1), [.publish(.connecting), .arm(.attempt(1), .seconds(2)), .connect(1, security: allowed)])
        s.on(.linkUp(1), [.adopt(1, 1), .publish(.connected), .prepare(1, 1, security: nil)])
        s.on(.prepared(1), [.disarm(.attempt(1)), .publish(.ready), .resume(1, .success(1))])
        #expect(s.machine.upgrade(after: refusal(.insufficientEncryption))?.level == .encrypted)
        // Without a passkey, authentication asked on a plain link starts with encryption.
        #expect(s.machine.upgrade(after: refusal(.insufficientAuthentication))?.level == .encrypted)
        let keySize = s.machine.upgrade(after: refusal(.insufficientEncryptionKeySize))
        #expect(keySize?.level == .encrypted && keySize?.pairAgain == true)
        #expect(s.machine.upgrade(after: refusal(.readNotPermitted)) == nil)
        #expect(s.machine.upgrade(after: .disconnected(lost)) == nil)
        let encrypted = SecurityOutcome(security: LinkSecurity(level: .encrypted, keySize: 16, secureConnections: true))
        s.on(.secured(1, encrypted, keep: nil), [])
        #expect(s.machine.upgrade(after: refusal(.insufficientEncryption)) == nil, "already encrypted: once only")
        #expect(s.machine.upgrade(after: refusal(.insufficientAuthentication))?.level == .authenticated)

        var none = Script()
        none.ready()
        #expect(none.machine.upgrade(after: refusal(.insufficientEncryption)) == nil, "upgrades not allowed")
    }
}
