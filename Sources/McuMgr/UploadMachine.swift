import CBOR

/// The upload engine as a value: an image (image group) or a file (file group) sent in chunks, pipelined
/// as deep as the device's buffers allow, recovered from drops, resumed after a lost link. Events in
/// (responses, losses, the link), actions out (requests to send, progress, the end); `Uploader` performs
/// them over an `SMPClient`.
///
/// - **Chunks** fill the device's buffer: each request frame is as large as `SMPLinkLimits.maxRequestFrame`
///   allows (one write without reassembly, `buf_size` with it), data lengths a multiple of 4 but the last.
/// - **Pipeline**: up to `window` requests in flight; the first request (offset 0, carrying the length,
///   the image's `sha` and `upgrade`) goes alone, since a device that saw this `sha` before answers with
///   the offset where it stopped, and the window opens from there.
/// - **The device's offset is the truth**: each response says how many bytes the device holds. A
///   response below the end of its own request means the device dropped it (a request before it was
///   lost, or it had no buffer): the engine sends again from that offset and narrows the window by one,
///   learning the safe depth from what gets dropped (Zephyr answers from the same buffer pool, so `n`
///   buffers may hold fewer than `n` requests). A request with no response in its deadline does the same.
///   Responses to requests sent before such a rewind are only counted, never acted on twice.
/// - **A lost link** keeps what the device acknowledged; after the reconnect an image upload sends its
///   first request again (the device answers with its offset for the same `sha`), a file upload goes on
///   at the acknowledged offset (the device answers with the file's length when that differs).
public struct UploadMachine: Sendable {
    public enum Target: Sendable, Equatable {
        /// An MCUboot image: image number, the SHA-256 of the file, upgrade-only.
        case image(number: Int, sha: [UInt8], upgrade: Bool)
        /// A file at `name` on the device.
        case file(name: String)
    }

    /// A request the engine wants sent.
    public enum Request: Sendable, Equatable {
        case image(ImageUploadRequest)
        case file(FileUploadRequest)

        public var offset: Int {
            switch self {
            case .image(let r): return r.offset
            case .file(let r): return r.offset
            }
        }

        public var dataCount: Int {
            switch self {
            case .image(let r): return r.data.count
            case .file(let r): return r.data.count
            }
        }

        /// The frame's size on the wire (header included).
        public var frameSize: Int {
            switch self {
            case .image(let r): return SMPHeader.size + r.body.encodedSize
            case .file(let r): return SMPHeader.size + r.body.encodedSize
            }
        }
    }

    public typealias Tag = UInt64

    public enum Event: Sendable, Equatable {
        /// Begin (or begin again after `linkDown`, with the new link's limits).
        case start(SMPLinkLimits)
        /// The response to request `tag`: the device's offset, and `match` when it checked the image.
        case response(Tag, offset: Int?, match: Bool?)
        /// The device refused request `tag` (its error, and `len` when a file offset was not valid).
        case rejected(Tag, SMPDeviceError, length: Int?)
        /// No response to request `tag` within its deadline.
        case lost(Tag)
        /// The answer to request `tag` could not be read.
        case malformed(Tag, String)
        /// The link went down: every request in flight is void.
        case linkDown
    }

    public enum Action: Sendable, Equatable {
        case send(Tag, Request, timeout: Duration)
        /// Bytes the device holds, bytes sent so far (resent ones included).
        case progress(acknowledged: Int, sent: Int)
        /// Every byte is on the device (`match`: the device's own check of the `sha`, when it made one).
        case finished(match: Bool?)
        case failed(UploadFailure)
        case note(String)
    }

    public struct Configuration: Sendable, Equatable {
        public var requestTimeout: Duration
        /// The first request's deadline (a device may erase the slot before it answers).
        public var firstRequestTimeout: Duration
        /// Requests lost in a row, without the device's offset moving, before the upload fails.
        public var maxStalls: Int
        /// An upper bound on the window (nil: the device's buffers).
        public var maxWindow: Int?
        public init(requestTimeout: Duration = .seconds(5), firstRequestTimeout: Duration = .seconds(30), maxStalls: Int = 5,
                    maxWindow: Int? = nil) {
            self.requestTimeout = requestTimeout
            self.firstRequestTimeout = firstRequestTimeout
            self.maxStalls = maxStalls
            self.maxWindow = maxWindow
        }
    }

    private struct Sent: Sendable, Equatable {
        var offset: Int
        var length: Int
        var epoch: Int
        var first: Bool
    }

    public enum Phase: Sendable, Equatable {
        case idle, running, waitingForLink, finished, failed
    }

    public let target: Target
    public let data: [UInt8]
    public let configuration: Configuration
    public private(set) var phase: Phase = .idle
    public private(set) var limits: SMPLinkLimits?
    /// Bytes the device acknowledged.
    public private(set) var acknowledged = 0
    /// Data bytes sent, resent ones included.
    public private(set) var bytesSent = 0
    /// Requests in flight at most now.
    public private(set) var window = 1
    /// Times the device dropped requests (the window narrowed).
    public private(set) var drops = 0
    /// Times the link went down during the upload.
    public private(set) var linkLosses = 0

    private var next = 0
    private var epoch = 0
    private var nextTag: Tag = 0
    private var inFlight: [Tag: Sent] = [:]
    private var needFirst = true
    private var stalls = 0

    /// `startingAt`: bytes the device is known to hold already (a file whose first bytes were checked).
    public init(target: Target, data: [UInt8], configuration: Configuration = Configuration(), startingAt: Int = 0) {
        self.target = target
        self.data = data
        self.configuration = configuration
        self.acknowledged = max(0, min(startingAt, data.count))
    }

    public var inFlightCount: Int { inFlight.count }

    public mutating func handle(_ event: Event) -> [Action] {
        switch (phase, event) {
        case (.idle, .start(let l)), (.waitingForLink, .start(let l)):
            guard !data.isEmpty else { return fail(.empty) }
            limits = l
            // A window learned from drops on an earlier link stays learned.
            let initial = max(1, min(l.initialWindow, configuration.maxWindow ?? Int.max))
            window = drops > 0 ? min(window, initial) : initial
            phase = .running
            stalls = 0
            next = acknowledged
            epoch += 1
            switch target {
            case .image: needFirst = true
            case .file: needFirst = acknowledged == 0
            }
            return fill()
        case (.running, .response(let tag, let offset, let match)):
            guard let sent = inFlight.removeValue(forKey: tag) else { return [] }
            // The device answers in order: a request sent before this one and still unanswered was
            // either dropped or answered in a notification that was lost. Either way it holds no buffer.
            for earlier in inFlight.keys where earlier < tag { inFlight[earlier] = nil }
            return response(sent, offset: offset, match: match)
        case (.running, .rejected(let tag, let error, let length)):
            guard let sent = inFlight.removeValue(forKey: tag) else { return [] }
            if case .file = target, let length, error.code == .v2(group: .file, rc: 11) || error.code == .v1(.invalid) {
                // The file on the device is `length` bytes long: go on from there (from 0 if it is longer).
                let at = length <= data.count ? length : 0
                acknowledged = min(acknowledged, at)
                next = at
                epoch += 1
                needFirst = at == 0
                return [.note("the device's file is \(length) bytes; continuing at \(at)")] + fill()
            }
            if sent.epoch < epoch { return [.note("a request sent before a rewind was refused: \(error)")] + fill() }
            return fail(.device(error))
        case (.running, .lost(let tag)):
            guard let sent = inFlight.removeValue(forKey: tag) else { return [] }
            guard sent.epoch == epoch else { return fill() }
            stalls += 1
            if stalls > configuration.maxStalls { return fail(.stalled(acknowledged: acknowledged, attempts: stalls)) }
            drops += 1
            window = max(1, window - 1)
            rewind(to: acknowledged)
            if sent.first { needFirst = true }
            return [.note("no response to the chunk at \(sent.offset); sending again from \(acknowledged), window \(window)")] + fill()
        case (.running, .malformed(let tag, let what)):
            guard inFlight.removeValue(forKey: tag) != nil else { return [] }
            return fail(.malformed(what))
        case (.running, .linkDown):
            inFlight = [:]
            phase = .waitingForLink
            linkLosses += 1
            next = acknowledged
            return [.note("link lost at \(acknowledged) of \(data.count) bytes")]
        default:
            return []
        }
    }

    private mutating func response(_ sent: Sent, offset: Int?, match: Bool?) -> [Action] {
        guard let offset else { return fail(.malformed("a response without `off`")) }
        guard offset <= data.count else { return fail(.malformed("the device reports offset \(offset) of a \(data.count)-byte upload")) }
        var actions: [Action] = []
        if sent.first {
            needFirst = false
            rewind(to: offset)
            if offset == 0, sent.length > 0 {
                // The device took nothing of the first chunk: ask again, a bounded number of times.
                stalls += 1
                if stalls > configuration.maxStalls { return fail(.stalled(acknowledged: 0, attempts: stalls)) }
                needFirst = true
                return [.note("the device took nothing of the first chunk")] + fill()
            }
        }
        if offset < acknowledged {
            // The device lost the upload (it reset, or another client began one): start over there.
            actions.append(.note("the device went back from \(acknowledged) to \(offset)"))
            acknowledged = offset
            rewind(to: offset)
            if offset == 0 {
                stalls += 1
                if stalls > configuration.maxStalls { return fail(.stalled(acknowledged: 0, attempts: stalls)) }
                if case .image = target { needFirst = true }
            }
            return actions + [.progress(acknowledged: acknowledged, sent: bytesSent)] + fill()
        }
        if offset > acknowledged {
            acknowledged = offset
            stalls = 0
            actions.append(.progress(acknowledged: acknowledged, sent: bytesSent))
        }
        // The device holds more than was sent since the last rewind (a resent chunk it had already): go on from there.
        if offset > next { next = offset }
        if acknowledged == data.count {
            if case .image = target, match == false {
                return actions + fail(.hashMismatch)
            }
            phase = .finished
            inFlight = [:]
            return actions + [.finished(match: match)]
        }
        if !sent.first, sent.epoch == epoch, offset < sent.offset + sent.length, offset < next {
            // This request's data was not taken: a request before it was dropped, or it was.
            drops += 1
            window = max(1, window - 1)
            actions.append(.note("the device dropped data at \(offset) (\(inFlight.count + 1) in flight); window \(window)"))
            rewind(to: offset)
        }
        return actions + fill()
    }

    /// Sends again from `offset`: requests in flight now belong to an older epoch, and their answers
    /// are only counted.
    private mutating func rewind(to offset: Int) {
        next = offset
        epoch += 1
    }

    /// Sends requests while the window has room. The first request goes alone.
    private mutating func fill() -> [Action] {
        guard phase == .running, let limits else { return [] }
        var actions: [Action] = []
        if needFirst {
            guard !inFlight.values.contains(where: \.first), inFlight.count < window else { return [] }
            return send(at: isImage ? 0 : next, first: true, limits: limits)
        }
        while inFlight.count < window, next < data.count {
            let sent = send(at: next, first: false, limits: limits)
            actions += sent
            if case .failed? = sent.last { break }
        }
        return actions
    }

    private mutating func send(at offset: Int, first: Bool, limits: SMPLinkLimits) -> [Action] {
        // A first request sent to resume (the device holds bytes of this upload) is a probe: the device
        // answers its offset and drops the data, so it carries only what a new upload's first chunk must
        // (the image header), not a whole buffer.
        let probe = first && acknowledged > 0 && isImage
        guard let request = makeRequest(offset: offset, first: first, frameLimit: limits.maxRequestFrame,
                                        maxData: probe ? Self.probeData : nil) else {
            return fail(.chunkTooSmall(frameLimit: limits.maxRequestFrame))
        }
        nextTag += 1
        inFlight[nextTag] = Sent(offset: offset, length: request.dataCount, epoch: epoch, first: first)
        bytesSent += request.dataCount
        next = offset + request.dataCount
        return [.send(nextTag, request, timeout: first ? configuration.firstRequestTimeout : configuration.requestTimeout)]
    }

    private var isImage: Bool {
        if case .image = target { return true }
        return false
    }

    /// Data in a first request that resumes: more than an MCUboot header (the device reads it when the
    /// upload turns out to be new), a multiple of 4.
    static let probeData = 256

    /// The request for the chunk at `offset`, its data as long as the frame limit (and `maxData`) allows.
    func makeRequest(offset: Int, first: Bool, frameLimit: Int, maxData: Int? = nil) -> Request? {
        let remaining = min(data.count - offset, maxData ?? Int.max)
        func build(_ chunk: [UInt8]) -> Request {
            switch target {
            case .image(let number, let sha, let upgrade):
                return .image(first ? ImageUploadRequest(image: number == 0 ? nil : number, length: data.count, offset: offset, sha: sha,
                                                         data: chunk, upgrade: upgrade ? true : nil)
                                    : ImageUploadRequest(offset: offset, data: chunk))
            case .file(let name):
                return .file(FileUploadRequest(offset: offset, data: chunk, name: name, length: offset == 0 ? data.count : nil))
            }
        }
        let empty = build([])
        // Everything but the data's bytes and its head (1 byte for an empty string).
        let available = frameLimit - empty.frameSize + 1
        var n = min(remaining, max(0, available - 1))
        while n > 0 && n + CBOR.headSize(UInt64(n)) > available { n -= 1 }
        if offset + n < data.count && n >= 8 { n -= n % 4 }
        guard n > 0 || remaining == 0 else { return nil }
        return build(Array(data[offset..<offset + n]))
    }

    private mutating func fail(_ failure: UploadFailure) -> [Action] {
        phase = .failed
        inFlight = [:]
        return [.failed(failure)]
    }
}

/// Why an upload gave up.
public enum UploadFailure: Error, Sendable, Equatable, CustomStringConvertible {
    case device(SMPDeviceError)
    case malformed(String)
    /// Requests kept getting lost without the device's offset moving.
    case stalled(acknowledged: Int, attempts: Int)
    /// The device checked the uploaded bytes against the `sha` and they do not match.
    case hashMismatch
    /// The device's buffer cannot hold a request with any data.
    case chunkTooSmall(frameLimit: Int)
    case empty
    /// The link failed beyond what the upload recovers from (reconnects exhausted, no connection).
    case transport(SMPError)

    public var description: String {
        switch self {
        case .device(let e): return e.description
        case .malformed(let m): return "malformed upload response: \(m)"
        case .stalled(let at, let attempts): return "the upload made no progress at byte \(at) after \(attempts) lost requests"
        case .hashMismatch: return "the device reports that the uploaded image does not match its SHA-256"
        case .chunkTooSmall(let limit): return "a request of at most \(limit) bytes cannot carry any data"
        case .empty: return "nothing to upload"
        case .transport(let e): return e.description
        }
    }
}
