import CLibCBOR

/// Reads one CBOR document (RFC 8949) from hostile bytes, through libcbor's streaming decoder.
///
/// libcbor decodes each item's head (and hands over definite strings whole); this layer builds the value
/// without recursion, on an explicit stack, and holds every limit: the document's size, the nesting depth,
/// the number of items, and a container's declared count against the bytes left (an array of 2^32 items
/// in a 10-byte document is refused before anything is reserved). Text must be UTF-8, map keys unique,
/// and nothing may follow the item. Every failure is a `CBORError` with its byte offset; nothing traps.
public struct CBORDecoder: Sendable {
    /// Bounds on what a document may hold.
    public struct Limits: Sendable, Equatable {
        public var maxBytes: Int
        public var maxDepth: Int
        public var maxItems: Int
        public init(maxBytes: Int = 1 << 20, maxDepth: Int = 16, maxItems: Int = 65_536) {
            self.maxBytes = maxBytes
            self.maxDepth = maxDepth
            self.maxItems = maxItems
        }
    }

    public var limits: Limits

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Decodes exactly one item that fills `bytes`.
    public func decode(_ bytes: [UInt8]) throws(CBORError) -> CBOR {
        guard bytes.count <= limits.maxBytes else {
            throw CBORError(.tooLarge(size: bytes.count, limit: limits.maxBytes), at: 0)
        }
        let builder = Builder(limits: limits)
        var offset = 0
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            withUnsafePointer(to: Self.callbacks) { callbacks in
                let context = Unmanaged.passUnretained(builder).toOpaque()
                while builder.root == nil, builder.error == nil, offset < buffer.count {
                    builder.offset = offset
                    builder.documentLength = buffer.count
                    let result = cbor_stream_decode(base + offset, buffer.count - offset, callbacks, context)
                    switch result.status {
                    case CBOR_DECODER_FINISHED:
                        guard result.read > 0 else {
                            builder.fail(.malformed)
                            return
                        }
                        offset += result.read
                        builder.offset = offset
                        builder.completeItem()
                    case CBOR_DECODER_NEDATA:
                        builder.fail(.truncated)
                    default:
                        builder.fail(.malformed)
                    }
                }
            }
        }
        if let error = builder.error { throw error }
        guard let root = builder.root else { throw CBORError(.truncated, at: bytes.count) }
        if offset < bytes.count { throw CBORError(.trailingBytes(count: bytes.count - offset), at: offset) }
        return root
    }

    /// Every callback libcbor may call: each forwards to the `Builder` behind the context pointer.
    private static let callbacks: cbor_callbacks = {
        var c = cbor_empty_callbacks
        c.uint8 = { ctx, v in Builder.from(ctx)?.value(.unsigned(UInt64(v))) }
        c.uint16 = { ctx, v in Builder.from(ctx)?.value(.unsigned(UInt64(v))) }
        c.uint32 = { ctx, v in Builder.from(ctx)?.value(.unsigned(UInt64(v))) }
        c.uint64 = { ctx, v in Builder.from(ctx)?.value(.unsigned(v)) }
        c.negint8 = { ctx, v in Builder.from(ctx)?.value(.negative(UInt64(v))) }
        c.negint16 = { ctx, v in Builder.from(ctx)?.value(.negative(UInt64(v))) }
        c.negint32 = { ctx, v in Builder.from(ctx)?.value(.negative(UInt64(v))) }
        c.negint64 = { ctx, v in Builder.from(ctx)?.value(.negative(v)) }
        c.byte_string = { ctx, data, length in Builder.from(ctx)?.string(data, length, text: false) }
        c.byte_string_start = { ctx in Builder.from(ctx)?.indefiniteString(text: false) }
        c.string = { ctx, data, length in Builder.from(ctx)?.string(data, length, text: true) }
        c.string_start = { ctx in Builder.from(ctx)?.indefiniteString(text: true) }
        c.array_start = { ctx, count in Builder.from(ctx)?.container(count: count, map: false) }
        c.indef_array_start = { ctx in Builder.from(ctx)?.container(count: nil, map: false) }
        c.map_start = { ctx, count in Builder.from(ctx)?.container(count: count, map: true) }
        c.indef_map_start = { ctx in Builder.from(ctx)?.container(count: nil, map: true) }
        c.tag = { ctx, tag in Builder.from(ctx)?.tag(tag) }
        c.float2 = { ctx, v in Builder.from(ctx)?.value(.float(Double(v))) }
        c.float4 = { ctx, v in Builder.from(ctx)?.value(.float(Double(v))) }
        c.float8 = { ctx, v in Builder.from(ctx)?.value(.float(v)) }
        c.undefined = { ctx in Builder.from(ctx)?.value(.undefined) }
        c.null = { ctx in Builder.from(ctx)?.value(.null) }
        c.boolean = { ctx, v in Builder.from(ctx)?.value(.bool(v)) }
        c.indef_break = { ctx in Builder.from(ctx)?.breakItem() }
        return c
    }()
}

/// The value under construction: a stack of open containers, tags and indefinite strings.
///
/// Lives only for one `decode` call on one thread; libcbor reaches it through the context pointer.
private final class Builder {
    enum Frame {
        case array(remaining: Int?, items: [CBOR])
        case map(remaining: Int?, pairs: [CBOR.Pair], keys: Set<CBOR>, key: CBOR?)
        case tag(UInt64)
        case chunks(text: Bool, bytes: [UInt8])
    }

    let limits: CBORDecoder.Limits
    var stack: [Frame] = []
    var root: CBOR?
    var error: CBORError?
    /// Where the item being decoded starts; after it, where the next one starts.
    var offset = 0
    var items = 0

    init(limits: CBORDecoder.Limits) {
        self.limits = limits
    }

    /// The Builder behind the context pointer `decode` gave libcbor (it passes it back unchanged).
    static func from(_ context: UnsafeMutableRawPointer?) -> Builder? {
        guard let context else { return nil }
        return Unmanaged<Builder>.fromOpaque(context).takeUnretainedValue()
    }

    func fail(_ kind: CBORError.Kind) {
        if error == nil { error = CBORError(kind, at: offset) }
    }

    /// Counts an item against the limit; false (and failed) when over it.
    private func count() -> Bool {
        items += 1
        if items > limits.maxItems {
            fail(.tooManyItems(limit: limits.maxItems))
            return false
        }
        return true
    }

    /// A pending container check that needs the item's end: declared counts against the bytes left.
    private var pendingCount: (declared: Int, perItem: Int)?
    /// The document's length, for the declared-count check.
    var documentLength = Int.max

    func value(_ v: CBOR) {
        guard error == nil, count() else { return }
        if case .chunks? = stack.last {
            fail(.badStringChunk)
            return
        }
        attach(v)
    }

    func string(_ data: UnsafePointer<UInt8>?, _ length: Int, text: Bool) {
        guard error == nil else { return }
        let bytes = length > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: length)) : []
        if case .chunks(let chunkText, var collected)? = stack.last {
            guard chunkText == text, count() else {
                fail(.badStringChunk)
                return
            }
            stack.removeLast()
            collected.append(contentsOf: bytes)
            stack.append(.chunks(text: chunkText, bytes: collected))
            return
        }
        guard count() else { return }
        finishString(bytes, text: text)
    }

    /// A whole string (definite, or the chunks of an indefinite one): text must be UTF-8.
    private func finishString(_ bytes: [UInt8], text: Bool) {
        guard text else {
            attach(.bytes(bytes))
            return
        }
        guard let s = Self.utf8(bytes) else {
            fail(.invalidUTF8)
            return
        }
        attach(.text(s))
    }

    func indefiniteString(text: Bool) {
        guard error == nil, count(), push() else { return }
        if case .chunks? = stack.last {
            fail(.badStringChunk)
            return
        }
        stack.append(.chunks(text: text, bytes: []))
    }

    func container(count declared: Int?, map: Bool) {
        guard error == nil, count() else { return }
        if case .chunks? = stack.last {
            fail(.badStringChunk)
            return
        }
        if let declared {
            // size_t arrives as Int: a count of 2^63 or more reads negative.
            guard declared >= 0 else {
                fail(.countExceedsInput(declared: UInt64(UInt(bitPattern: declared))))
                return
            }
            if declared == 0 {
                attach(map ? .map([]) : .array([]))
                return
            }
            // Checked when the head's length is known (`completeItem`): each item takes at least a byte.
            pendingCount = (declared, map ? 2 : 1)
        }
        guard push() else { return }
        stack.append(map ? .map(remaining: declared, pairs: [], keys: [], key: nil) : .array(remaining: declared, items: []))
    }

    func tag(_ tag: UInt64) {
        guard error == nil, count() else { return }
        if case .chunks? = stack.last {
            fail(.badStringChunk)
            return
        }
        guard push() else { return }
        stack.append(.tag(tag))
    }

    func breakItem() {
        guard error == nil else { return }
        switch stack.last {
        case .array(nil, let items)?:
            stack.removeLast()
            attach(.array(items))
        case .map(nil, let pairs, _, nil)?:
            stack.removeLast()
            attach(.map(pairs))
        case .chunks(let text, let bytes)?:
            stack.removeLast()
            finishString(bytes, text: text)
        default:
            fail(.unexpectedBreak)
        }
    }

    /// Called by the driver after each item head: `offset` is now where the next item starts.
    func completeItem() {
        guard let pending = pendingCount else { return }
        pendingCount = nil
        let left = documentLength == Int.max ? Int.max : documentLength - offset
        let (needed, overflow) = pending.declared.multipliedReportingOverflow(by: pending.perItem)
        if overflow || needed > left { fail(.countExceedsInput(declared: UInt64(pending.declared))) }
    }

    private func push() -> Bool {
        if stack.count + 1 > limits.maxDepth {
            fail(.tooDeep(limit: limits.maxDepth))
            return false
        }
        return true
    }

    /// Puts a finished value into the open container (closing those it completes), or makes it the root.
    private func attach(_ value: CBOR) {
        var v = value
        while true {
            guard let top = stack.popLast() else {
                root = v
                return
            }
            switch top {
            case .tag(let t):
                v = .tagged(t, v)
                continue
            case .array(let remaining, var items):
                items.append(v)
                if let r = remaining {
                    if r - 1 == 0 {
                        v = .array(items)
                        continue
                    }
                    stack.append(.array(remaining: r - 1, items: items))
                } else {
                    stack.append(.array(remaining: nil, items: items))
                }
                return
            case .map(let remaining, var pairs, var keys, let key):
                guard let k = key else {
                    guard keys.insert(v).inserted else {
                        fail(.duplicateKey)
                        return
                    }
                    stack.append(.map(remaining: remaining, pairs: pairs, keys: keys, key: v))
                    return
                }
                pairs.append(CBOR.Pair(k, v))
                if let r = remaining {
                    if r - 1 == 0 {
                        v = .map(pairs)
                        continue
                    }
                    stack.append(.map(remaining: r - 1, pairs: pairs, keys: keys, key: nil))
                } else {
                    stack.append(.map(remaining: nil, pairs: pairs, keys: keys, key: nil))
                }
                return
            case .chunks:
                // `value`/`string` never attach inside a string; keep the frame and refuse.
                stack.append(top)
                fail(.badStringChunk)
                return
            }
        }
    }

    private static func utf8(_ bytes: [UInt8]) -> String? {
        String(validating: bytes, as: UTF8.self)
    }
}
