import Support
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
        var rng = SplitMix64(seed: 0xD15C0)
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

    // MARK: - Finding a service however it is declared

    @Test func aSIGServiceDeclaredIn128BitFormIsFoundByItsLongValue() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = serve(bearer, TestPeripheral.sensorV2(longUUIDs: true))
        defer { peer.cancel() }
        let r = try await gatt.resolve(service: BluetoothUUID(0x180F), characteristic: BluetoothUUID(0x2A19), needCCCD: true)
        #expect(r.characteristic.uuid == BluetoothUUID(0x2A19))
        #expect(r.cccdHandle == r.characteristic.valueHandle + 1)
        let sent = bearer.sent.items
        // Find By Type Value with 0F18 (nothing), then with the 128-bit form (found), then its
        // characteristic (and the closing request: its CCCD follows the value), then its descriptors.
        #expect(sent.map { $0[0] } == [0x06, 0x06, 0x08, 0x08, 0x04])
        #expect(sent.first == b09("06 0100 ffff 0028 0f18"))
        #expect(sent.dropFirst().first == b09("06 0100 ffff 0028") + BluetoothUUID(0x180F).uuid128.reversed())
    }

    @Test func aServiceFindByTypeValueCannotFindIsFoundByFullDiscovery() async throws {
        let (gatt, bearer) = await makeGATT()
        let database = TestPeripheral.sensorV2(longUUIDs: true)
        // A server whose Find By Type Value finds nothing, whatever the form: full discovery decides.
        let server = Mutex(ATTServer(database: database))
        let peer = answer(bearer) { req in
            if req[0] == 0x06 { return [notFound(req)] }
            return server.withLock { s in s.receive(req).response.map { [$0] } ?? [] }
        }
        defer { peer.cancel() }
        let s = try await gatt.service(BluetoothUUID(0xFFF0))
        #expect(s.startHandle == database.valueHandle(service: BluetoothUUID(0xFFF0), characteristic: BluetoothUUID(0xFFF1)).map { $0 - 2 })
        #expect(bearer.sent.items.map { $0[0] }.prefix(3) == [0x06, 0x06, 0x10])
        // An absent service ends in attributeNotFound, and asking again costs nothing.
        await #expect(throws: BLEError.attributeNotFound("service 1234")) { _ = try await gatt.service(BluetoothUUID(0x1234)) }
        let before = bearer.sent.items.count
        await #expect(throws: BLEError.attributeNotFound("service 1234")) { _ = try await gatt.service(BluetoothUUID(0x1234)) }
        #expect(bearer.sent.items.count == before)
    }

    @Test func characteristicDiscoveryNeedsNoClosingRequestWhenTheLastValueEndsTheService() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = serve(bearer, TestPeripheral.sensorV2())
        defer { peer.cancel() }
        _ = try await gatt.att.exchangeMTU(preferred: 247)
        let s = try await gatt.service(BluetoothUUID(0x180A))
        let chars = try await gatt.discoverCharacteristics(of: s)
        #expect(chars.map(\.uuid) == [0x2A29, 0x2A24, 0x2A25, 0x2A26].map { BluetoothUUID($0) })
        // One Find By Type Value, one Read By Type: 2A26's value is the service's last handle.
        #expect(bearer.sent.items.map { $0[0] } == [0x02, 0x06, 0x08])
    }

    // MARK: - Read Multiple Variable Length

    @Test func readMultipleVariableReturnsEveryValueInOneRequest() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = serve(bearer, TestPeripheral.sensorV2())
        defer { peer.cancel() }
        let values = try await gatt.readMultipleVariable(handles: [3, 7])   // 2A29, 2A25
        #expect(values == [Array("Acme".utf8), Array("SN-0001".utf8)])
        #expect(bearer.sent.items == [b09("20 0300 0700")])
    }

    @Test func valuesCutByTheMTUAreCompletedAndMissingOnesReadOneByOne() async throws {
        let (gatt, bearer) = await makeGATT()
        let long = (0..<40).map { UInt8($0) }
        let peer = answer(bearer) { req in
            switch req[0] {
            // MTU 23: "ab" whole, then 40 announced and 16 sent; nothing for the third handle.
            case 0x20: return [[0x21, 0x02, 0x00, 0x61, 0x62, 40, 0x00] + Array(long.prefix(16))]
            case 0x0C:
                let offset = Int(req[3]) | Int(req[4]) << 8
                return [[0x0D] + Array(long[offset...].prefix(22))]
            case 0x0A: return [[0x0B, 0x07]]
            default: return [notFound(req)]
            }
        }
        defer { peer.cancel() }
        let values = try await gatt.readMultipleVariable(handles: [3, 4, 5])
        #expect(values == [[0x61, 0x62], long, [0x07]])
        #expect(bearer.sent.items == [b09("20 0300 0400 0500"), b09("0c 0400 1000"), b09("0c 0400 2600"), b09("0a 0500")])
    }

    @Test func aValueEndingAFullAnswerIsCheckedForMore() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            switch req[0] {
            // 22 bytes of list: a server that writes the cut length (not the full one) looks complete.
            case 0x20: return [[0x21, 0x01, 0x00, 0x09, 17, 0x00] + Array(repeating: 0x33, count: 17)]
            case 0x0C: return [[0x0D, 0x34, 0x35]]
            default: return [notFound(req)]
            }
        }
        defer { peer.cancel() }
        let values = try await gatt.readMultipleVariable(handles: [3, 4])
        #expect(values == [[0x09], Array(repeating: 0x33, count: 17) + [0x34, 0x35]])
    }

    @Test func moreValuesThanHandlesIsAProtocolError() async throws {
        let (gatt, bearer) = await makeGATT()
        let peer = answer(bearer) { req in
            req[0] == 0x20 ? [b09("21 0100 01 0100 02 0100 03")] : [notFound(req)]
        }
        defer { peer.cancel() }
        await expectProtocolError { _ = try await gatt.readMultipleVariable(handles: [3, 4]) }
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

/// Answers every request from an `ATTServer` over `database` (a scripted peer that behaves).
private func serve(_ bearer: ScriptedBearer, _ database: GATTDatabase) -> Task<Void, Never> {
    let server = Mutex(ATTServer(database: database))
    return answer(bearer) { req in server.withLock { s in s.receive(req).response.map { [$0] } ?? [] } }
}
