import Testing
@testable import ESPProv

@Suite struct ProtoVersionTests {
    @Test func theProvisioningManagersJSONIsRead() throws {
        // What ESP-IDF's wifi_prov_mgr answers (wifi_prov_get_info_json), with an application label beside it.
        let json = #"{"prov":{"ver":"v1.1","sec_ver":2,"sec_patch_ver":1,"cap":["wifi_scan"]},"app":{"ver":"1.0","cap":["x"]}}"#
        #expect(try ProtoVersionInfo(parsing: Array(json.utf8)) == ProtoVersionInfo(version: "v1.1", securityScheme: 2, securityPatch: 1, capabilities: ["wifi_scan"]))
        let noPop = #"{"prov":{"ver":"v1.1","sec_ver":1,"cap":["no_pop","wifi_scan"]}}"#
        #expect(try ProtoVersionInfo(parsing: Array(noPop.utf8)) == ProtoVersionInfo(version: "v1.1", securityScheme: 1, securityPatch: 0, capabilities: ["no_pop", "wifi_scan"]))
    }

    @Test func oldFirmwaresBareVersionIsRead() throws {
        #expect(try ProtoVersionInfo(parsing: Array("v1.0".utf8)) == ProtoVersionInfo(version: "v1.0", securityScheme: nil))
    }

    @Test func hostileAnswersAreErrors() {
        let cases: [[UInt8]] = [
            [], [0xFF, 0xFE], Array(#"{"prov":1}"#.utf8), Array(#"{"prov":{"sec_ver":2}}"#.utf8),
            Array(#"{"prov":{"ver":"v1","sec_ver":"2"}}"#.utf8), Array(#"{"prov":{"ver":"v1","sec_ver":99999}}"#.utf8),
            Array(#"{"prov":{"ver":"v1","cap":"wifi_scan"}}"#.utf8), Array("{not json".utf8), Array("v1\u{1}".utf8),
            [UInt8](repeating: 0x41, count: 5000),
        ]
        for bytes in cases {
            #expect(throws: ProtocommError.self) { _ = try ProtoVersionInfo(parsing: bytes) }
        }
    }
}
