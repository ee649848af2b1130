/// Why bytes are not an acceptable CBOR document: what was wrong, and at which byte offset.
public struct CBORError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The input ended inside an item.
        case truncated
        /// libcbor refused the bytes (a reserved or unassigned initial byte, an unknown simple value).
        case malformed
        /// Containers nested deeper than the limit.
        case tooDeep(limit: Int)
        /// More items than the limit.
        case tooManyItems(limit: Int)
        /// The document is longer than the limit.
        case tooLarge(size: Int, limit: Int)
        /// A container declares more items than the bytes left could hold.
        case countExceedsInput(declared: UInt64)
        /// A text string that is not UTF-8.
        case invalidUTF8
        /// A map holds the same key twice.
        case duplicateKey
        /// A break outside an indefinite-length item, or a map closed after a key.
        case unexpectedBreak
        /// An indefinite-length string holding something other than strings of its own type.
        case badStringChunk
        /// Bytes after the item.
        case trailingBytes(count: Int)
    }

    public var kind: Kind
    /// Byte offset in the document where the problem was found.
    public var offset: Int

    public init(_ kind: Kind, at offset: Int) {
        self.kind = kind
        self.offset = offset
    }

    public var description: String {
        let what: String
        switch kind {
        case .truncated: what = "the document ends inside an item"
        case .malformed: what = "malformed item (reserved or unassigned initial byte)"
        case .tooDeep(let limit): what = "nested deeper than \(limit) levels"
        case .tooManyItems(let limit): what = "more than \(limit) items"
        case .tooLarge(let size, let limit): what = "\(size) bytes, more than the \(limit) allowed"
        case .countExceedsInput(let declared): what = "a container declares \(declared) items, more than the bytes left could hold"
        case .invalidUTF8: what = "a text string is not valid UTF-8"
        case .duplicateKey: what = "a map holds the same key twice"
        case .unexpectedBreak: what = "unexpected break"
        case .badStringChunk: what = "an indefinite-length string holds something other than its own strings"
        case .trailingBytes(let count): what = "\(count) byte(s) after the item"
        }
        return "CBOR: \(what) (at byte \(offset))"
    }
}
