import CBOR

// Application/software image management group (1): Zephyr, "Application/software image management group".

/// Get the state of images (command 0, read).
public struct ImageStateReadRequest: SMPRequest {
    public typealias Response = ImageStateResponse
    public static let group = SMPGroup.image
    public static let command: UInt8 = 0
    public static let op = SMPOp.read
    public init() {}
    public init(body: CBOR) throws(SMPMessageError) { _ = try SMPFields(body, "image state request") }
    public var body: CBOR { .map([]) }
}

/// Set the state of an image (command 0, write): mark the image with `hash` for test (`confirm` false),
/// or confirm (`confirm` true; without a hash, the running image).
public struct ImageStateWriteRequest: SMPRequest {
    public typealias Response = ImageStateResponse
    public static let group = SMPGroup.image
    public static let command: UInt8 = 0
    public static let op = SMPOp.write
    public var hash: [UInt8]?
    public var confirm: Bool
    public init(hash: [UInt8]?, confirm: Bool) {
        self.hash = hash
        self.confirm = confirm
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "image state write")
        hash = try f.bytes("hash")
        confirm = try f.bool("confirm") ?? false
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("hash", hash.map { .bytes($0) })
        b.add("confirm", .bool(confirm))
        return b.cbor
    }
}

/// One slot's entry in an image state response.
public struct ImageSlotState: Sendable, Hashable {
    public var image: Int?
    public var slot: Int
    public var version: String
    /// The SHA-256 TLV of the image in the slot.
    public var hash: [UInt8]?
    public var bootable: Bool
    /// Set for the next boot (for test, or permanently).
    public var pending: Bool
    public var confirmed: Bool
    /// The running image.
    public var active: Bool
    /// Stays in the primary slot after the next boot.
    public var permanent: Bool

    public init(image: Int? = nil, slot: Int, version: String, hash: [UInt8]?, bootable: Bool = true, pending: Bool = false,
                confirmed: Bool = false, active: Bool = false, permanent: Bool = false) {
        self.image = image
        self.slot = slot
        self.version = version
        self.hash = hash
        self.bootable = bootable
        self.pending = pending
        self.confirmed = confirmed
        self.active = active
        self.permanent = permanent
    }

    init(_ item: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(item, "image state entry")
        image = try f.size("image")
        slot = try f.size(required: "slot")
        version = try f.text(required: "version")
        hash = try f.bytes("hash")
        bootable = try f.bool("bootable") ?? false
        pending = try f.bool("pending") ?? false
        confirmed = try f.bool("confirmed") ?? false
        active = try f.bool("active") ?? false
        permanent = try f.bool("permanent") ?? false
    }

    /// The entry as Zephyr writes it: false flags left out.
    var cbor: CBOR {
        var b = SMPBody()
        b.add("image", image.map { .unsigned(UInt64($0)) })
        b.add("slot", .unsigned(UInt64(slot)))
        b.add("version", .text(version))
        b.add("hash", hash.map { .bytes($0) })
        b.add("bootable", bootable ? CBOR.bool(true) : nil)
        b.add("pending", pending ? CBOR.bool(true) : nil)
        b.add("confirmed", confirmed ? CBOR.bool(true) : nil)
        b.add("active", active ? CBOR.bool(true) : nil)
        b.add("permanent", permanent ? CBOR.bool(true) : nil)
        return b.cbor
    }
}

public struct ImageStateResponse: SMPMessage {
    public var images: [ImageSlotState]
    public var splitStatus: Int64?
    public init(images: [ImageSlotState], splitStatus: Int64? = nil) {
        self.images = images
        self.splitStatus = splitStatus
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "image state response")
        var images: [ImageSlotState] = []
        for item in try f.array(required: "images") { images.append(try ImageSlotState(item)) }
        self.images = images
        splitStatus = try f.int("splitStatus")
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("images", .array(images.map(\.cbor)))
        b.add("splitStatus", splitStatus.map { .int($0) })
        return b.cbor
    }

    /// The entry of `slot` of image `image` (an entry without `image` is image 0).
    public func slot(_ slot: Int, image: Int = 0) -> ImageSlotState? {
        images.first { ($0.image ?? 0) == image && $0.slot == slot }
    }
}

/// Image upload (command 1, write): one chunk at `off`. The first chunk (offset 0) also carries the
/// image number, the whole length, the upload's SHA-256 (so a device can continue an upload it saw
/// before) and `upgrade` (refuse anything not newer than the running image).
public struct ImageUploadRequest: SMPRequest {
    public typealias Response = ImageUploadResponse
    public static let group = SMPGroup.image
    public static let command: UInt8 = 1
    public static let op = SMPOp.write
    public var image: Int?
    public var length: Int?
    public var offset: Int
    public var sha: [UInt8]?
    public var data: [UInt8]
    public var upgrade: Bool?
    public init(image: Int? = nil, length: Int? = nil, offset: Int, sha: [UInt8]? = nil, data: [UInt8], upgrade: Bool? = nil) {
        self.image = image
        self.length = length
        self.offset = offset
        self.sha = sha
        self.data = data
        self.upgrade = upgrade
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "image upload request")
        image = try f.size("image")
        length = try f.size("len")
        offset = try f.size(required: "off")
        sha = try f.bytes("sha")
        data = try f.bytes(required: "data")
        upgrade = try f.bool("upgrade")
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("image", image.map { .unsigned(UInt64($0)) })
        b.add("len", length.map { .unsigned(UInt64($0)) })
        b.add("off", .unsigned(UInt64(offset)))
        b.add("sha", sha.map { .bytes($0) })
        b.add("data", .bytes(data))
        b.add("upgrade", upgrade.map { .bool($0) })
        return b.cbor
    }
}

public struct ImageUploadResponse: SMPMessage {
    /// The device's offset: the bytes it holds so far (where the next chunk must start).
    public var offset: Int?
    /// In the last response, whether the whole upload matched the `sha` (when the device checks).
    public var match: Bool?
    public init(offset: Int?, match: Bool? = nil) {
        self.offset = offset
        self.match = match
    }
    public init(body: CBOR) throws(SMPMessageError) {
        let f = try SMPFields(body, "image upload response")
        offset = try f.size("off")
        match = try f.bool("match")
    }
    public var body: CBOR {
        var b = SMPBody()
        b.add("off", offset.map { .unsigned(UInt64($0)) })
        b.add("match", match.map { .bool($0) })
        return b.cbor
    }
}

/// Image erase (command 5, write): erases a slot (1 when not given).
public struct ImageEraseRequest: SMPRequest {
    public typealias Response = EmptyResponse
    public static let group = SMPGroup.image
    public static let command: UInt8 = 5
    public static let op = SMPOp.write
    public var slot: Int?
    public init(slot: Int? = nil) { self.slot = slot }
    public init(body: CBOR) throws(SMPMessageError) { slot = try SMPFields(body, "image erase request").size("slot") }
    public var body: CBOR {
        var b = SMPBody()
        b.add("slot", slot.map { .unsigned(UInt64($0)) })
        return b.cbor
    }
}
