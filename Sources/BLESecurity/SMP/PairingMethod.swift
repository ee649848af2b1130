import BLE

/// How a pairing authenticates (Vol 3 Part H 2.3.5.1): the association model.
public enum PairingMethod: Sendable, Hashable, CustomStringConvertible {
    /// No MITM protection: the keys are encrypted but not authenticated.
    case justWorks
    /// Six digits shown on one side and entered on the other (or entered on both).
    case passkeyEntry(PasskeyRoles)
    /// Six digits shown on both sides and confirmed by a person (LE Secure Connections only).
    case numericComparison
    /// Data exchanged out of band (NFC, a label): LE Secure Connections OOB here.
    case outOfBand

    /// Who shows the passkey and who enters it.
    public enum PasskeyRoles: Sendable, Hashable {
        case initiatorDisplays
        case responderDisplays
        case bothInput
    }

    /// True for every method with MITM protection (all but Just Works).
    public var isAuthenticated: Bool { self != .justWorks }

    public var description: String {
        switch self {
        case .justWorks: return "Just Works"
        case .passkeyEntry(.initiatorDisplays): return "Passkey Entry (central displays)"
        case .passkeyEntry(.responderDisplays): return "Passkey Entry (peripheral displays)"
        case .passkeyEntry(.bothInput): return "Passkey Entry (both enter)"
        case .numericComparison: return "Numeric Comparison"
        case .outOfBand: return "OOB"
        }
    }

    /// The method two feature exchanges lead to (2.3.5.1, Tables 2.6 to 2.8).
    ///
    /// OOB first (legacy: both sides have OOB data; Secure Connections: either side has the other's),
    /// then Just Works when neither side asks for MITM protection, else the IO capability table.
    public static func select(request: SMPPairingParameters, response: SMPPairingParameters, secureConnections: Bool) -> PairingMethod {
        if secureConnections ? (request.oobDataPresent || response.oobDataPresent) : (request.oobDataPresent && response.oobDataPresent) {
            return .outOfBand
        }
        guard request.authRequirements.contains(.mitm) || response.authRequirements.contains(.mitm) else { return .justWorks }
        return fromIOCapabilities(initiator: request.ioCapability, responder: response.ioCapability, secureConnections: secureConnections)
    }

    /// Table 2.8: the method for an initiator's and a responder's IO capabilities when MITM is asked for.
    public static func fromIOCapabilities(initiator: SMPIOCapability, responder: SMPIOCapability, secureConnections: Bool) -> PairingMethod {
        switch (initiator, responder) {
        case (.noInputNoOutput, _), (_, .noInputNoOutput):
            return .justWorks
        case (.displayOnly, .displayOnly), (.displayOnly, .displayYesNo), (.displayYesNo, .displayOnly):
            return .justWorks
        case (.displayYesNo, .displayYesNo):
            return secureConnections ? .numericComparison : .justWorks
        case (.keyboardOnly, .keyboardOnly):
            return .passkeyEntry(.bothInput)
        case (.keyboardOnly, _), (.keyboardDisplay, .displayOnly):
            return .passkeyEntry(.responderDisplays)
        case (_, .keyboardOnly), (.displayOnly, .keyboardDisplay):
            return .passkeyEntry(.initiatorDisplays)
        case (.displayYesNo, .keyboardDisplay):
            return secureConnections ? .numericComparison : .passkeyEntry(.initiatorDisplays)
        case (.keyboardDisplay, .displayYesNo), (.keyboardDisplay, .keyboardDisplay):
            return secureConnections ? .numericComparison : .passkeyEntry(.responderDisplays)
        default:
            // Reserved values are refused during the feature exchange; nothing authenticated is possible.
            return .justWorks
        }
    }
}

extension PairingMethod {
    /// The method in the words reports use.
    public var securityMethod: SecurityMethod {
        switch self {
        case .justWorks: return .justWorks
        case .passkeyEntry: return .passkeyEntry
        case .numericComparison: return .numericComparison
        case .outOfBand: return .outOfBand
        }
    }
}
