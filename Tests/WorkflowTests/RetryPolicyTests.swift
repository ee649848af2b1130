import Support
import Testing
@testable import Workflow

@Suite struct RetryPolicyTests {
    @Test func listBackoffRepeatsItsLastEntry() {
        let p = RetryPolicy(attempts: 5, backoff: .list([.seconds(1), .seconds(2), .seconds(5)]))
        var g = SplitMix64(seed: 1)
        #expect(p.delay(beforeAttempt: 1, random: &g) == .zero)
        #expect(p.delay(beforeAttempt: 2, random: &g) == .seconds(1))
        #expect(p.delay(beforeAttempt: 3, random: &g) == .seconds(2))
        #expect(p.delay(beforeAttempt: 4, random: &g) == .seconds(5))
        #expect(p.delay(beforeAttempt: 5, random: &g) == .seconds(5))
    }

    @Test func exponentialBackoffIsCapped() {
        let p = RetryPolicy(attempts: 10, backoff: .exponential(initial: .milliseconds(500), factor: 2, max: .seconds(3), jitter: 0))
        var g = SplitMix64(seed: 1)
        #expect(p.delay(beforeAttempt: 2, random: &g) == .milliseconds(500))
        #expect(p.delay(beforeAttempt: 3, random: &g) == .seconds(1))
        #expect(p.delay(beforeAttempt: 4, random: &g) == .seconds(2))
        #expect(p.delay(beforeAttempt: 5, random: &g) == .seconds(3))
        #expect(p.delay(beforeAttempt: 9, random: &g) == .seconds(3))
    }

    @Test func jitterStaysWithinItsFraction() {
        let p = RetryPolicy(attempts: 3, backoff: .exponential(initial: .seconds(1), factor: 2, max: .seconds(10), jitter: 0.2))
        var g = SplitMix64(seed: 42)
        for _ in 0..<200 {
            let d = p.delay(beforeAttempt: 2, random: &g)
            #expect(d >= .milliseconds(800) && d <= .milliseconds(1200))
        }
    }

    @Test func onlyListedClassesAreRetriedWithinAttempts() {
        let p = RetryPolicy(attempts: 3, on: [.timeout, .busy])
        #expect(p.shouldRetry(.timeout, afterAttempt: 1))
        #expect(p.shouldRetry(.busy, afterAttempt: 2))
        #expect(!p.shouldRetry(.busy, afterAttempt: 3))
        #expect(!p.shouldRetry(.mismatch, afterAttempt: 1))
        #expect(!RetryPolicy.none.shouldRetry(.timeout, afterAttempt: 1))
    }

    @Test func retryIsParsedFromEveryForm() throws {
        let text = """
            name: t
            defaults:
              retry: { attempts: 4, backoff: { initial: 250ms, factor: 3, max: 5s, jitter: 0.1 }, on: [timeout, att_error] }
              reconnect: { attempts: 0, delay: 2s }
            steps:
              - connect: { timeout: 5s, retry: 2 }
              - read: { service: 180A, characteristic: 2A26, retry: { attempts: 2, backoff: [1s, 2s] } }
            """
        let (w, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(d.isEmpty)
        let workflow = try #require(w)
        #expect(workflow.defaults.retry == RetryPolicy(attempts: 4, backoff: .exponential(initial: .milliseconds(250), factor: 3, max: .seconds(5), jitter: 0.1), on: [.timeout, .attError]))
        #expect(workflow.defaults.reconnect == .disabled)
        #expect(workflow.steps[0].retry?.attempts == 2)
        #expect(workflow.steps[0].effectiveTimeout == .seconds(5))
        #expect(workflow.steps[1].retry?.backoff == .list([.seconds(1), .seconds(2)]))
        #expect(workflow.steps[1].effectiveTimeout == .seconds(10))
        #expect(workflow.steps[1].effectiveRetry.attempts == 2)
    }
}
