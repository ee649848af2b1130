@testable import PostgresClient
import Testing

/// The connection's decisions, driven event by event without a server or a clock.
@Suite struct RequestSchedulerTests {
    let t0 = ContinuousClock.now
    typealias Action = RequestScheduler.Action

    func request(_ id: UInt64, deadline: Duration = .seconds(10), _ step: RequestScheduler.TransactionStep = .none) -> RequestScheduler.Request {
        RequestScheduler.Request(id: id, label: "r\(id)", deadline: t0 + deadline, limit: deadline, transaction: step)
    }

    func kinds(_ actions: [Action]) -> [String] {
        actions.map {
            switch $0 {
            case .send(let id): return "send \(id)"
            case .deliver(let id): return "deliver \(id)"
            case .fail(let id, let e): return "fail \(id) \(e.kind.rawValue)"
            case .requestServerCancel: return "cancel"
            case .close: return "close"
            }
        }
    }

    @Test func requestsGoOutOneAtATimeInOrder() {
        var s = RequestScheduler(connectionName: "test")
        #expect(kinds(s.handle(.submitted(request(1)), now: t0)) == ["send 1"])
        #expect(kinds(s.handle(.submitted(request(2)), now: t0)).isEmpty)
        #expect(kinds(s.handle(.submitted(request(3)), now: t0)).isEmpty)
        #expect(kinds(s.handle(.resultsComplete(1), now: t0)) == ["deliver 1", "send 2"])
        #expect(kinds(s.handle(.resultsComplete(2), now: t0)) == ["deliver 2", "send 3"])
        #expect(kinds(s.handle(.resultsComplete(3), now: t0)) == ["deliver 3"])
        #expect(s.phase == .idle)
    }

    @Test func aTransactionReservesTheConnectionUntilItEnds() {
        var s = RequestScheduler(connectionName: "test")
        #expect(kinds(s.handle(.submitted(request(1, .begin(7))), now: t0)) == ["send 1"])
        // Another task's request waits while the transaction's next one overtakes it.
        #expect(kinds(s.handle(.submitted(request(2)), now: t0)).isEmpty)
        #expect(kinds(s.handle(.resultsComplete(1), now: t0)) == ["deliver 1"])
        #expect(kinds(s.handle(.submitted(request(3, .within(7))), now: t0)) == ["send 3"])
        #expect(kinds(s.handle(.resultsComplete(3), now: t0)) == ["deliver 3"])
        #expect(kinds(s.handle(.submitted(request(4, .end(7))), now: t0)) == ["send 4"])
        #expect(kinds(s.handle(.resultsComplete(4), now: t0)) == ["deliver 4", "send 2"])
        #expect(s.openTransaction == nil)
    }

    @Test func aQueuedRequestPastItsDeadlineFailsWithoutBeingSent() {
        var s = RequestScheduler(connectionName: "test")
        _ = s.handle(.submitted(request(1, deadline: .seconds(60))), now: t0)
        _ = s.handle(.submitted(request(2, deadline: .seconds(1))), now: t0)
        #expect(s.nextDeadline == t0 + .seconds(1))
        #expect(kinds(s.handle(.timePassed, now: t0 + .seconds(2))) == ["fail 2 timeout"])
        #expect(kinds(s.handle(.resultsComplete(1), now: t0 + .seconds(3))) == ["deliver 1"])
    }

    @Test func aRunningRequestPastItsDeadlineIsAnsweredAtOnceAndDrainedBeforeTheNext() {
        var s = RequestScheduler(cancelGrace: .seconds(5), connectionName: "test")
        _ = s.handle(.submitted(request(1, deadline: .seconds(1))), now: t0)
        _ = s.handle(.submitted(request(2, deadline: .seconds(60))), now: t0)
        #expect(kinds(s.handle(.timePassed, now: t0 + .seconds(1))) == ["fail 1 timeout", "cancel"])
        // The statement's results come back (cancelled) but the cancel request is not done yet: wait.
        #expect(kinds(s.handle(.resultsComplete(1), now: t0 + .seconds(2))).isEmpty)
        #expect(kinds(s.handle(.serverCancelFinished, now: t0 + .seconds(2))) == ["send 2"])
    }

    @Test func theCancelRequestMayFinishBeforeTheResults() {
        var s = RequestScheduler(connectionName: "test")
        _ = s.handle(.submitted(request(1)), now: t0)
        _ = s.handle(.submitted(request(2)), now: t0)
        #expect(kinds(s.handle(.cancelled(1), now: t0)) == ["fail 1 cancelled", "cancel"])
        #expect(kinds(s.handle(.serverCancelFinished, now: t0)).isEmpty)
        #expect(kinds(s.handle(.resultsComplete(1), now: t0)) == ["send 2"])
    }

    @Test func aCancelledStatementThatNeverEndsClosesTheConnectionAfterTheGrace() {
        var s = RequestScheduler(cancelGrace: .seconds(5), connectionName: "test")
        _ = s.handle(.submitted(request(1, deadline: .seconds(1))), now: t0)
        _ = s.handle(.submitted(request(2, deadline: .seconds(60))), now: t0)
        _ = s.handle(.timePassed, now: t0 + .seconds(1))
        _ = s.handle(.serverCancelFinished, now: t0 + .seconds(1))
        #expect(s.nextDeadline == t0 + .seconds(6))
        #expect(kinds(s.handle(.timePassed, now: t0 + .seconds(6))) == ["fail 2 connection_lost", "close"])
        #expect(s.isClosed)
        #expect(kinds(s.handle(.submitted(request(3)), now: t0 + .seconds(7))) == ["fail 3 connection_lost"])
    }

    @Test func aCommitCutShortClosesTheConnection() {
        var s = RequestScheduler(connectionName: "test")
        _ = s.handle(.submitted(request(1, .begin(9))), now: t0)
        _ = s.handle(.resultsComplete(1), now: t0)
        _ = s.handle(.submitted(request(2, deadline: .seconds(1), .end(9))), now: t0)
        _ = s.handle(.submitted(request(3)), now: t0)
        // No cancel request: a COMMIT's outcome cannot be made known by cancelling it.
        #expect(kinds(s.handle(.timePassed, now: t0 + .seconds(2))) == ["fail 2 timeout", "fail 3 connection_lost", "close"])
    }

    @Test func aCancellationThatArrivesBeforeItsRequestFailsItOnArrival() {
        var s = RequestScheduler(connectionName: "test")
        #expect(kinds(s.handle(.cancelled(5), now: t0)).isEmpty)
        #expect(kinds(s.handle(.submitted(request(5)), now: t0)) == ["fail 5 cancelled"])
        #expect(kinds(s.handle(.submitted(request(6)), now: t0)) == ["send 6"])
    }

    @Test func aBrokenConnectionFailsEverythingOutstandingAndEverythingLater() {
        var s = RequestScheduler(connectionName: "test")
        _ = s.handle(.submitted(request(1)), now: t0)
        _ = s.handle(.submitted(request(2)), now: t0)
        let lost = PostgresError(.connectionLost, operation: "x", message: "server closed the connection", sqlState: "57P01")
        let actions = s.handle(.connectionFailed(lost), now: t0)
        #expect(kinds(actions) == ["fail 1 connection_lost", "fail 2 connection_lost", "close"])
        if case .fail(_, let e) = actions[0] {
            #expect(e.sqlState == "57P01")
            #expect(e.operation == "r1")
        }
        #expect(kinds(s.handle(.submitted(request(3)), now: t0)) == ["fail 3 connection_lost"])
        #expect(kinds(s.handle(.closeRequested, now: t0)).isEmpty)
    }

    @Test func closingFailsOutstandingRequestsAsClosed() {
        var s = RequestScheduler(connectionName: "test")
        _ = s.handle(.submitted(request(1)), now: t0)
        _ = s.handle(.submitted(request(2)), now: t0)
        #expect(kinds(s.handle(.closeRequested, now: t0)) == ["fail 1 closed", "fail 2 closed", "close"])
    }
}
