import BLE
import Testing

/// Bytes from hex as the specification prints them (spaces allowed); the test fails on bad hex.
func bytes(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
    try #require([UInt8](hex: text), "bad hex \(text)", sourceLocation: sourceLocation)
}

/// A 128-bit value from hex, most significant octet first (the specification's sample data).
func u128(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> UInt128 {
    let raw = try bytes(text, sourceLocation: sourceLocation)
    return try #require(UInt128(bigEndianBytes: raw), sourceLocation: sourceLocation)
}
