/// Hashes that are the same in every process and on every machine (unlike `Hasher`, which is seeded
/// randomly per process), for seeds derived from names.
package enum StableHash {
    /// 64-bit FNV-1a over the UTF-8 bytes of `text`.
    package static func fnv1a(_ text: String) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in text.utf8 {
            h ^= UInt64(b)
            h &*= 0x0000_0100_0000_01B3
        }
        return h
    }
}
