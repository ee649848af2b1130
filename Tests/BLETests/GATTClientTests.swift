import Testing
import Synchronization
@testable import BLE

private let limit = Duration.seconds(5)

private func makeGATT(discovery: DiscoveryMode = .targeted, attTimeout: Duration = .seconds(5)) async -> (GATTClient, ScriptedBearer) {
    let bearer = ScriptedBearer()
    let att = ATTClient(bearer: bearer, transactionTimeout: attTimeout) { _ in }
    await att.start()
    return (GATTClient(att: att, discovery: discovery), bearer)
}

private func notFound(_ request: [UInt8]) -> [UInt8] {
    ATTPDU.errorResponse(ATTErrorResponse(requestOpcode: ATTOpcode(request[0]), handle: 1, code: .attributeNotFound)).bytes
}

/// Expects a `protocolError` (and not a hang: the deadline is short).
private func expectProtocolError(_ body: @escaping @Sendable () async throws -> Void) async {
    do {
        try await withDeadline(limit, operation: "hostile discovery") { try await body() }
        Issue.record("expected a protocol error, got success")
    } catch BLEError.protocolError {
    } catch {
        Issue.record("expected a protocol error, got \(error)")
    }
}

@Suite struct GATTClientTests {
    @Test func discoveryWithNonIncreasingHandlesEndsInAnErrorNotALoop() async throws {
        let (gatt, bearer) = await makeGATT()
        // Always the same declaration at handle 2, whatever range is asked for.
        let peer = answer(bearer) { req in
            req[0] == 0x08 ? [b09("07 0200 02 0300 292a")] : [notFound(req)]
        }
        defer { peer.cancel() }
        await expectProtocolError {
            _ = try await gatt.discoverCharacteristics(of: GATTService(uuid: BluetoothUUID(0x180A), startHandle: 1, endHandle: 9))
        }
    }

    @Test func serviceGroupsThatGoBackwardsAreRefused() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            req[0] == 0x06 ? [b09("07 0500 0300")] : [notFound(req)]   // end before start
        }
        defer { peer.cancel() }
        await expectProtocolError { _ = try await gatt.discoverPrimaryServices(uuid: BluetoothUUID(0xFFF0)) }
    }

    @Test func aServiceGroupThatRepeatsIsRefused() async throws {
        let (gatt, bearer) = await makeGATT(discovery: .all)
        let peer = answer(bearer) { req in
            req[0] == 0x10 ? [b09("11 06 0100 0300 0a18")] : [notFound(req)]
        }
        defer { peer.cancel() }
        await expectProtocolError { _ = try await gatt.discoverAllPrimaryServices() }
    }

    @Test func wrongLengthsInAReadByTypeListFailTheRequest() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            // Length says 7, but the list holds 7 + 3 bytes.
            req[0] == 0x08 ? [b09("09 07 0200 02 0300 292a 0400 02")] : [notFound(req)]
        }
        defer { peer.cancel() }
        await expectProtocolError {
            _ = try await gatt.discoverCharacteristics(of: GATTService(uuid: BluetoothUUID(0x180A), startHandle: 1, endHandle: 9))
        }
    }

    @Test func aDeclarationOfTheWrongSizeIsRefused() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            req[0] == 0x08 ? [b09("09 06 0200 02 0300 29")] : [notFound(req)]
        }
        defer { peer.cancel() }
        await expectProtocolError {
            _ = try await gatt.discoverCharacteristics(of: GATTService(uuid: BluetoothUUID(0x180A), startHandle: 1, endHandle: 9))
        }
    }

    @Test func descriptorsOutOfOrderAreRefused() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            req[0] == 0x04 ? [b09("05 01 0500 0229 0400 0129")] : [notFound(req)]
        }
        defer { peer.cancel() }
        let c = GATTCharacteristic(uuid: BluetoothUUID(0xFFF3), declarationHandle: 2, valueHandle: 3, properties: [.notify], endHandle: 9)
        await expectProtocolError { _ = try await gatt.discoverDescriptors(of: c) }
    }

    @Test func aValueThatNeverEndsIsCutAtTheSpecMaximum() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            req[0] == 0x0A ? [[0x0B] + Array(repeating: 1, count: 22)] : [[0x0D] + Array(repeating: 2, count: 22)]
        }
        defer { peer.cancel() }
        await expectProtocolError { _ = try await gatt.read(handle: 3) }
        #expect(bearer.sent.items.count < 30)
    }

    @Test func aPrepareWriteEchoThatDiffersCancelsTheQueuedWrite() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            switch req[0] {
            case 0x16: return [[0x17] + Array(req[1...].dropLast())]   // echo missing its last byte
            case 0x18: return [[0x19]]
            default: return [notFound(req)]
            }
        }
        defer { peer.cancel() }
        await expectProtocolError { try await gatt.write(handle: 6, value: Array(repeating: 7, count: 40)) }
        #expect(bearer.sent.items.last == [0x18, 0x00])
    }

    @Test func randomResponsesToDiscoveryAlwaysEnd() async throws {
        // 300 discoveries against a peer answering with random, often malformed, PDUs: each ends.
        var rng = SeededRandom(seed: 0xD15C0)
        let opcodes: [UInt8] = [0x01, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x11, 0x13, 0x1B]
        for _ in 0..<300 {
            var answers: [[UInt8]] = []
            for _ in 0..<64 {
                var pdu: [UInt8] = [opcodes.randomElement(using: &rng) ?? 0x01]
                for _ in 0..<Int.random(in: 0..<22, using: &rng) { pdu.append(UInt8.random(in: 0...255, using: &rng)) }
                answers.append(pdu)
            }
            let script = Script(answers)
            // A notification as the "answer" leaves a request unanswered: the short ATT timeout ends it.
            let (gatt, bearer) = await makeGATT(attTimeout: .milliseconds(20))
            let peer = answer(bearer) { _ in [script.next()] }
            _ = try? await withDeadline(limit, operation: "random discovery") {
                let s = try await gatt.discoverAllPrimaryServices()
                for service in s.prefix(3) {
                    for c in try await gatt.discoverCharacteristics(of: service).prefix(3) {
                        _ = try await gatt.discoverDescriptors(of: c)
                    }
                }
            }
            peer.cancel()
            await gatt.att.close(reason: .localHostTerminated)
        }
    }
}

/// Answers handed out in order (then Attribute Not Found forever).
private final class Script: Sendable {
    private let answers: [[UInt8]]
    private let index = Mutex(0)
    init(_ answers: [[UInt8]]) { self.answers = answers }
    func next() -> [UInt8] {
        let i = index.withLock { i -> Int in
            defer { i += 1 }
            return i
        }
        return i < answers.count ? answers[i] : [0x01, 0x10, 0x01, 0x00, 0x0A]
    }
}

private func b09(_ hex: String) -> [UInt8] { [UInt8](hex: hex) ?? [] }
