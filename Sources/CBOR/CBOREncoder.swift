import CLibCBOR

extension CBOR {
    /// The item's bytes: every head written by libcbor's encoders in its shortest form (RFC 8949,
    /// section 4.2.1: preferred serialization), definite lengths, map pairs in their order.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    /// Appends the item's bytes.
    public func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let v): Self.head(&out) { cbor_encode_uint(v, $0, $1) }
        case .negative(let n): Self.head(&out) { cbor_encode_negint(n, $0, $1) }
        case .bytes(let b):
            Self.head(&out) { cbor_encode_bytestring_start(b.count, $0, $1) }
            out.append(contentsOf: b)
        case .text(let t):
            let utf8 = Array(t.utf8)
            Self.head(&out) { cbor_encode_string_start(utf8.count, $0, $1) }
            out.append(contentsOf: utf8)
        case .array(let items):
            Self.head(&out) { cbor_encode_array_start(items.count, $0, $1) }
            for item in items { item.encode(into: &out) }
        case .map(let pairs):
            Self.head(&out) { cbor_encode_map_start(pairs.count, $0, $1) }
            for p in pairs {
                p.key.encode(into: &out)
                p.value.encode(into: &out)
            }
        case .tagged(let tag, let item):
            if (6...20).contains(tag) {
                // libcbor's decoder refuses the one-byte heads of tags 6...20 (unassigned when it was
                // written): these go in the next form (D8 nn), which every decoder reads.
                out += [0xD8, UInt8(tag)]
            } else {
                Self.head(&out) { cbor_encode_tag(tag, $0, $1) }
            }
            item.encode(into: &out)
        case .bool(let b): Self.head(&out) { cbor_encode_bool(b, $0, $1) }
        case .null: Self.head(&out) { cbor_encode_null($0, $1) }
        case .undefined: Self.head(&out) { cbor_encode_undef($0, $1) }
        case .float(let d): Self.head(&out) { cbor_encode_double(d, $0, $1) }
        }
    }

    /// The encoded size without building the bytes (to fit a chunk into a buffer).
    public var encodedSize: Int {
        switch self {
        case .unsigned(let v), .negative(let v): return Self.headSize(v)
        case .bytes(let b): return Self.headSize(UInt64(b.count)) + b.count
        case .text(let t): return Self.headSize(UInt64(t.utf8.count)) + t.utf8.count
        case .array(let items): return items.reduce(Self.headSize(UInt64(items.count))) { $0 + $1.encodedSize }
        case .map(let pairs):
            return pairs.reduce(Self.headSize(UInt64(pairs.count))) { $0 + $1.key.encodedSize + $1.value.encodedSize }
        case .tagged(let tag, let item): return ((6...20).contains(tag) ? 2 : Self.headSize(tag)) + item.encodedSize
        case .bool, .null, .undefined: return 1
        case .float: return 9
        }
    }

    /// The size of a head carrying `argument` (RFC 8949, section 3: 1, 2, 3, 5 or 9 bytes).
    public static func headSize(_ argument: UInt64) -> Int {
        switch argument {
        case 0..<24: return 1
        case 24...0xFF: return 2
        case 0x100...0xFFFF: return 3
        case 0x1_0000...0xFFFF_FFFF: return 5
        default: return 9
        }
    }

    /// Writes one head through a libcbor encoder into a 9-byte scratch buffer (the longest head).
    private static func head(_ out: inout [UInt8], _ write: (UnsafeMutablePointer<UInt8>, Int) -> Int) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 9) { scratch in
            guard let base = scratch.baseAddress else { return }
            let n = write(base, 9)
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: min(max(n, 0), 9)))
        }
    }
}
