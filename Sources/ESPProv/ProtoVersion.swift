import Foundation

/// What a device's `proto-ver` endpoint says (ESP-IDF's provisioning manager): the provisioning
/// version, the security scheme and its patch version, and the capabilities.
///
/// Current firmware answers JSON, `{"prov": {"ver": "v1.1", "sec_ver": 2, "sec_patch_ver": 1,
/// "cap": ["wifi_scan"]}, ...}` (other labels describe the application); old firmware answers the bare
/// version text (`v1.0`), which says nothing about security.
public struct ProtoVersionInfo: Sendable, Equatable {
    /// The provisioning version (`prov.ver`), e.g. `v1.1`.
    public var version: String
    /// The security scheme the device runs (`prov.sec_ver`), nil when the device does not say.
    public var securityScheme: Int?
    /// `prov.sec_patch_ver` (0 when absent): from 1, security 2 counts its nonce.
    public var securityPatch: Int
    /// `prov.cap`: `wifi_scan`, `no_pop`, `no_sec`, ...
    public var capabilities: [String]

    public init(version: String, securityScheme: Int?, securityPatch: Int = 0, capabilities: [String] = []) {
        self.version = version
        self.securityScheme = securityScheme
        self.securityPatch = securityPatch
        self.capabilities = capabilities
    }

    /// The largest answer read (the endpoint is a GATT value: ESP-IDF caps them at a few hundred bytes).
    public static let maximumLength = 4096

    /// Parses an answer; anything that is neither the JSON above nor a short printable version is a
    /// `protocolError` naming what came.
    public init(parsing bytes: [UInt8]) throws(ProtocommError) {
        guard bytes.count <= Self.maximumLength else {
            throw ProtocommError(.protocolError, "proto-ver answered \(bytes.count) bytes; at most \(Self.maximumLength) are read")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ProtocommError(.protocolError, "proto-ver answered bytes that are not UTF-8")
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.first == "{" {
            let parsed = try? JSONSerialization.jsonObject(with: Data(bytes), options: [])
            guard let root = parsed as? [String: Any], let prov = root["prov"] as? [String: Any] else {
                throw ProtocommError(.protocolError, "proto-ver answered JSON without a \"prov\" object")
            }
            guard let version = prov["ver"] as? String else {
                throw ProtocommError(.protocolError, "proto-ver's \"prov\" has no \"ver\" text")
            }
            let capabilities: [String]
            switch prov["cap"] {
            case nil: capabilities = []
            case let list as [Any]: capabilities = list.compactMap { $0 as? String }
            default: throw ProtocommError(.protocolError, "proto-ver's \"cap\" is not a list")
            }
            self.init(version: version, securityScheme: try Self.integer(prov["sec_ver"], "sec_ver"),
                      securityPatch: try Self.integer(prov["sec_patch_ver"], "sec_patch_ver") ?? 0, capabilities: capabilities)
            return
        }
        guard !trimmed.isEmpty, trimmed.count <= 64, trimmed.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) else {
            throw ProtocommError(.protocolError, "proto-ver answered neither JSON nor a version")
        }
        self.init(version: trimmed, securityScheme: nil)
    }

    private static func integer(_ value: Any?, _ name: String) throws(ProtocommError) -> Int? {
        guard let value else { return nil }
        guard let i = value as? Int, (0...255).contains(i) else {
            throw ProtocommError(.protocolError, "proto-ver's \"\(name)\" is not a small integer")
        }
        return i
    }
}
