import BLE

/// A class of failure, as the supervisor sees it. Retry policies name the classes they apply to.
public enum ErrorClass: String, Sendable, Hashable, CaseIterable, Comparable {
    /// An operation did not finish within its timeout (includes a scan that did not find the device).
    case timeout
    /// The link dropped while a step was running.
    case disconnected
    /// The connection could not be established.
    case connectFailed = "connect_failed"
    /// The device answered "busy" (for example a busy ack `xx 02`, or ATT Prepare Queue Full).
    case busy
    /// An ATT error response other than the ones below.
    case attError = "att_error"
    /// The device refused for lack of authentication, authorisation or encryption.
    case insufficientSecurity = "insufficient_security"
    /// Read/write not permitted.
    case notPermitted = "not_permitted"
    /// A service or characteristic is missing.
    case notFound = "not_found"
    /// A `verify` or an `await` value did not match.
    case mismatch
    /// A value could not be produced or decoded (bad hex in a variable, unreadable file).
    case invalidInput = "invalid_input"
    /// The controller could not start encryption on the link (not a pairing failure: no key was refused).
    case encryptionFailed = "encryption_failed"

    /// Transient classes: worth retrying by default.
    public static let transient: Set<ErrorClass> = [.timeout, .disconnected, .connectFailed, .busy, .encryptionFailed]

    /// Error kinds that are never retried, whatever a policy lists, and why (for the message that
    /// refuses them in `on:`).
    public static let neverRetried: [String: String] = [
        "pairing_failed": "a failed pairing is never retried: a wrong passkey tried again can lock the device out (devices count failed attempts)",
        "bond_lost": "a lost bond is not retried: the device no longer has the key; say `on_bond_lost: pair` on `connect` to pair again",
    ]

    public var isTransient: Bool { Self.transient.contains(self) }

    public static func < (a: ErrorClass, b: ErrorClass) -> Bool { a.rawValue < b.rawValue }
}

/// How often and how patiently a step (or a device) is retried.
public struct RetryPolicy: Sendable, Equatable {
    /// The wait before each retry.
    public enum Backoff: Sendable, Equatable {
        /// Waits in order; the last one repeats (`[1s, 2s, 5s]`).
        case list([Duration])
        /// `initial * factor^(retry-1)`, capped at `max`, then spread by ±`jitter` (a fraction, 0...1).
        case exponential(initial: Duration, factor: Double, max: Duration, jitter: Double)
    }

    /// Total attempts including the first (1 = no retry).
    public var attempts: Int
    public var backoff: Backoff
    /// The error classes that are retried; others fail at once.
    public var on: Set<ErrorClass>

    public init(attempts: Int, backoff: Backoff = .list([.seconds(1)]), on: Set<ErrorClass> = ErrorClass.transient) {
        self.attempts = attempts
        self.backoff = backoff
        self.on = on
    }

    /// One attempt, no retry.
    public static let none = RetryPolicy(attempts: 1, backoff: .list([]), on: [])

    /// Whether a failure of `errorClass` after attempt `attempt` (1-based) should be retried.
    public func shouldRetry(_ errorClass: ErrorClass, afterAttempt attempt: Int) -> Bool {
        attempt < attempts && on.contains(errorClass)
    }

    /// The wait before attempt `n` (2 is the first retry; 1 or less waits nothing).
    public func delay(beforeAttempt n: Int, random: inout some RandomNumberGenerator) -> Duration {
        guard n >= 2 else { return .zero }
        let retry = n - 1
        switch backoff {
        case .list(let delays):
            guard let last = delays.last else { return .zero }
            return retry - 1 < delays.count ? delays[retry - 1] : last
        case .exponential(let initial, let factor, let max, let jitter):
            let base = initial.seconds * pow(factor, Double(retry - 1))
            let capped = Swift.min(base, max.seconds)
            var value = capped
            if jitter > 0, jitter <= 1 {
                let spread = Double.random(in: -jitter...jitter, using: &random)
                value = Swift.max(0, capped * (1 + spread))
            }
            // Clamp before converting: a policy built in code may hold any Double.
            let nanos = Swift.min(Swift.max(value * 1e9, 0), 1e17)
            return .nanoseconds(nanos.isFinite ? Int64(nanos.rounded()) : 0)
        }
    }

    /// The wait before attempt `n` with the system random generator.
    public func delay(beforeAttempt n: Int) -> Duration {
        var g = SystemRandomNumberGenerator()
        return delay(beforeAttempt: n, random: &g)
    }
}

/// A workflow's `reconnect:` is the session's own `ReconnectPolicy` (BLE): what a connection does when it
/// drops unexpectedly. A workflow gives bounded attempts with one delay before each (0 attempts:
/// `.disabled`).
extension ReconnectPolicy {
    /// The most reconnect attempts a workflow may ask for.
    public static let maxAttempts = 20
    /// The longest delay before an attempt a workflow may ask for.
    public static let maxDelay: Duration = .seconds(60)

    /// A workflow's reconnect policy: `attempts` tries (none: disabled), `delay` before each.
    public static func workflow(attempts: Int, delay: Duration) -> ReconnectPolicy {
        attempts > 0 ? .limited(maxAttempts: attempts, delays: [delay]) : .disabled
    }

    /// A workflow's default: three attempts, one second apart.
    public static let standard = ReconnectPolicy.workflow(attempts: 3, delay: .seconds(1))
}

private func pow(_ base: Double, _ exponent: Double) -> Double {
    guard exponent > 0 else { return 1 }
    var result = 1.0
    var e = Int(exponent)
    while e > 0 {
        result *= base
        e -= 1
        if result.isInfinite { break }
    }
    return result
}
