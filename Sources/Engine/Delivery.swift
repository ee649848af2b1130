/// What the irreversible actions of one attempt of a step may have done to the device: the one place
/// that knows whether a write that must never be sent twice by accident is "in doubt".
///
/// Rules (an attempt starts `none`):
/// - An irreversible action goes out only after its intent is durable; from then on it counts as
///   having reached the device (`inDoubt`) until the device shows otherwise. Each send counts.
/// - The device refused the only send (an ATT Error Response, a characteristic it does not have or
///   that does not allow the write; a `busy` or `fails_on` answer to it): `notExecuted`. After two or
///   more sends an answer to one says nothing of the others: still in doubt.
/// - A `confirm` read shows the action did not take effect: `notExecuted`, however many sends.
enum Delivery: Sendable, Equatable {
    /// Nothing irreversible went out in this attempt.
    case none
    /// Sent `sends` times (each after its durable intent); no answer said it was not executed.
    case inDoubt(sends: Int)
    /// The device showed that what was sent did not take effect.
    case notExecuted

    /// What a step tells about its irreversible action.
    enum Event: Sendable, Equatable {
        /// The intent is durable; the action goes out now.
        case sent
        /// The device refused (or answered `busy` / `fails_on` to) the last send.
        case refused
        /// A `confirm` read: whether the action took effect.
        case confirmed(tookEffect: Bool)
    }

    mutating func handle(_ event: Event) {
        switch (event, self) {
        case (.sent, .inDoubt(let n)):
            self = .inDoubt(sends: n + 1)
        case (.sent, _):
            self = .inDoubt(sends: 1)
        case (.refused, .inDoubt(let n)) where n <= 1:
            self = .notExecuted
        case (.refused, _):
            break
        case (.confirmed(let tookEffect), _):
            // Took effect: the step succeeds and the doubt ends with it; did not: nothing went through.
            if !tookEffect { self = .notExecuted }
        }
    }

    /// An irreversible action of this attempt may have reached the device.
    var mayHaveReached: Bool {
        if case .inDoubt = self { return true }
        return false
    }
}
