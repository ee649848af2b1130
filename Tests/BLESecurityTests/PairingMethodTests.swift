import BLE
@testable import BLESecurity
import Testing

@Suite struct PairingMethodTests {
    // Table 2.8 of Vol 3 Part H, rows = responder, columns = initiator, in the order
    // DisplayOnly, DisplayYesNo, KeyboardOnly, NoInputNoOutput, KeyboardDisplay.
    // J = Just Works, R = passkey (responder displays), I = passkey (initiator displays),
    // B = passkey (both enter), N = Numeric Comparison (LE Secure Connections only; legacy has the
    // second letter).
    static let table: [[String]] = [
        ["J", "J", "R", "J", "R"],
        ["J", "N/J", "R", "J", "N/R"],
        ["I", "I", "B", "J", "I"],
        ["J", "J", "J", "J", "J"],
        ["I", "N/I", "R", "J", "N/R"],
    ]
    static let order: [SMPIOCapability] = [.displayOnly, .displayYesNo, .keyboardOnly, .noInputNoOutput, .keyboardDisplay]

    static func method(_ letter: Substring) -> PairingMethod {
        switch letter {
        case "J": return .justWorks
        case "R": return .passkeyEntry(.responderDisplays)
        case "I": return .passkeyEntry(.initiatorDisplays)
        case "B": return .passkeyEntry(.bothInput)
        default: return .numericComparison
        }
    }

    @Test func theIOCapabilityTableMatchesTheSpecification() {
        for (r, row) in Self.table.enumerated() {
            for (i, cell) in row.enumerated() {
                let parts = cell.split(separator: "/")
                let sc = Self.method(parts[0]), legacy = Self.method(parts.count > 1 ? parts[1] : parts[0])
                let initiator = Self.order[i], responder = Self.order[r]
                #expect(PairingMethod.fromIOCapabilities(initiator: initiator, responder: responder, secureConnections: true) == sc,
                        "SC \(initiator) → \(responder)")
                #expect(PairingMethod.fromIOCapabilities(initiator: initiator, responder: responder, secureConnections: false) == legacy,
                        "legacy \(initiator) → \(responder)")
            }
        }
    }

    @Test func withoutMITMItIsJustWorksAndOOBComesFirst() {
        let plain = SMPPairingParameters(ioCapability: .keyboardOnly, authRequirements: [.secureConnections], initiatorKeys: [], responderKeys: [])
        let display = SMPPairingParameters(ioCapability: .displayOnly, authRequirements: [.secureConnections], initiatorKeys: [], responderKeys: [])
        #expect(PairingMethod.select(request: plain, response: display, secureConnections: true) == .justWorks)
        var oob = plain
        oob.oobDataFlag = 1
        // Secure Connections: either side's OOB flag; legacy: both.
        #expect(PairingMethod.select(request: oob, response: display, secureConnections: true) == .outOfBand)
        #expect(PairingMethod.select(request: oob, response: display, secureConnections: false) == .justWorks)
        var mitm = display
        mitm.authRequirements.insert(.mitm)
        #expect(PairingMethod.select(request: plain, response: mitm, secureConnections: true) == .passkeyEntry(.responderDisplays))
    }

    @Test func theCentralsIOCapabilityFollowsWhatItCanDo() throws {
        let a = Fixture.centralAddress, b = Fixture.peripheralAddress
        #expect(SMPCentralConfiguration(localAddress: a, peerAddress: b).ioCapability == .noInputNoOutput)
        #expect(SMPCentralConfiguration(localAddress: a, peerAddress: b, passkey: Passkey(1)).ioCapability == .keyboardOnly)
        #expect(SMPCentralConfiguration(localAddress: a, peerAddress: b, displaysPasskey: true).ioCapability == .displayOnly)
        #expect(SMPCentralConfiguration(localAddress: a, peerAddress: b, passkey: Passkey(1), displaysPasskey: true).ioCapability == .keyboardOnly)
    }
}
