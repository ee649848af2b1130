import Foundation
import Testing
@testable import Workflow

@Suite struct MeasurementLimitsTests {
    private let uint: ValueType = .integer(signed: false)
    private func u(_ n: Int64) -> TypedValue { .integer(n, signed: false) }
    private func version(_ text: String) throws -> SemanticVersion { try SemanticVersion(parsing: text) }

    @Test func minAndMaxAreInclusiveAndNameTheLimitThatFailed() {
        let limits = MeasurementLimits(min: u(20), max: u(100))
        let low = limits.check(u(19), name: "battery", unit: "%")
        #expect(low.outcome == .fail)
        #expect(low.message == "battery 19 % is below min 20 %")
        let high = limits.check(u(101), name: "battery", unit: "%")
        #expect(high.message == "battery 101 % is above max 100 %")
        #expect(limits.check(u(20), name: "battery", unit: "%").passed)
        #expect(limits.check(u(100), name: "battery", unit: "%").passed)
        let pass = limits.check(u(45), name: "battery", unit: "%")
        #expect(pass.outcome == .pass)
        #expect(pass.message == "battery 45 % passes min 20 %, max 100 %")
        #expect(pass.value == u(45))
        #expect(pass.unit == "%")
        #expect(pass.limits == limits)
    }

    @Test func eitherBoundMayStandAlone() {
        #expect(MeasurementLimits(min: u(20)).check(u(1_000), name: "b").passed)
        #expect(!MeasurementLimits(min: u(20)).check(u(19), name: "b").passed)
        #expect(MeasurementLimits(max: .real(37.5)).check(.real(36.6), name: "t", unit: "°C").passed)
        #expect(MeasurementLimits(max: .real(37.5)).check(.real(37.6), name: "t", unit: "°C").message == "t 37.6 °C is above max 37.5 °C")
        #expect(MeasurementLimits(min: .integer(-20, signed: true)).check(.real(-.infinity), name: "t").message == "t -Infinity is below min -20")
    }

    @Test func integersAndRealsMixInLimits() {
        #expect(MeasurementLimits(min: .real(19.5)).check(u(20), name: "b").passed)
        #expect(!MeasurementLimits(min: .real(20.5)).check(u(20), name: "b").passed)
        #expect(MeasurementLimits(max: u(37)).check(.real(36.99), name: "t").passed)
    }

    @Test func equalsAndIn() throws {
        #expect(MeasurementLimits(equals: .text("SL-2")).check(.text("SL-2"), name: "model").passed)
        #expect(MeasurementLimits(equals: .text("SL-2")).check(.text("SL-3"), name: "model").message == "model \"SL-3\" does not equal \"SL-2\"")
        #expect(MeasurementLimits(equals: .bytes([1, 2])).check(.bytes([1, 2]), name: "cfg").passed)
        #expect(MeasurementLimits(oneOf: [u(1), u(2)]).check(u(2), name: "mode").passed)
        #expect(MeasurementLimits(oneOf: [u(1), u(2)]).check(u(3), name: "mode", unit: "x").message == "mode 3 x is not in [1, 2] x")
        #expect(MeasurementLimits(oneOf: [.text("a"), .text("b")]).check(.text("c"), name: "m").message == "m \"c\" is not in [\"a\", \"b\"]")
        #expect(MeasurementLimits(equals: .version(try version("2.0"))).check(.version(try version("2.0.0")), name: "fw").passed)
    }

    @Test func matchesLooksAtTextHexOrTheVersionAsWritten() throws {
        let serial = MeasurementLimits(matches: "^SN[0-9]{4}$")
        #expect(serial.check(.text("SN0042"), name: "serial").passed)
        #expect(serial.check(.text("SN42"), name: "serial").message == "serial \"SN42\" does not match /^SN[0-9]{4}$/")
        #expect(MeasurementLimits(matches: "^4f4b").check(.bytes([0x4F, 0x4B, 0x01]), name: "ack").passed)
        #expect(MeasurementLimits(matches: "^2\\.").check(.version(try version("2.4.1")), name: "fw").passed)
    }

    @Test func versionLimitsUseSemanticOrder() throws {
        let limits = MeasurementLimits(versionAtLeast: try version("2.0"), versionBelow: try version("3.0.0"))
        #expect(limits.check(.version(try version("10.0.0")), name: "fw").message == "fw 10.0.0 is not below version_below 3.0.0")
        #expect(limits.check(.version(try version("2.0.0")), name: "fw").passed)
        #expect(limits.check(.version(try version("2.10.1")), name: "fw").passed)
        #expect(limits.check(.version(try version("2.0.0-rc1")), name: "fw").message == "fw 2.0.0-rc1 is below version_at_least 2.0")
        #expect(limits.check(.version(try version("1.9.9")), name: "fw").outcome == .fail)
    }

    @Test func aMissingValueFails() {
        let r = MeasurementLimits(min: u(20)).check(nil, name: "battery", unit: "%")
        #expect(r.outcome == .fail)
        #expect(r.message == "battery has no value")
        #expect(r.value == nil)
    }

    @Test func aValueOfAnUnexpectedTypeFailsWithAMessageInsteadOfTrapping() {
        let r = MeasurementLimits(min: u(20)).check(.text("19"), name: "battery")
        #expect(r.outcome == .fail)
        #expect(r.message == "battery: cannot compare text with an unsigned integer (\"19\" < 20)")
        #expect(MeasurementLimits(matches: "x").check(u(1), name: "n").message == "n: matches needs text, bytes or a version, not an unsigned integer")
        #expect(MeasurementLimits(matches: "(").check(.text("x"), name: "n").message == "n: the regular expression /(/ does not compile")
    }

    @Test func minOnTextIsFoundAtValidation() {
        let problems = MeasurementLimits(min: u(20), max: u(100)).typeProblems(for: .text)
        #expect(problems.map(\.key) == ["min", "max"])
        #expect(problems.first?.message == "min needs a number, but the value is text")
        #expect(problems.first?.hint == "min and max need a number (read the value as: uint8, sfloat, …)")
        #expect(MeasurementLimits(min: u(20)).typeProblems(for: .version).first?.hint == "for versions use version_at_least / version_below")
        #expect(MeasurementLimits(min: .text("20")).typeProblems(for: uint).map(\.message) == ["min must be a number, not text (\"20\")"])
    }

    @Test func otherProblemsFoundAtValidation() throws {
        #expect(MeasurementLimits().typeProblems(for: uint).map(\.message) == ["a verify needs at least one limit"])
        #expect(MeasurementLimits(min: u(100), max: u(20)).typeProblems(for: uint).map(\.message) == ["min 100 is above max 20: no value can pass"])
        #expect(MeasurementLimits(equals: .text("20")).typeProblems(for: uint).map(\.message) == ["cannot compare an unsigned integer with text (\"20\")"])
        #expect(MeasurementLimits(oneOf: []).typeProblems(for: uint).map(\.message) == ["the list is empty: no value can pass"])
        #expect(MeasurementLimits(oneOf: [u(1), .text("b")]).typeProblems(for: uint).map(\.key) == ["in"])
        #expect(MeasurementLimits(matches: "^1").typeProblems(for: uint).map(\.key) == ["matches"])
        #expect(MeasurementLimits(matches: "(").typeProblems(for: .text).first?.message.hasPrefix("the regular expression does not compile") == true)
        #expect(MeasurementLimits(versionAtLeast: try version("2.0")).typeProblems(for: .text).map(\.message)
            == ["version_at_least needs a version, but the value is text"])
        #expect(MeasurementLimits(versionBelow: try version("2.0")).typeProblems(for: .text).first?.hint == "read the value as: version")
        // Everything that fits is clean.
        #expect(MeasurementLimits(min: .real(-0.5), max: u(100), oneOf: [u(1)]).typeProblems(for: .real).isEmpty)
        #expect(MeasurementLimits(equals: .bytes([1]), matches: "^01").typeProblems(for: .bytes).isEmpty)
        #expect(MeasurementLimits(versionAtLeast: try version("2.0"), versionBelow: try version("3")).typeProblems(for: .version).isEmpty)
    }
}
