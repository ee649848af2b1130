import Testing
@testable import Workflow

@Suite struct IEEE11073FloatTests {
    // Golden SFLOATs: raw value, mantissa, exponent, value. The first four are the HL7 PHD
    // implementation guide's examples (2, 2.0, 2.00, 20).
    @Test(arguments: [
        (UInt16(0x0002), Int32(2), Int8(0), 2.0),
        (0xF014, 20, -1, 2.0),
        (0xE0C8, 200, -2, 2.0),
        (0x1002, 2, 1, 20.0),
        (0xF16C, 364, -1, 36.4),
        (0x0FFF, -1, 0, -1.0),          // negative mantissa
        (0xFFFF, -1, -1, -0.1),         // negative mantissa and exponent
        (0xF800, -2048, -1, -204.8),    // the smallest mantissa, not NRes (exponent is not 0)
        (0x7001, 1, 7, 10_000_000.0),   // the largest exponent
        (0x8001, 1, -8, 0.00000001),    // the smallest exponent
        (0x07FD, 2045, 0, 2045.0),      // the largest ordinary mantissa with exponent 0
        (0x0803, -2045, 0, -2045.0),    // the smallest ordinary mantissa with exponent 0
        (0x17FF, 2047, 1, 20470.0),     // NaN's mantissa with exponent 1 is an ordinary number
        (0x0000, 0, 0, 0.0),
    ])
    func sfloatNumbers(raw: UInt16, mantissa: Int32, exponent: Int8, value: Double) {
        let f = IEEE11073Float(sfloat: raw)
        #expect(f == .number(mantissa: mantissa, exponent: exponent))
        #expect(f.doubleValue == value)
    }

    @Test func sfloatSpecialValuesFollowTheIEEE11073Table() {
        #expect(IEEE11073Float(sfloat: 0x07FE) == .positiveInfinity)
        #expect(IEEE11073Float(sfloat: 0x07FF) == .nan)
        #expect(IEEE11073Float(sfloat: 0x0800) == .notAtThisResolution)
        #expect(IEEE11073Float(sfloat: 0x0801) == .reserved)
        #expect(IEEE11073Float(sfloat: 0x0802) == .negativeInfinity)
        #expect(IEEE11073Float(sfloat: 0x07FE).doubleValue == .infinity)
        #expect(IEEE11073Float(sfloat: 0x0802).doubleValue == -.infinity)
        #expect(IEEE11073Float(sfloat: 0x07FF).doubleValue == nil)
        #expect(IEEE11073Float(sfloat: 0x0800).doubleValue == nil)
        #expect(IEEE11073Float(sfloat: 0x0801).doubleValue == nil)
        #expect(IEEE11073Float(sfloat: 0x07FE).description == "+INFINITY")
        #expect(IEEE11073Float(sfloat: 0x0800).description == "NRes")
    }

    @Test(arguments: [
        (UInt32(0xFF00_016C), Int32(364), Int8(-1), 36.4),
        (0x0000_0002, 2, 0, 2.0),
        (0x00FF_FFFF, -1, 0, -1.0),
        (0xFDFF_FFFF, -1, -3, -0.001),
        (0x0080_0003, -8_388_605, 0, -8_388_605.0),
        (0x007F_FFFD, 8_388_605, 0, 8_388_605.0),
        (0x017F_FFFF, 8_388_607, 1, 83_886_070.0),   // NaN's mantissa with exponent 1 is a number
        (0x8000_0001, 1, -128, 1e-128),
        (0x7F00_0001, 1, 127, 1e127),
    ])
    func floatNumbers(raw: UInt32, mantissa: Int32, exponent: Int8, value: Double) {
        let f = IEEE11073Float(float: raw)
        #expect(f == .number(mantissa: mantissa, exponent: exponent))
        #expect(f.doubleValue == value)
    }

    @Test func floatSpecialValuesFollowTheIEEE11073Table() {
        #expect(IEEE11073Float(float: 0x007F_FFFE) == .positiveInfinity)
        #expect(IEEE11073Float(float: 0x007F_FFFF) == .nan)
        #expect(IEEE11073Float(float: 0x0080_0000) == .notAtThisResolution)
        #expect(IEEE11073Float(float: 0x0080_0001) == .reserved)
        #expect(IEEE11073Float(float: 0x0080_0002) == .negativeInfinity)
    }

    @Test func everySFLOATDecodesWithoutTrapping() {
        var numbers = 0
        for raw in 0...UInt16.max {
            let f = IEEE11073Float(sfloat: raw)
            if case .number = f {
                numbers += 1
                #expect(f.doubleValue?.isFinite == true)
            }
        }
        #expect(numbers == 65536 - 5)
    }
}
