import Foundation
import Testing
@testable import Workflow

@Suite struct MeasurementResultTests {
    private func encode(_ r: MeasurementResult) throws -> String {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try e.encode(r), as: UTF8.self)
    }

    @Test func theJSONAnAuditorReads() throws {
        let r = MeasurementLimits(min: .integer(20, signed: false), max: .integer(100, signed: false))
            .check(.integer(19, signed: false), name: "battery", unit: "%")
        #expect(try encode(r) == #"{"limits":{"max":100,"min":20},"message":"battery 19 % is below min 20 %","name":"battery","outcome":"fail","type":"uint","unit":"%","value":19}"#)
    }

    @Test func versionsAndBytesAreStringsAndAMissingValueIsLeftOut() throws {
        let fw = MeasurementLimits(versionAtLeast: try SemanticVersion(parsing: "2.0")).check(.version(try SemanticVersion(parsing: "v2.4.1")), name: "fw")
        #expect(try encode(fw) == #"{"limits":{"version_at_least":"2.0"},"message":"fw v2.4.1 passes version_at_least 2.0","name":"fw","outcome":"pass","type":"version","value":"v2.4.1"}"#)
        let ack = MeasurementLimits(oneOf: [.bytes([0x4F, 0x4B])], matches: "^4f").check(.bytes([0x4F, 0x4B]), name: "ack")
        #expect(try encode(ack) == #"{"limits":{"in":["4f4b"],"matches":"^4f"},"message":"ack 4f4b passes in [4f4b], matches /^4f/","name":"ack","outcome":"pass","type":"bytes","value":"4f4b"}"#)
        let missing = MeasurementLimits(min: .real(36)).check(nil, name: "t", unit: "°C")
        #expect(try encode(missing) == #"{"limits":{"min":36},"message":"t has no value","name":"t","outcome":"fail","unit":"°C"}"#)
    }

    @Test func recordsDecodeBackToTheSameValues() throws {
        let v = try SemanticVersion(parsing: "1.9.0-rc1")
        let results: [MeasurementResult] = [
            MeasurementLimits(min: .integer(20, signed: false), max: .integer(100, signed: false)).check(.integer(19, signed: false), name: "battery", unit: "%"),
            MeasurementLimits(min: .real(-0.5), max: .real(37.5)).check(.real(36.6), name: "t", unit: "°C"),
            MeasurementLimits(min: .real(19.5)).check(.integer(20, signed: true), name: "n"),
            MeasurementLimits(equals: .text("SL-2"), oneOf: [.text("SL-2"), .text("SL-3")]).check(.text("SL-2"), name: "model"),
            MeasurementLimits(versionAtLeast: v, versionBelow: try SemanticVersion(parsing: "3")).check(.version(v), name: "fw"),
            MeasurementLimits(equals: .bytes([1, 2]), matches: "^01").check(.bytes([1, 2]), name: "cfg"),
            MeasurementLimits(equals: .boolean(true)).check(.boolean(false), name: "locked"),
            MeasurementLimits(max: .real(1)).check(.real(.infinity), name: "x"),
            MeasurementLimits(min: .integer(1, signed: true)).check(nil, name: "gone"),
        ]
        for r in results {
            let json = try encode(r)
            let back = try JSONDecoder().decode(MeasurementResult.self, from: Data(json.utf8))
            #expect(back == r, "\(json)")
            #expect(back.value?.json == r.value?.json)
        }
    }

    @Test func aRecordWithAnUnknownTypeOrAnUntypedValueIsADecodingError() {
        let unknownType = #"{"limits":{},"message":"m","name":"n","outcome":"pass","type":"float","value":1}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(MeasurementResult.self, from: Data(unknownType.utf8)) }
        let untyped = #"{"limits":{},"message":"m","name":"n","outcome":"pass","value":1}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(MeasurementResult.self, from: Data(untyped.utf8)) }
        let wrongShape = #"{"limits":{},"message":"m","name":"n","outcome":"pass","type":"uint","value":"19"}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(MeasurementResult.self, from: Data(wrongShape.utf8)) }
    }
}
